"""A small skewed table for the ``guard explain`` tests: differences of large answers
isolate a person or two (rare ``a3`` and ``c1``), so the history audit withholds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

DIMENSIONS = {"a": ("a0", "a1", "a2", "a3"), "b": ("b0", "b1", "b2"), "c": ("c0", "c1")}
SHARES = {"a": (0.4, 0.3, 0.25, 0.05), "b": (0.5, 0.3, 0.2), "c": (0.95, 0.05)}
BOUNDS = (0.0, 100.0)


def skewed_table(folder: Path, seed: int, persons: int) -> tuple[Path, pd.DataFrame]:
    """The policy (table ``t``: one row per ``person``, dimensions a, b, c, measure ``m``
    in [0, 100], k = 3, linked tables off) and the data it reads."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "person": np.arange(persons),
            **{d: rng.choice(v, persons, p=SHARES[d]) for d, v in DIMENSIONS.items()},
        }
    )
    frame["m"] = rng.integers(0, 100, persons)
    frame.to_parquet(folder / "t.parquet", index=False)
    columns: dict[str, object] = {
        "person": {"role": "identifier"},
        "m": {"role": "measure", "bounds": list(BOUNDS)},
    }
    columns.update({d: {"role": "dimension"} for d in DIMENSIONS})
    policy = {
        "name": "skewed",
        "protection": {"min_query_set_size": 3, "suppression": {"linked": "none"}},
        "tables": {"t": {"source": {"parquet": "t.parquet"}, "privacy_unit": "person", "columns": columns}},
        "analysts": {"alice": {}},
    }
    path = folder / "policy.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path, frame
