"""Generate castro.csv: person-level microdata behind the Castro (2012) P x M tables (seed 000).

The seed only publishes the aggregated frequency and salary tables, yet the guard works on
microdata, so this script invents one row per person that tabulates exactly to both tables.
Three cells are built to be sensitive, as in the seed's discussion:

* (M1, P1): two people earning 160 and 200 -- each can recover the other's salary;
* (M2, P3): one person earning 22 -- the external attack;
* (M3, P5): five people earning 350, 4, 3, 3, 3 -- a dominant contributor.

(M1, P2) contains the seed's "file A" records (40, 60, 75). Every other cell total is spread
over its people with mild random variation, so no cell is sensitive under threshold 3,
(1, 0.5)-dominance or the p% rule with p = 10%.

Stdlib only and deterministic: ``python examples/castro/make_castro.py [OUTPUT_DIR]`` writes
castro.csv into OUTPUT_DIR (default: this script's folder), byte-identical on every run.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

SEED = 2012
MUNICIPALITIES = ("M1", "M2", "M3")
PROFESSIONS = ("P1", "P2", "P3", "P4", "P5")

# Castro (2012) frequency table: rows M1..M3, columns P1..P5 (total 346).
FREQUENCIES = (
    (2, 15, 30, 20, 10),
    (72, 20, 1, 30, 10),
    (38, 38, 15, 40, 5),
)
# Castro (2012) magnitude table: total salary per cell (total 8620).
MAGNITUDES = (
    (360, 450, 720, 400, 360),
    (1440, 540, 22, 570, 320),
    (722, 1178, 375, 800, 363),
)
# Salaries fixed by the seed; the rest of each cell is spread by `spread`.
FIXED: dict[tuple[str, str], tuple[int, ...]] = {
    ("M1", "P1"): (160, 200),
    ("M1", "P2"): (40, 60, 75),
    ("M2", "P3"): (22,),
    ("M3", "P5"): (350, 4, 3, 3, 3),
}


def spread(total: int, n: int, rng: random.Random) -> list[int]:
    """Split `total` into `n` positive integers near total/n (weights 8..12, exact sum).

    Integer largest-remainder apportionment keeps the result exact and platform-independent.
    """
    weights = [rng.randint(8, 12) for _ in range(n)]
    weight_sum = sum(weights)
    shares = [total * w // weight_sum for w in weights]
    remainders = [total * w % weight_sum for w in weights]
    by_remainder = sorted(range(n), key=lambda i: (-remainders[i], i))
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    if min(shares) <= 0:
        raise ValueError(f"cannot spread {total} over {n} people with positive salaries")
    return shares


def cell_salaries(m: str, p: str, rng: random.Random) -> list[int]:
    """All salaries of one (municipality, profession) cell, summing to the seed tables."""
    i, j = MUNICIPALITIES.index(m), PROFESSIONS.index(p)
    count, total = FREQUENCIES[i][j], MAGNITUDES[i][j]
    fixed = list(FIXED.get((m, p), ()))
    rest_n, rest_total = count - len(fixed), total - sum(fixed)
    if rest_n == 0:
        if rest_total != 0:
            raise ValueError(f"fixed salaries of ({m}, {p}) do not add up to {total}")
        return fixed
    return fixed + spread(rest_total, rest_n, rng)


def build_rows() -> list[tuple[str, str, str, int]]:
    """One (person_id, municipality, profession, salary) row per person, shuffled.

    Ids are given after the shuffle, so neither row order nor id reveals the cell.
    """
    rng = random.Random(SEED)
    people = [
        (m, p, salary) for m in MUNICIPALITIES for p in PROFESSIONS for salary in cell_salaries(m, p, rng)
    ]
    rng.shuffle(people)
    return [(f"C{k:04d}", m, p, salary) for k, (m, p, salary) in enumerate(people, start=1)]


def write_csv(out_dir: Path) -> Path:
    """Write castro.csv into `out_dir` (Unix newlines, so the file is byte-stable)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "castro.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(("person_id", "municipality", "profession", "salary"))
        writer.writerows(build_rows())
    return path


def main(argv: list[str]) -> None:
    """Entry point: optional single argument is the output folder."""
    out_dir = Path(argv[0]) if argv else Path(__file__).resolve().parent
    print(write_csv(out_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
