"""Generate hospital.csv and hospital-rich.csv: patients of one hospital unit (seed 001).

The seed asks for the mean monthly income of a unit's patients per town. Enfield holds the
seed's ten incomes (mean 3300); hospital-rich.csv adds Ms. Rich (100000 a month) to Enfield,
which lifts the mean to 12090.91 and so reveals that she attended the unit -- the attack
the guard must stop. Five other towns get plausible random incomes so that Enfield is not
the whole table.

Stdlib only and deterministic: ``python examples/hospital/make_hospital.py [OUTPUT_DIR]``
writes both files into OUTPUT_DIR (default: this script's folder), byte-identical each run.
"""

from __future__ import annotations

import csv
import math
import random
import sys
from pathlib import Path

SEED = 2018
ENFIELD = "Enfield"
# The seed's ten incomes, in the seed's order (mean 3300).
ENFIELD_INCOMES = (1000, 2000, 3000, 2000, 1000, 6000, 2000, 10000, 2000, 4000)
RICH_INCOME = 100_000
# Other towns and their median monthly income; sizes are drawn in 15..60.
OTHER_TOWNS = {
    "Barnet": 3200,
    "Camden": 3800,
    "Hackney": 2800,
    "Haringey": 2900,
    "Islington": 3500,
}
MIN_INCOME, MAX_INCOME = 800, 12_000

Row = tuple[str, str, int]


def town_incomes(median: int, n: int, rng: random.Random) -> list[int]:
    """`n` log-normal monthly incomes around `median`, rounded to 10 and clipped to range."""
    incomes = []
    for _ in range(n):
        raw = rng.lognormvariate(math.log(median), 0.45)
        incomes.append(min(MAX_INCOME, max(MIN_INCOME, round(raw / 10) * 10)))
    return incomes


def build_rows() -> list[Row]:
    """One (patient_id, town, income) row per patient, shuffled, ids given after shuffling."""
    rng = random.Random(SEED)
    patients = [(ENFIELD, income) for income in ENFIELD_INCOMES]
    for town, median in OTHER_TOWNS.items():
        n = rng.randint(15, 60)
        patients.extend((town, income) for income in town_incomes(median, n, rng))
    rng.shuffle(patients)
    return [(f"H{k:04d}", town, income) for k, (town, income) in enumerate(patients, start=1)]


def write_csv(path: Path, rows: list[Row]) -> Path:
    """Write `rows` with a header (Unix newlines, so the file is byte-stable)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(("patient_id", "town", "income"))
        writer.writerows(rows)
    return path


def write_all(out_dir: Path) -> list[Path]:
    """Write hospital.csv and hospital-rich.csv (same rows plus Ms. Rich) into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = build_rows()
    rich = (f"H{len(rows) + 1:04d}", ENFIELD, RICH_INCOME)
    return [
        write_csv(out_dir / "hospital.csv", rows),
        write_csv(out_dir / "hospital-rich.csv", [*rows, rich]),
    ]


def main(argv: list[str]) -> None:
    """Entry point: optional single argument is the output folder."""
    out_dir = Path(argv[0]) if argv else Path(__file__).resolve().parent
    for path in write_all(out_dir):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
