"""Utility across a sequence of routine CUBE tables on generated persons (issue 17).

Reproduce (from the repository root, in the project's virtualenv)::

    python benchmarks/bench_routine.py [--rows 100000] [--rules threshold|dominance] [--tables N]

Data: ``--rows`` generated persons (numpy seed ``--seed``), one row each: region (8,
skewed), age band (8), sex (2), occupation (20, of which 10 rare: a few dozen people
each) and a lognormal income. Policy: ``min_query_set_size`` 10, the threshold rule 10
(``--rules threshold``), plus (2, 80 %)-dominance by default; income bounded [0, 10^7];
the history audit and linked tables at their defaults. Ten routine tables, every one a
CUBE, asked in order on one state (the issue's two tables sharing only the grand total
come first); each is also asked alone on a fresh state.

Printed per table: aggregate cells released in the sequence and alone, their ratio, and
the seconds of each. The targets (issue 17): no table that is safe given the history is
refused, and every table keeps at least 90 % of its fresh-state cells. Exit status 0
always: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.bench_session import compare_in_order

DIMENSIONS = ("region", "ageband", "sex", "occupation")
TABLES = (
    "SELECT occupation, sex, SUM(income) FROM persons GROUP BY CUBE (occupation, sex)",
    "SELECT region, ageband, AVG(income) FROM persons GROUP BY CUBE (region, ageband)",
    "SELECT region, sex, COUNT(*) FROM persons GROUP BY CUBE (region, sex)",
    "SELECT occupation, ageband, AVG(income) FROM persons GROUP BY CUBE (occupation, ageband)",
    "SELECT sex, ageband, SUM(income) FROM persons GROUP BY CUBE (sex, ageband)",
    "SELECT region, occupation, COUNT(*) FROM persons GROUP BY CUBE (region, occupation)",
    "SELECT region, SUM(income) FROM persons GROUP BY CUBE (region)",
    "SELECT occupation, COUNT(*), AVG(income) FROM persons GROUP BY CUBE (occupation)",
    "SELECT region, ageband, sex, COUNT(*) FROM persons GROUP BY CUBE (region, ageband, sex)",
    "SELECT region, sex, AVG(income) FROM persons GROUP BY CUBE (region, sex)",
)


def generate(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    regions = 8
    weights = 1.0 / np.arange(1, regions + 1) ** 0.8
    region = rng.choice(regions, size=rows, p=weights / weights.sum())
    ageband = rng.choice(8, size=rows)
    sex = rng.choice(2, size=rows)
    # ten common occupations and ten rare ones (about 0.05 % of people each)
    occupation_weights = np.concatenate([np.full(10, 0.995 / 10), np.full(10, 0.005 / 10)])
    occupation = rng.choice(20, size=rows, p=occupation_weights)
    income = rng.lognormal(10.3, 0.7, size=rows).round(2)
    return pd.DataFrame(
        {
            "person": np.arange(1, rows + 1),
            "region": [f"R{r + 1}" for r in region],
            "ageband": [f"{20 + 5 * a}-{24 + 5 * a}" for a in ageband],
            "sex": np.where(sex == 0, "F", "M"),
            "occupation": [f"O{o + 1:02d}" for o in occupation],
            "income": income,
        }
    )


def write_policy(folder: Path, rows: int, seed: int, rules: str) -> Path:
    generate(rows, seed).to_parquet(folder / "persons.parquet", index=False)
    columns: dict[str, dict[str, object]] = {"person": {"role": "identifier"}}
    columns.update({name: {"role": "dimension"} for name in DIMENSIONS})
    columns["income"] = {"role": "measure", "bounds": [0, 10_000_000]}
    chosen: list[dict[str, object]] = [{"threshold": 10}]
    if rules == "dominance":
        chosen.append({"dominance": {"n": 2, "k": 0.8}})
    policy = {
        "name": "routine",
        "state": "state",
        "protection": {"min_query_set_size": 10, "rules": chosen},
        "tables": {
            "persons": {
                "source": {"parquet": "persons.parquet"},
                "privacy_unit": "person",
                "columns": columns,
            }
        },
        "analysts": {"analyst": {"description": "bench_routine"}},
    }
    path = folder / "routine.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="generated persons (default 100,000)")
    parser.add_argument("--seed", type=int, default=20261128, help="numpy seed of the data")
    parser.add_argument("--rules", choices=("threshold", "dominance"), default="dominance")
    parser.add_argument("--tables", type=int, default=len(TABLES), help="ask only the first N tables")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_routine_"))
    try:
        policy = write_policy(folder, args.rows, args.seed, args.rules)
        print(f"{args.rows:,} persons, rules: {args.rules}")
        compare_in_order(policy, folder, TABLES[: args.tables], DIMENSIONS, "table")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
