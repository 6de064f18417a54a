"""A data change elsewhere does not redraw a table's suppression pattern (issue 16,
family 4): the pattern's secret seed depends on the table asked, not on the data
version, so two patterns of one table cannot be combined after an unrelated append.

The table is symmetric on purpose: one dominated cell in a 4 x 4 grid of equal cells,
so many secondary patterns cost the same and the seed alone chooses among them (with a
seed per data version, five appends outside the table redraw it almost surely)."""

from __future__ import annotations

from pathlib import Path

import yaml

from guard import Guard

TABLE = "SELECT a, b, SUM(pay) FROM grid WHERE a <> 'z' GROUP BY CUBE (a, b)"


def _write(csv: Path, extra: int) -> None:
    lines = ["person,a,b,pay"]
    n = 0
    for a in "pqrs":
        for b in "wxyz":
            for i in range(6):
                pay = 1000 if (a, b, i) == ("p", "w", 0) else 10
                lines.append(f"u{n},{a},{b},{pay}")
                n += 1
    lines += [f"e{i},z,w,10" for i in range(10 + extra)]  # outside the table asked
    csv.write_text("\n".join(lines) + "\n")


def _pattern(policy: Path, state: Path) -> list[tuple[object, ...]]:
    with Guard.open(policy, state=state) as guard:
        result = guard.query(TABLE, "alice")
    return sorted(
        (str(row[0]), str(row[1]), flags[2]) for row, flags in zip(result.rows, result.flags, strict=True)
    )


def test_unrelated_appends_keep_the_pattern(tmp_path: Path) -> None:
    csv = tmp_path / "grid.csv"
    _write(csv, 0)
    document = {
        "name": "grid",
        "protection": {
            "min_query_set_size": 3,
            "rules": [{"dominance": {"n": 1, "k": 0.8}}],
            "history": {"audit": "off"},
        },
        "tables": {
            "grid": {
                "source": {"csv": str(csv)},
                "privacy_unit": "person",
                "columns": {
                    "person": {"role": "identifier"},
                    "a": {"role": "dimension"},
                    "b": {"role": "dimension"},
                    "pay": {"role": "measure", "bounds": [0, 5000]},
                },
            }
        },
        "analysts": {"alice": {}},
    }
    policy = tmp_path / "grid.yaml"
    policy.write_text(yaml.safe_dump(document))
    before = _pattern(policy, tmp_path / "state")
    assert sum(flag != "released" for _, _, flag in before) >= 4, before
    for extra in range(1, 6):
        _write(csv, extra)
        assert _pattern(policy, tmp_path / "state") == before, extra
