"""ROLLUP, CUBE, GROUPING SETS and GROUPING(): what analyze() makes of them.

The grouping sets are expanded, deduplicated and ordered (longest first, then by key
positions); one set is a plain GROUP BY; equivalent phrasings share a canonical key;
GROUPING(key) is an output of its own kind. Rejections with their messages are in
rejected.sql; the engine side is tests/backends/test_cell_query.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.errors import QueryRejected
from guard.policy.model import Column, Limits, Role, Source, SourceKind, Table
from guard.query.analyze import analyze
from guard.query.grouping import MAX_GROUPING_KEYS, MAX_GROUPING_SETS
from guard.query.parse import parse
from guard.query.shape import OrderItem, Output, OutputKind, QueryShape
from guard.query.validate import validate

LIMITS = Limits()
# a table with more dimensions than any example policy, to reach the limits
WIDE = Table(
    name="wide",
    source=Source(SourceKind.CSV, Path("wide.csv")),
    privacy_unit="id",
    columns=(
        Column("id", Role.IDENTIFIER),
        *(Column(f"d{i}", Role.DIMENSION) for i in range(70)),
        Column("m", Role.MEASURE),
    ),
)
STUDENTS = Table(
    name="students",
    source=Source(SourceKind.CSV, Path("students.csv")),
    privacy_unit="name",
    columns=(
        Column("name", Role.IDENTIFIER),
        Column("sex", Role.DIMENSION),
        Column("major", Role.DIMENSION),
        Column("class", Role.DIMENSION),
        Column("income", Role.MEASURE),
    ),
)
TYPES = {"sex": "VARCHAR", "major": "VARCHAR", "class": "BIGINT", "income": "BIGINT"}


def shape(sql: str, table: Table = STUDENTS) -> QueryShape:
    select, found = validate(parse(sql, LIMITS), (table,))
    return analyze(select, found, TYPES, LIMITS)


@pytest.mark.parametrize(
    ("group_by", "keys", "sets"),
    [
        ("ROLLUP (major, sex)", ("major", "sex"), (("major", "sex"), ("major",), ())),
        ("ROLLUP (sex, major)", ("sex", "major"), (("sex", "major"), ("sex",), ())),
        ("CUBE (major, sex)", ("major", "sex"), (("major", "sex"), ("major",), ("sex",), ())),
        (
            "CUBE (major, sex, class)",
            ("major", "sex", "class"),
            (
                ("major", "sex", "class"),
                ("major", "sex"),
                ("major", "class"),
                ("sex", "class"),
                ("major",),
                ("sex",),
                ("class",),
                (),
            ),
        ),
        ("GROUPING SETS ((major, sex), (major), ())", ("major", "sex"), (("major", "sex"), ("major",), ())),
        ("GROUPING SETS ((sex), (major))", ("sex", "major"), (("sex",), ("major",))),
        # bare keys are one-key sets; nested ROLLUP / CUBE add their sets
        ("GROUPING SETS (sex, ROLLUP (major), ())", ("sex", "major"), (("sex",), ("major",), ())),
        # a plain key crossed with a ROLLUP
        (
            "major, ROLLUP (sex, class)",
            ("major", "sex", "class"),
            (("major", "sex", "class"), ("major", "sex"), ("major",)),
        ),
        ("ROLLUP (sex), ROLLUP (major)", ("sex", "major"), (("sex", "major"), ("sex",), ("major",), ())),
        # a composite item rolls up as one
        (
            "ROLLUP (sex, (major, class))",
            ("sex", "major", "class"),
            (("sex", "major", "class"), ("sex",), ()),
        ),
        # duplicates are dropped: one row per cell
        ("GROUPING SETS ((major), (major), (), ())", ("major",), (("major",), ())),
        ("ROLLUP (major, major)", ("major",), (("major",), ())),
        ("major, CUBE (major)", ("major",), ()),
        # one grouping set holding every key is a plain GROUP BY
        ("GROUPING SETS ((major, sex))", ("major", "sex"), ()),
        ("GROUPING SETS (())", (), ()),
        ("()", (), ()),
        ("sex, major", ("sex", "major"), ()),
    ],
)
def test_expansion(group_by: str, keys: tuple[str, ...], sets: tuple[tuple[str, ...], ...]) -> None:
    s = shape(f"SELECT COUNT(*) FROM students GROUP BY {group_by}")
    assert (s.group_by, s.grouping_sets) == (keys, sets)
    assert s.levels == (sets or (keys,))


def test_ordinals_inside_rollup() -> None:
    s = shape("SELECT sex, major, COUNT(*) FROM students GROUP BY ROLLUP (2, 1)")
    assert (s.group_by, s.grouping_sets) == (("major", "sex"), (("major", "sex"), ("major",), ()))


def test_aliases_inside_cube() -> None:
    s = shape("SELECT sex AS s, major AS m, COUNT(*) FROM students GROUP BY CUBE (m, s)")
    assert s.group_by == ("major", "sex")
    assert s.grouping_sets == (("major", "sex"), ("major",), ("sex",), ())


def test_qualified_keys() -> None:
    s = shape("SELECT COUNT(*) FROM students AS t GROUP BY ROLLUP (t.major, students.sex)")
    assert s.grouping_sets == (("major", "sex"), ("major",), ())


ROLLUP_PHRASINGS = [
    "SELECT major, sex, COUNT(*) FROM students GROUP BY ROLLUP (major, sex)",
    "SELECT major, sex, COUNT(*) FROM students GROUP BY GROUPING SETS ((major, sex), (major), ())",
    "SELECT sex, major, COUNT(*) AS n FROM students GROUP BY GROUPING SETS ((), (sex, major), (major))",
    "SELECT COUNT(*) FROM students GROUP BY GROUPING SETS ((major), (major, sex), (), (major))",
]


def test_equivalent_groupings_share_a_canonical_key() -> None:
    keys = {shape(sql).canonical for sql in ROLLUP_PHRASINGS}
    assert len(keys) == 1
    plain = shape("SELECT major, sex, COUNT(*) FROM students GROUP BY major, sex").canonical
    cube = shape("SELECT major, sex, COUNT(*) FROM students GROUP BY CUBE (major, sex)").canonical
    assert len({*keys, plain, cube}) == 3
    assert json.loads(keys.pop())["grouping_sets"] == [[], ["major"], ["major", "sex"]]


def test_plain_canonical_key_is_unchanged() -> None:
    """The key of a plain GROUP BY is what it was before grouping sets: the history and
    the query log written before keep matching."""
    s = shape("SELECT major, sex, COUNT(*) FROM students WHERE class = 1980 GROUP BY sex, major")
    assert s.canonical == (
        '{"table":"students","where":[["class","in",[1980]]],"group_by":["major","sex"],'
        '"aggregates":["count(*)"]}'
    )
    assert shape("SELECT COUNT(*) FROM students GROUP BY GROUPING SETS ((major, sex))").canonical == (
        shape("SELECT COUNT(*) FROM students GROUP BY major, sex").canonical
    )


def test_grouping_outputs() -> None:
    s = shape(
        "SELECT major, GROUPING(major) AS total_major, GROUPING(sex), COUNT(*) "
        "FROM students GROUP BY ROLLUP (major, sex) ORDER BY total_major DESC, 3, GROUPING(major)"
    )
    assert s.outputs == (
        Output("major", OutputKind.KEY, 0),
        Output("total_major", OutputKind.GROUPING, 0),
        Output("grouping", OutputKind.GROUPING, 1),
        Output("count", OutputKind.AGGREGATE, 0),
    )
    assert s.order_by == (OrderItem(1, descending=True), OrderItem(2), OrderItem(1))
    # GROUPING is not an aggregate, and not part of what is measured
    assert s.aggregates == shape("SELECT COUNT(*) FROM students GROUP BY ROLLUP (major, sex)").aggregates
    assert s.canonical == shape(ROLLUP_PHRASINGS[0]).canonical


def test_grouping_in_a_plain_group_by_is_allowed() -> None:
    """Always 0 there (no key is ever rolled up), as in DuckDB."""
    s = shape("SELECT major, GROUPING(major), COUNT(*) FROM students GROUP BY major")
    assert s.grouping_sets == ()
    assert s.outputs[1] == Output("grouping", OutputKind.GROUPING, 0)


def test_grouping_of_a_key_not_in_the_output() -> None:
    s = shape("SELECT GROUPING(sex), COUNT(*) FROM students GROUP BY CUBE (major, sex)")
    assert s.outputs[0] == Output("grouping", OutputKind.GROUPING, 1)


def test_group_by_all_ignores_grouping_outputs() -> None:
    s = shape("SELECT major, GROUPING(major), COUNT(*) FROM students GROUP BY ALL")
    assert (s.group_by, s.grouping_sets) == (("major",), ())


def test_grouping_sets_field_is_keyword_only() -> None:
    """QueryShape keeps its positional fields: table, predicates, group_by, aggregates, outputs."""
    s = shape("SELECT major, COUNT(*) FROM students GROUP BY major")
    rebuilt = QueryShape(s.table, s.predicates, s.group_by, s.aggregates, s.outputs)
    assert rebuilt == s


def _wide(group_by: str) -> QueryShape:
    return shape(f"SELECT COUNT(*) FROM wide GROUP BY {group_by}", WIDE)


def _dims(n: int, start: int = 0) -> str:
    return ", ".join(f"d{i}" for i in range(start, start + n))


def test_most_grouping_sets_allowed() -> None:
    assert MAX_GROUPING_SETS == 64
    assert len(_wide(f"CUBE ({_dims(6)})").grouping_sets) == 64
    assert len(_wide(f"ROLLUP ({_dims(63)})").grouping_sets) == 64


@pytest.mark.parametrize(
    ("group_by", "message"),
    [
        (f"CUBE ({_dims(7)})", f"CUBE ({_dims(7)}) expands to more than 64 grouping sets"),
        (f"ROLLUP ({_dims(64)})", "expands to more than 64 grouping sets: ask for fewer totals"),
        # the product is checked as it grows, before all of it is built
        (f"CUBE ({_dims(3)}), CUBE ({_dims(4, 3)})", "GROUP BY CUBE (d0, d1, d2), CUBE (d3, d4, d5, d6)"),
        (f"CUBE ({_dims(3)}), CUBE ({_dims(4, 3)})", "expands to more than 64 grouping sets"),
        (
            f"GROUPING SETS (CUBE ({_dims(6)}), CUBE ({_dims(5, 6)}))",
            "expands to more than 64 grouping sets",
        ),
        (
            f"GROUPING SETS (({_dims(64)}), ())",
            f"ROLLUP / CUBE / GROUPING SETS over 64 keys: the limit is {MAX_GROUPING_KEYS}",
        ),
    ],
)
def test_limits(group_by: str, message: str) -> None:
    with pytest.raises(QueryRejected) as caught:
        _wide(group_by)
    assert message in caught.value.message


def test_many_keys_without_grouping_sets_are_not_limited() -> None:
    assert len(_wide(f"{_dims(70)}").group_by) == 70
    assert len(_wide(f"GROUPING SETS (({_dims(70)}))").group_by) == 70
