"""A group whose measure is all NULL, under ROLLUP: withheld by the query-set-size
control, with nothing left for secondary suppression to protect (once a crash in the
MILP set-up, which then left the request unlogged)."""

from __future__ import annotations

from pathlib import Path

import yaml

from guard import Guard


def test_rollup_over_a_group_without_values_is_answered_and_logged(tmp_path: Path) -> None:
    (tmp_path / "facts.csv").write_text("id,colour,m\nr0,blue,\nr1,red,25\nr2,red,20\n")
    policy = {
        "name": "nulls",
        "protection": {"min_query_set_size": 1, "allow_full_population": True},
        "tables": {
            "facts": {
                "source": {"csv": "facts.csv"},
                "privacy_unit": "id",
                "columns": {
                    "id": {"role": "identifier"},
                    "colour": {"role": "dimension"},
                    "m": {"role": "measure", "bounds": [0, 100]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    (tmp_path / "nulls.yaml").write_text(yaml.safe_dump(policy))
    with Guard.open(tmp_path / "nulls.yaml", state=tmp_path / "state") as guard:
        result = guard.query("SELECT colour, SUM(m) FROM facts GROUP BY ROLLUP (colour)", analyst="alice")
        assert result.rows == [["blue", None], ["red", 45], [None, 45]]
        assert result.flags[0] == ["released", "suppressed"]
        assert len(guard.store.log()) == 1
