"""The SQL corpora: every query in rejected.sql is refused with its message, every query
in accepted.sql is answered, and no refusal message carries a protected value."""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from guard import Guard
from guard.errors import AccessDenied, GuardError, QueryRefused, QueryRejected
from guard.policy.model import Policy, Role, SourceKind
from guard.result import ProtectedResult
from guard.state.recorder import logged_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
POLICIES = {
    "students": ROOT / "policies" / "students.yaml",
    "castro": ROOT / "policies" / "castro.yaml",
    "hospital": ROOT / "policies" / "hospital.yaml",
    "events": HERE / "events.yaml",  # DATE, TIMESTAMP, BOOLEAN and DOUBLE dimensions
    "unaudited": HERE / "unaudited.yaml",  # students with the history audit off
}
ERRORS: dict[str, type[GuardError]] = {
    "QueryRejected": QueryRejected,
    "QueryRefused": QueryRefused,
    "AccessDenied": AccessDenied,
}
# what the log records for each error (guard.core.Guard._record_refusal)
DECISIONS = {"QueryRejected": "rejected", "QueryRefused": "refused", "AccessDenied": "refused"}
DIRECTIVE = re.compile(r"--\s*(expect|case|error|policy|analyst|rows|pad-to):\s*(.*?)\s*$")


@dataclass(frozen=True)
class Case:
    line: int
    sql: str
    expect: str = ""
    error: str = "QueryRejected"
    policy: str = "students"
    analyst: str = "alice"
    rows: int | None = None
    pad_to: int | None = None

    @property
    def text(self) -> str:
        """The SQL as sent."""
        return self.sql.ljust(self.pad_to) if self.pad_to else self.sql

    @property
    def first_line(self) -> str:
        lines = [line.strip() for line in self.sql.splitlines() if line.strip()]
        return lines[0][:100] if lines else "<empty>"


def read_corpus(path: Path, start: str) -> list[Case]:
    """Split a corpus file into cases; each begins with a `-- <start>:` line."""
    cases: list[Case] = []
    fields: dict[str, str] = {}
    body: list[str] = []
    line_no = 0

    def flush() -> None:
        if line_no:
            cases.append(
                Case(
                    line=line_no,
                    sql="\n".join(body).strip(),
                    expect=fields.get("expect", ""),
                    error=fields.get("error", "QueryRejected"),
                    policy=fields.get("policy", "students"),
                    analyst=fields.get("analyst", "alice"),
                    rows=int(fields["rows"]) if "rows" in fields else None,
                    pad_to=int(fields["pad-to"]) if "pad-to" in fields else None,
                )
            )

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("-- ##"):
            continue
        match = DIRECTIVE.fullmatch(line.strip())
        if match and match.group(1) == start:
            flush()
            fields, body, line_no = {start: match.group(2)}, [], number
        elif match and line_no and not body:  # directives sit right under the start line
            fields[match.group(1)] = match.group(2)
        elif line_no:
            body.append(line)
    flush()
    for case in cases:
        assert case.policy in POLICIES, f"{path.name}:{case.line}: unknown policy {case.policy!r}"
        assert case.error in ERRORS, f"{path.name}:{case.line}: unknown error {case.error!r}"
    return cases


def case_ids(cases: list[Case]) -> list[str]:
    ids: list[str] = []
    for case in cases:
        name = case.first_line
        ids.append(name if name not in ids else f"{name} (line {case.line})")
    return ids


REJECTED = read_corpus(HERE / "rejected.sql", "expect")
ACCEPTED = read_corpus(HERE / "accepted.sql", "case")


def test_corpora_are_large_enough() -> None:
    assert len(REJECTED) >= 60 and len(ACCEPTED) >= 30
    assert all(case.expect for case in REJECTED)
    assert sum(case.error == "QueryRefused" for case in REJECTED) >= 2


Opener = Callable[[str], Guard]


@pytest.fixture(scope="module")
def guards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Opener]:
    """One guard per policy for the whole module, each on its own fresh state folder."""
    opened: dict[str, Guard] = {}

    def get(policy: str) -> Guard:
        if policy not in opened:
            opened[policy] = Guard.open(POLICIES[policy], state=tmp_path_factory.mktemp(policy))
        return opened[policy]

    yield get
    for guard in opened.values():
        guard.close()


@functools.cache
def protected_values(policy: Policy) -> frozenset[str]:
    """Identifier and measure values of the policy's CSV sources, as text."""
    values: set[str] = set()
    for table in policy.tables:
        if table.source.kind is not SourceKind.CSV:
            continue
        hidden = {c.name for c in table.columns if c.role is not Role.DIMENSION}
        with table.source.path.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                values.update(v for k, v in row.items() if k in hidden and v)
    return frozenset(values)


def leaked(message: str, sql: str, values: frozenset[str], k: int) -> list[str]:
    """Protected values in ``message`` that the analyst did not type themselves."""
    message = message.replace(f"k={k}", "k")  # the threshold is public
    found = []
    for value in values:
        pattern = rf"(?<![\w.]){re.escape(value)}(?![\w.])"
        if re.search(pattern, message) and not re.search(pattern, sql):
            found.append(value)
    return found


@pytest.mark.parametrize("case", REJECTED, ids=case_ids(REJECTED))
def test_rejected(case: Case, guards: Opener) -> None:
    guard = guards(case.policy)
    with pytest.raises(GuardError) as caught:
        guard.query(case.text, analyst=case.analyst)
    error = caught.value
    assert type(error) is ERRORS[case.error], f"{type(error).__name__}: {error.message}"
    assert case.expect.lower() in error.message.lower()
    k = guard.policy.protection.min_query_set_size
    assert not leaked(error.message, case.text, protected_values(guard.policy), k)
    if isinstance(error, QueryRefused):
        # refusals speak of the control and its threshold only, never of counts or values
        assert set(re.findall(r"\d+", error.message)) <= {str(k)}, error.message


@pytest.mark.parametrize("case", ACCEPTED, ids=case_ids(ACCEPTED))
def test_accepted(case: Case, tmp_path: Path) -> None:
    # each case on a fresh state: asked after the others, some would (rightly) be
    # withheld by the history audit as completing a disclosure with earlier answers
    with Guard.open(POLICIES[case.policy], state=tmp_path) as guard:
        result = guard.query(case.text, analyst=case.analyst)
    assert isinstance(result, ProtectedResult)
    assert len(result.flags) == len(result.rows)
    if case.rows is not None:
        assert len(result.rows) == case.rows, result.rows


def test_every_rejection_is_logged(tmp_path: Path) -> None:
    """Each refusal is in the log, in order, with its decision, SQL and reason."""
    opened: dict[str, Guard] = {}
    try:
        expected: dict[str, list[tuple[str, str, str]]] = {}
        for case in REJECTED:
            if case.policy not in opened:
                opened[case.policy] = Guard.open(POLICIES[case.policy], state=tmp_path / case.policy)
            with pytest.raises(GuardError) as caught:
                opened[case.policy].query(case.text, analyst=case.analyst)
            decision = DECISIONS[type(caught.value).__name__]
            # text longer than the policy accepts is logged as a bounded prefix and a digest
            logged_sql = logged_text(case.text, opened[case.policy].policy.limits.max_sql_length)
            expected.setdefault(case.policy, []).append((decision, logged_sql, caught.value.message))
        for policy, guard in opened.items():
            logged = [(r["decision"], r["sql"], r["reason"]) for r in guard.log()]
            assert logged == expected[policy]
    finally:
        for guard in opened.values():
            guard.close()
