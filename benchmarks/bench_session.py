"""Utility across a session: what a sequence of ordinary questions keeps (issue 17).

Reproduce (from the repository root, in the project's virtualenv; needs statsmodels,
``pip install -e '.[bench]'``)::

    python benchmarks/bench_session.py

The Fair (1978) affairs survey that ships inside statsmodels (6,366 women, one row each,
a respondent id added) under a policy with k = 10, threshold 10, dominance (2, 80 %),
measure ``affairs`` bounded [0, 60], the history audit and linked tables at their
defaults. Fifteen ordinary questions are asked in order on one state; each is also asked
alone on a fresh state. Printed per question: cells released in the session and alone,
their ratio, and the time of each. The target (issue 17): every answerable question
keeps at least 90 % of the cells it releases alone; the two large-group questions
(``children = 0`` after ``children > 0``; ``ROLLUP (yrs_married)``) fully answered.
Exit status 0 always: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from guard import Guard
from guard.errors import GuardError

QUESTIONS = (
    "SELECT COUNT(*), AVG(affairs) FROM fair",
    "SELECT rate_marriage, COUNT(*), AVG(affairs) FROM fair GROUP BY rate_marriage",
    "SELECT religious, AVG(affairs) FROM fair GROUP BY religious",
    "SELECT age, COUNT(*) FROM fair GROUP BY age",
    "SELECT educ, SUM(affairs) FROM fair GROUP BY educ",
    "SELECT yrs_married, AVG(affairs) FROM fair GROUP BY ROLLUP (yrs_married)",
    "SELECT AVG(affairs) FROM fair WHERE children > 0",
    "SELECT AVG(affairs) FROM fair WHERE children = 0",
    "SELECT occupation, occupation_husb, AVG(affairs) FROM fair GROUP BY occupation, occupation_husb",
    "SELECT rate_marriage, religious, COUNT(*) FROM fair GROUP BY CUBE (rate_marriage, religious)",
    "SELECT age, AVG(affairs) FROM fair WHERE rate_marriage >= 4 GROUP BY age",
    "SELECT children, SUM(affairs) FROM fair GROUP BY children",
    "SELECT educ, occupation, COUNT(*) FROM fair GROUP BY educ, occupation",
    "SELECT yrs_married, religious, AVG(affairs) FROM fair GROUP BY yrs_married, religious",
    "SELECT AVG(affairs) FROM fair WHERE age BETWEEN 22 AND 32 AND children > 0",
)
DIMENSIONS = (
    "rate_marriage",
    "age",
    "yrs_married",
    "children",
    "religious",
    "educ",
    "occupation",
    "occupation_husb",
)


def write_policy(folder: Path) -> Path:
    from statsmodels.datasets import fair  # optional: the bench extra

    data = fair.load_pandas().data
    data.insert(0, "respondent", range(1, len(data) + 1))
    data.to_csv(folder / "fair.csv", index=False)
    columns: dict[str, dict[str, object]] = {"respondent": {"role": "identifier"}}
    columns.update({name: {"role": "dimension"} for name in DIMENSIONS})
    columns["affairs"] = {"role": "measure", "bounds": [0, 60]}
    policy = {
        "name": "fair",
        "state": "state",
        "protection": {
            "min_query_set_size": 10,
            "rules": [{"threshold": 10}, {"dominance": {"n": 2, "k": 0.8}}],
        },
        "tables": {"fair": {"source": {"csv": "fair.csv"}, "privacy_unit": "respondent", "columns": columns}},
        "analysts": {"analyst": {"description": "bench_session"}},
    }
    path = folder / "fair.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def released(
    guard: Guard, sql: str, dimensions: tuple[str, ...] = DIMENSIONS
) -> tuple[int | None, int, float, str]:
    """(aggregate cells released or None when refused, aggregate cells, seconds, note);
    ``dimensions``: the columns that are group keys, not aggregates."""
    start = time.perf_counter()
    try:
        result = guard.query(sql, "analyst")
    except GuardError as error:
        return None, 0, time.perf_counter() - start, str(error)[:90]
    seconds = time.perf_counter() - start
    group_columns = sum(1 for c in result.columns if c in dimensions)
    flags = [f for row in result.flags for f in row[group_columns:]]
    note = result.notes[0][:90] if result.notes else ""
    return sum(f != "suppressed" for f in flags), len(flags), seconds, note


def compare_in_order(
    policy: Path, folder: Path, questions: Sequence[str], dimensions: tuple[str, ...], noun: str
) -> None:
    """Ask ``questions`` in order on one state and each alone on a fresh state (under
    ``folder``); print cells released in both, the share kept and the seconds, then how
    many keep at least 90 % and how many were refused in the sequence only."""
    print(f"{'#':>2} {'sequence':>9} {'alone':>9} {'kept':>6} {'s (seq)':>8} {'s (alone)':>9}  {noun}")
    kept_ok = refused = answerable = 0
    with Guard.open(policy, state=folder / "sequence") as sequence:
        for number, sql in enumerate(questions, start=1):
            fresh_state = folder / f"fresh-{number}"
            with Guard.open(policy, state=fresh_state) as fresh:
                alone, cells, alone_s, _ = released(fresh, sql, dimensions)
            shutil.rmtree(fresh_state, ignore_errors=True)
            got, cells_s, seq_s, note = released(sequence, sql, dimensions)
            shown_alone = "refused" if alone is None else f"{alone}/{cells}"
            shown_seq = "refused" if got is None else f"{got}/{cells_s}"
            ratio = ""
            if alone:
                answerable += 1
                share = (got or 0) / alone
                kept_ok += share >= 0.9
                refused += got is None
                ratio = f"{100 * share:5.0f}%"
            times = f"{seq_s:>8.2f} {alone_s:>9.2f}"
            print(f"{number:>2} {shown_seq:>9} {shown_alone:>9} {ratio:>6} {times}  {sql}")
            if note and (got is None or (alone and (got or 0) < alone)):
                print(f"{'':>48}  note: {note}")
    print(
        f"{noun}s keeping >= 90 % of their fresh-state cells: {kept_ok} of {answerable} answerable; "
        f"refused in the sequence though answered alone: {refused}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_session_"))
    try:
        policy = write_policy(folder)
        compare_in_order(policy, folder, QUESTIONS, DIMENSIONS, "question")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
