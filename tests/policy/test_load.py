"""Policy files are loaded strictly: every mistake is `file: key.path: message`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from guard.errors import PolicyError
from guard.policy.load import load_policy
from guard.policy.model import Role, SourceKind

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = ROOT / "policies" / "students.yaml"


def _students_document() -> dict:
    document = yaml.safe_load(STUDENTS.read_text())
    document["tables"]["students"]["source"]["csv"] = str(ROOT / "examples/students/students.csv")
    return document


def _write(tmp_path: Path, document: object, name: str = "students.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document) if not isinstance(document, str) else document)
    return path


def test_example_policies_load() -> None:
    for path in sorted((ROOT / "policies").glob("*.yaml")):
        policy = load_policy(path)
        assert policy.tables and policy.analysts
        assert {a.name for a in policy.analysts} >= {"alice", "bob"}, path.name


def test_students_model() -> None:
    policy = load_policy(STUDENTS)
    table = policy.table("STUDENTS")
    assert table is not None and table.privacy_unit == "name"
    assert table.source.kind is SourceKind.CSV
    assert table.names(Role.DIMENSION) == ("sex", "major", "class")
    income = table.column("income")
    assert income is not None and income.role is Role.MEASURE and income.bounds == (0.0, 200000.0)
    assert policy.protection.min_query_set_size == 3
    assert policy.state_dir == (ROOT / "state" / "students").resolve()


def test_castro_rules_and_suppression() -> None:
    from guard.policy.model import LinkScope
    from guard.rules import Dominance, MinimumFrequency

    policy = load_policy(ROOT / "policies" / "castro.yaml")
    assert policy.protection.rules == (MinimumFrequency(3), Dominance(1, 0.5))
    assert policy.protection.suppression.weight == "value"
    assert policy.protection.suppression.linked is LinkScope.ALL


def test_state_override(tmp_path: Path) -> None:
    assert load_policy(STUDENTS, state=tmp_path).state_dir == tmp_path.resolve()


def test_policy_is_immutable() -> None:
    policy = load_policy(STUDENTS)
    with pytest.raises(AttributeError):
        policy.name = "other"  # type: ignore[misc]


def _mutate(document: dict, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    node = document
    for key in parents:
        node = node.setdefault(key, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


_DELETE = object()

CASES = [
    (
        "tables.students.columns.income.bounds",
        [0],
        "tables.students.columns.income.bounds: expected [low, high]",
    ),
    (
        "tables.students.columns.income.bounds",
        "high",
        "tables.students.columns.income.bounds: expected [low, high]",
    ),
    (
        "tables.students.columns.income.bounds",
        [10, 1],
        "income.bounds: expected [low, high] with low <= high",
    ),
    ("tables.students.columns.income.bounds", _DELETE, "income.bounds: expected [low, high]: every measure"),
    ("tables.students.columns.sex.bounds", [0, 1], "columns.sex.bounds: only measures have bounds"),
    (
        "tables.students.columns.income.role",
        "measur",
        "income.role: unknown role 'measur' (did you mean 'measure'?)",
    ),
    ("tables.students.columns.income.colour", "red", "income.colour: unknown key"),
    (
        "tables.students.privacy_unit",
        "nmae",
        "privacy_unit: 'nmae' is not a declared column (did you mean 'name'?)",
    ),
    ("tables.students.privacy_unit", "sex", "privacy_unit: the privacy unit 'sex' must have role identifier"),
    ("tables.students.source", {"csv": "a.csv", "parquet": "b.parquet"}, "source: give exactly one of"),
    ("tables.students.source", {"xlsx": "a.xlsx"}, "source.xlsx: unknown key"),
    ("tables.students.source", _DELETE, "tables.students.source: is required"),
    ("protection.min_query_set_size", 0, "protection.min_query_set_size: must be at least 1, got 0"),
    (
        "protection.min_query_set_size",
        "3",
        "protection.min_query_set_size: expected a whole number, got a string",
    ),
    (
        "protection.min_query_sett_size",
        3,
        "protection.min_query_sett_size: unknown key (did you mean 'min_query_set_size'?)",
    ),
    ("protection.allow_full_population", "yes", "protection.allow_full_population: expected true or false"),
    ("protection.rules", {"threshold": 3}, "protection.rules: expected a list of rules"),
    ("protection.rules", [{"treshold": 3}], "rules.0.treshold: unknown key (did you mean 'threshold'?)"),
    ("protection.rules", [{"threshold": 3, "dominance": {}}], "rules.0: each list item names exactly"),
    ("protection.rules", [{"threshold": 0}], "protection.rules.0.threshold.n: must be at least 1"),
    (
        "protection.rules",
        [{"threshold": {"n": 3, "protection": 0}}],
        "protection.rules.0.threshold: protection and floor cannot both be 0",
    ),
    ("protection.rules", [{"dominance": {"n": 1}}], "protection.rules.0.dominance.k: is required"),
    ("protection.rules", [{"dominance": {"n": 1, "k": 60}}], "dominance.k: must be at least 0 and at most 1"),
    ("protection.rules", [{"dominance": {"n": 1, "k": 0}}], "dominance.k: must be a fraction in (0, 1]"),
    ("protection.rules", [{"p_percent": {"p": 100}}], "p_percent.p: must be a percentage strictly between"),
    ("protection.rules", [{"pq": {"p": 10}}], "protection.rules.0.pq.q: is required"),
    ("protection.rules", [{"pq": {"p": 50, "q": 10}}], "protection.rules.0.pq: needs 0 < p < q <= 100"),
    ("protection.rules", [{"threshold": 3}, {"threshold": {"n": 3}}], "a rule is listed twice"),
    ("protection.suppression", {"weight": "size"}, "suppression.weight: expected one of value, count"),
    ("protection.suppression", {"method": "optimum"}, "one of auto, optimal, heuristic (did you mean"),
    ("protection.suppression", {"linked": "everyone"}, "linked: expected one of all, analyst, none"),
    ("protection.suppression", {"time_limit": 0}, "suppression.time_limit: must be at least 0.1"),
    ("tabels", {}, "tabels: unknown key (did you mean 'tables'?)"),
    ("analysts", {}, "analysts: expected a mapping of analyst name to settings"),
    (
        "analysts.carol",
        {"tables": ["studnets"]},
        "analysts.carol.tables: unknown table 'studnets' (did you mean 'students'?)",
    ),
    ("backend", "oracle", "backend: unknown backend 'oracle'"),
    ("limits.max_sql_length", -1, "limits.max_sql_length: must be at least 16"),
]


@pytest.mark.parametrize(
    ("key", "value", "message"), CASES, ids=[c[0] + "=" + repr(c[1])[:20] for c in CASES]
)
def test_policy_errors(tmp_path: Path, key: str, value: object, message: str) -> None:
    document = _students_document()
    _mutate(document, key, value)
    with pytest.raises(PolicyError) as caught:
        load_policy(_write(tmp_path, document))
    assert str(caught.value).startswith("students.yaml: ")
    assert message in str(caught.value)


def test_not_yaml(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"students.yaml: line 1: not valid YAML"):
        load_policy(_write(tmp_path, "tables: [unclosed"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy(tmp_path / "absent.yaml")


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"students.yaml: \(top level\): expected a mapping, got a list"):
        load_policy(_write(tmp_path, "- a\n- b\n"))


def test_a_policy_that_is_not_utf8_names_the_file_and_the_line(tmp_path: Path) -> None:
    text = (ROOT / "policies" / "students.yaml").read_bytes().replace(b"yearly income", b"yearly \xe9income")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(text)
    with pytest.raises(
        PolicyError, match=r"latin1\.yaml: line \d+: the policy file is not UTF-8 text .*save it as UTF-8"
    ):
        load_policy(path)
