"""``guard demo``: the seed examples, answered and attacked, on a fresh state."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console

from guard.cli.render import result_table
from guard.core import Guard
from guard.errors import GuardError, PolicyError

__all__ = ["run_demo"]

# (policy, title, SQL, what the reader should see)
STEPS: tuple[tuple[str, str, str, str], ...] = (
    (
        "students",
        "Income by major (seed 002)",
        "SELECT major, COUNT(*) AS students, SUM(income) AS income FROM students GROUP BY major",
        "answered: both majors cover at least k=3 students",
    ),
    (
        "students",
        "Income by sex and major",
        "SELECT sex, major, COUNT(*) AS students, AVG(income) AS mean_income "
        "FROM students GROUP BY sex, major",
        "the female groups have fewer than k=3 students: suppressed; with the totals by major "
        "released above, the male groups would give them away: suppressed as secondary cells",
    ),
    (
        "students",
        "Attack: isolate Baker, the only female EE student",
        "SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Female'",
        "refused: the query set is a single student",
    ),
    (
        "students",
        "Income of EE students",
        "SELECT SUM(income) AS income FROM students WHERE major = 'EE'",
        "answered: four students",
    ),
    (
        "students",
        "Attack: differencing (seed 002) - EE minus male EE is Baker's income",
        "SELECT SUM(income) AS income FROM students WHERE major = 'EE' AND sex = 'Male'",
        "refused: with the EE total released before, this cell would give away Baker's income",
    ),
    (
        "students",
        "Attack: read rows directly",
        "SELECT * FROM students",
        "rejected: only aggregates are answered",
    ),
    (
        "students",
        "Attack: filter on the identifier",
        "SELECT SUM(income) FROM students WHERE name = 'Baker'",
        "rejected: identifiers are never usable",
    ),
    (
        "students",
        "Attack: read a file through the engine",
        "SELECT COUNT(*) FROM read_csv('/etc/passwd')",
        "rejected: no table functions or file reads",
    ),
    (
        "students",
        "Attack: 'math as a hash' on a dimension",
        "SELECT SUM(income) FROM students WHERE class % 1981 = 0",
        "rejected: no functions or arithmetic on columns in predicates",
    ),
    (
        "castro",
        "Castro (2012) P x M salaries with both margins (seed 000)",
        "SELECT municipality, profession, SUM(salary) AS salary "
        "FROM castro GROUP BY CUBE (municipality, profession)",
        "(M1,P1) two people, (M2,P3) one, (M3,P5) dominated: primary; secondary cells protect them",
    ),
    (
        "castro",
        "Castro: the municipality margin asked again on its own",
        "SELECT municipality, SUM(salary) AS salary FROM castro GROUP BY municipality",
        "the same totals as released in the table above: nothing new to withhold",
    ),
    (
        "hospital",
        "Mean income of patients by town (seed 001)",
        "SELECT town, COUNT(*) AS patients, AVG(income) AS mean_income FROM hospital GROUP BY town",
        "Enfield's mean is 3300, as in the seed",
    ),
    (
        "hospital-rich",
        "Attack: Ms. Rich (income 100000) joins Enfield (seed 001)",
        "SELECT AVG(income) AS mean_income FROM hospital WHERE town = 'Enfield'",
        "12090.91 instead of 3300: an exact mean reveals that she attended",
    ),
    (
        "hospital-dp",
        "Noise mode: the same mean with ε = 1 and bounds [1000, 100000]",
        "SELECT AVG(income) AS mean_income FROM hospital WHERE town = 'Enfield'",
        "a noisy mean, flagged noised: with or without Ms. Rich it looks alike; ε = 1 spent",
    ),
    (
        "hospital-dp",
        "Noise mode: averaging attack - the same question rephrased",
        "SELECT AVG(income) AS mean_income FROM hospital WHERE 'Enfield' = town AND town IN ('Enfield')",
        "the identical value at no cost: repeating or rephrasing gains nothing",
    ),
    (
        "hospital-dp",
        "Noise mode: patients by town",
        "SELECT town, COUNT(*) AS patients FROM hospital GROUP BY town",
        "noisy counts; towns whose noisy count is below the threshold are not shown",
    ),
)


def _policies_folder(explicit: Path | None) -> Path:
    candidates = (
        [explicit]
        if explicit
        else [Path.cwd() / "policies", Path(__file__).resolve().parents[2] / "policies"]
    )
    for folder in candidates:
        if folder is not None and (folder / "students.yaml").is_file():
            return folder
    raise PolicyError(
        "cannot find the example policies (policies/students.yaml): run the demo from the "
        "repository, or pass --policies DIR"
    )


def run_demo(out: Console, policies: Path | None, state: Path | None) -> None:
    folder = _policies_folder(policies)
    with tempfile.TemporaryDirectory(prefix="statguard-demo-") as scratch:
        root = state or Path(scratch)
        guards: dict[str, Guard] = {}
        try:
            for policy, title, sql, expectation in STEPS:
                if policy not in guards:
                    guards[policy] = Guard.open(folder / f"{policy}.yaml", state=root / policy)
                out.rule(f"[bold]{title}[/bold]")
                out.print(f"alice> {sql}", markup=False, highlight=False)
                try:
                    result = guards[policy].query(sql, analyst="alice")
                except GuardError as error:
                    out.print(f"[red]{error.kind}[/red]: {error.message}", highlight=False)
                else:
                    out.print(result_table(result))
                    for note in result.notes:
                        out.print(f"note: {note}", markup=False, highlight=False)
                out.print(f"[italic]expected: {expectation}[/italic]")
            out.rule()
            for policy, guard in guards.items():
                checked, broken = guard.store.verify()
                status = "intact" if broken is None else f"BROKEN at {broken}"
                out.print(f"{policy}: {checked} requests logged before answering; hash chain {status}")
        finally:
            for guard in guards.values():
                guard.close()
