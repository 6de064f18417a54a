"""The front stages' cache: a text is read once per analyst's visible tables, comments
and layout aside, and a cached reading never lets a text through that reading it anew
would reject."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.errors import AccessDenied, QueryRejected
from guard.query.front import FrontCache, Trace, read_query

ROOT = Path(__file__).resolve().parents[2]
SQL = "SELECT major, COUNT(*) FROM students GROUP BY major"


STUDENTS = f"""  students:
    source: {{csv: {ROOT / "examples/students/students.csv"}}}
    privacy_unit: name
    columns:
      name: {{role: identifier}}
      sex: {{role: dimension}}
      major: {{role: dimension}}
      class: {{role: dimension}}
      income: {{role: measure, bounds: [0, 200000]}}
"""


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    folder = tmp_path_factory.mktemp("two")
    policy = folder / "two.yaml"
    policy.write_text(
        f"""name: two
tables:
{STUDENTS}  castro:
    source: {{csv: {ROOT / "examples/castro/castro.csv"}}}
    privacy_unit: person_id
    columns:
      person_id: {{role: identifier}}
      municipality: {{role: dimension}}
      salary: {{role: measure, bounds: [0, 2000]}}
analysts:
  alice: {{}}
  bob: {{tables: [students]}}
"""
    )
    with Guard.open(policy, state=folder / "state") as guard:
        yield guard


def _cache(guard: Guard) -> FrontCache:
    return FrontCache(guard.policy, guard.column_types)


def _who(guard: Guard, name: str):  # type: ignore[no-untyped-def]
    who = guard.policy.analyst(name)
    assert who is not None
    return who


def test_a_text_is_read_once_and_its_trace_filled_on_a_hit(two: Guard) -> None:
    cache = _cache(two)
    first = cache.read(SQL, _who(two, "alice"))
    trace = Trace()
    again = cache.read(SQL, _who(two, "alice"), None, trace)
    assert again is first and first == read_query(SQL, two.policy, _who(two, "alice"), two.column_types)
    assert trace.table is first.table and trace.bound_sql is None


def test_comments_and_layout_do_not_matter_but_every_token_does(two: Guard) -> None:
    cache = _cache(two)
    alice = _who(two, "alice")
    first = cache.read(SQL, alice)
    tagged = "/* dashboard 7 */ SELECT major,\n  COUNT(*)  FROM students -- by major\n GROUP BY major"
    assert cache.read(tagged, alice) is first
    other = cache.read("SELECT sex, COUNT(*) FROM students GROUP BY sex", alice)
    assert other.shape.group_by == ("sex",)
    # a comment inside a string literal is part of the value, not a comment
    literal = cache.read("SELECT COUNT(*) FROM students WHERE major = 'CS /* x */'", alice)
    plain = cache.read("SELECT COUNT(*) FROM students WHERE major = 'CS'", alice)
    assert literal.shape.predicates != plain.shape.predicates


def test_a_reading_is_not_shared_with_an_analyst_who_sees_other_tables(two: Guard) -> None:
    cache = _cache(two)
    castro = "SELECT municipality, COUNT(*) FROM castro GROUP BY municipality"
    assert cache.read(castro, _who(two, "alice")).table.name == "castro"
    with pytest.raises(QueryRejected) as caught:
        cache.read(castro, _who(two, "bob"))
    assert "castro" in caught.value.message
    with pytest.raises((QueryRejected, AccessDenied)):
        two.query(castro, analyst="bob")  # through the guard's own cache too
    two.query(castro, analyst="alice")


def test_parameters_are_keyed_with_their_types(two: Guard) -> None:
    cache = _cache(two)
    alice = _who(two, "alice")
    sql = "SELECT COUNT(*) FROM students WHERE major = $1"
    text = cache.read(sql, alice, ["CS"])
    assert cache.read(sql, alice, ["CS"]) is text
    other = cache.read(sql, alice, ["EE"])
    assert other is not text and other.shape.predicates[0].values == ("EE",)
    # 1980 and 1980.0 are one dictionary key in Python: typed, they are two readings
    by_year = "SELECT COUNT(*) FROM students WHERE class = $1"
    whole = cache.read(by_year, alice, [1980])
    assert cache.read(by_year, alice, [1980]) is whole
    assert cache.read(by_year, alice, [1980.0]) is not whole


def test_the_raw_text_is_checked_before_a_cached_reading_is_used(two: Guard) -> None:
    cache = _cache(two)
    alice = _who(two, "alice")
    cache.read(SQL, alice)
    limit = two.policy.limits.max_sql_length
    padded = SQL + " /*" + "x" * limit + "*/"
    with pytest.raises(QueryRejected, match="characters long"):
        cache.read(padded, alice)
    with pytest.raises(QueryRejected, match="NUL"):
        cache.read(SQL + " /* \x00 */", alice)


def test_rejections_are_not_kept(two: Guard) -> None:
    cache = _cache(two)
    alice = _who(two, "alice")
    for _ in range(2):
        with pytest.raises(QueryRejected, match="name"):
            cache.read("SELECT name FROM students", alice)


def test_the_log_keeps_each_text_as_sent(two: Guard) -> None:
    two.query(SQL + " /* request 1 */", analyst="alice")
    two.query(SQL + " /* request 2 */", analyst="alice")
    assert [r["sql"] for r in two.log(limit=2)] == [SQL + " /* request 1 */", SQL + " /* request 2 */"]


def test_a_value_that_is_no_parameter_is_rejected_not_a_fault(two: Guard) -> None:
    sql = "SELECT COUNT(*) FROM students WHERE major = $1"
    with pytest.raises(QueryRejected):
        _cache(two).read(sql, _who(two, "alice"), [["CS", "EE"]])  # type: ignore[list-item]


def test_a_cached_disjunction_is_still_judged_per_analyst(tmp_path: Path) -> None:
    """With the history audit off, OR across columns is allowed to an analyst answered
    with noise only. Two analysts see the same tables, so they share cached readings:
    the reading the noise analyst caches must not let the text through for the other."""
    policy = tmp_path / "mixed.yaml"
    policy.write_text(
        f"""name: mixed
protection:
  history: {{audit: off}}
noise:
  epsilon_per_query: 1
  budgets: {{per_analyst: 10, global: 20}}
tables:
{STUDENTS}analysts:
  noisy: {{noise: noise}}
  exact: {{}}
"""
    )
    sql = "SELECT COUNT(*) FROM students WHERE major = 'EE' OR sex = 'Female'"
    with Guard.open(policy, state=tmp_path / "state") as guard:
        assert guard.query(sql, "noisy").flags[0][0] == "noised"
        for _ in range(2):  # cached now, from the noisy analyst's reading
            with pytest.raises(QueryRejected, match="allowed only where answers are audited"):
                guard.query(sql, "exact")
        assert guard.query(sql, "noisy").rows  # and still answered to the noisy analyst


def test_a_new_text_is_tokenized_once(two: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tokens read for the cache's key are the ones the parser reads (a first answer
    paid for three tokenizations); a text the cache knew the tokens of but not the
    reading is tokenized again by the parser, and each reading equals a fresh one."""
    from sqlglot.dialects.dialect import Dialect

    counted: list[str] = []
    tokenize = Dialect.tokenize

    def counting(self: Dialect, sql: str, dialect: object = None) -> object:
        counted.append(sql)
        return tokenize(self, sql, dialect)  # type: ignore[arg-type]

    monkeypatch.setattr(Dialect, "tokenize", counting)
    cache = _cache(two)
    alice, bob = _who(two, "alice"), _who(two, "bob")
    sql = "SELECT sex, COUNT(*) FROM students WHERE major = 'CS' GROUP BY sex"
    first = cache.read(sql, alice)
    assert counted == [sql]
    assert first == read_query(sql, two.policy, alice, two.column_types)
    counted.clear()
    again = cache.read(sql, bob)  # the key's tokens are known; bob's reading is not
    assert counted == [sql] and again == first
    other = "SELECT major, COUNT(*) FROM students WHERE sex = 'F' GROUP BY major"
    assert cache.read(other, alice) == read_query(other, two.policy, alice, two.column_types)
