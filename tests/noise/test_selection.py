"""The canonical selection of a cell: equal keys only for selections equal on every table."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.noise.selection import EMPTY, cell_selection
from guard.query.shape import AnyOf, Predicate, PredOp, Scalar

TYPES = {"age": "INTEGER", "w": "DOUBLE", "town": "VARCHAR", "d": "DATE", "a": "BIGINT", "b": "INTEGER"}


def key(*predicates: Predicate, keys: Sequence[tuple[str, Scalar | None]] = ()) -> str:
    return cell_selection(predicates, keys, TYPES)


def eq(column: str, value: Scalar) -> Predicate:
    return Predicate(column, PredOp.IN, (value,))


def isin(column: str, *values: Scalar) -> Predicate:
    return Predicate(column, PredOp.IN, tuple(values))


def cmp(column: str, op: PredOp, value: Scalar) -> Predicate:
    return Predicate(column, op, (value,))


def between(column: str, low: Scalar, high: Scalar) -> Predicate:
    return Predicate(column, PredOp.BETWEEN, (low, high))


def is_null(column: str) -> Predicate:
    return Predicate(column, PredOp.IS_NULL)


def not_null(column: str) -> Predicate:
    return Predicate(column, PredOp.IS_NOT_NULL)


# --- examples ---------------------------------------------------------------------------


def test_no_condition_is_the_empty_mapping_and_keys_are_canonical_json() -> None:
    assert key() == "{}"
    text = key(cmp("age", PredOp.GE, 30), eq("town", "Enfield"))
    assert json.loads(text) == {"age": {"ge": 30}, "town": {"in": ["Enfield"]}}
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_equality_one_value_in_list_and_group_key_are_one_selection() -> None:
    as_equality = key(eq("town", "Enfield"))
    assert as_equality == key(isin("town", "Enfield"))
    assert as_equality == key(keys=[("town", "Enfield")])
    assert as_equality == key(isin("town", "Enfield", "Barnet"), keys=[("town", "Enfield")])
    assert as_equality != key(eq("town", "Barnet"))


def test_a_null_group_key_is_is_null() -> None:
    assert key(keys=[("town", None)]) == key(is_null("town"))
    assert key(keys=[("town", None)]) != key(keys=[("town", "None")])


def test_in_lists_intersect() -> None:
    both = key(isin("town", "A", "B", "C"), isin("town", "B", "C", "D"))
    assert both == key(isin("town", "C", "B"))
    assert json.loads(both) == {"town": {"in": ["B", "C"]}}
    assert key(isin("age", 1, 2, 3), isin("age", 3, 4), isin("age", 3, 5, 2)) == key(eq("age", 3))


def test_not_equal_and_ranges_filter_in_lists() -> None:
    assert key(isin("town", "A", "B", "C"), cmp("town", PredOp.NE, "B")) == key(isin("town", "A", "C"))
    assert key(isin("age", 10, 20, 30, 40), cmp("age", PredOp.GT, 15), cmp("age", PredOp.LE, 30)) == key(
        isin("age", 20, 30)
    )
    assert key(isin("w", 1.5, 2.5, 3.5), between("w", 2, 3)) == key(eq("w", 2.5))
    # a value excluded outside the range says nothing more
    assert key(cmp("age", PredOp.GE, 30), cmp("age", PredOp.NE, 10)) == key(cmp("age", PredOp.GE, 30))


def test_between_is_the_two_comparisons() -> None:
    for column, low, high in (("age", 30, 40), ("w", 1.5, 2.5), ("town", "B", "E")):
        two = key(cmp(column, PredOp.LE, high), cmp(column, PredOp.GE, low))
        assert key(between(column, low, high)) == two, column
    # and the tighter of several bounds wins
    assert key(between("age", 30, 40), between("age", 35, 50)) == key(between("age", 35, 40))


@pytest.mark.parametrize(
    ("strict", "closed"),
    [
        (cmp("age", PredOp.GT, 29), cmp("age", PredOp.GE, 30)),
        (cmp("age", PredOp.LT, 41), cmp("age", PredOp.LE, 40)),
        (cmp("age", PredOp.GT, 29.5), cmp("age", PredOp.GE, 30)),
        (cmp("age", PredOp.GE, 29.5), cmp("age", PredOp.GE, 30)),
        (cmp("age", PredOp.LT, 40.5), cmp("age", PredOp.LE, 40)),
        (cmp("age", PredOp.LE, 40.5), cmp("age", PredOp.LE, 40)),
        (cmp("age", PredOp.GE, 30.0), cmp("age", PredOp.GE, 30)),
        (cmp("a", PredOp.GT, -1), cmp("a", PredOp.GE, 0)),
    ],
)
def test_integer_columns_close_strict_bounds(strict: Predicate, closed: Predicate) -> None:
    assert key(strict) == key(closed)


def test_a_one_point_integer_interval_is_in() -> None:
    assert key(between("age", 30, 30)) == key(eq("age", 30))
    assert key(cmp("age", PredOp.GT, 29), cmp("age", PredOp.LT, 31)) == key(eq("age", 30))
    assert key(cmp("age", PredOp.GE, 29.5), cmp("age", PredOp.LE, 30.5)) == key(eq("age", 30))
    assert key(between("w", 2.5, 2.5)) == key(eq("w", 2.5))


def test_float_columns_do_not_close_bounds() -> None:
    assert key(cmp("w", PredOp.GT, 29)) != key(cmp("w", PredOp.GE, 30))
    assert key(cmp("w", PredOp.LT, 41)) != key(cmp("w", PredOp.LE, 40))
    assert key(cmp("w", PredOp.GT, 29), cmp("w", PredOp.LT, 31)) != key(eq("w", 30))
    # nor text columns, nor columns of unknown type
    assert key(cmp("town", PredOp.GT, "A")) != key(cmp("town", PredOp.GE, "A"))
    untyped = cell_selection([cmp("x", PredOp.GT, 29)], [], {})
    assert untyped != cell_selection([cmp("x", PredOp.GE, 30)], [], {})


@pytest.mark.parametrize(
    "comparison",
    [
        eq("age", 3),
        isin("age", 3, 4),
        cmp("age", PredOp.NE, 3),
        cmp("age", PredOp.LT, 3),
        cmp("age", PredOp.GE, 3),
        between("age", 3, 9),
    ],
)
def test_comparisons_imply_is_not_null(comparison: Predicate) -> None:
    assert key(comparison, not_null("age")) == key(comparison)
    assert key(not_null("age"), comparison) == key(comparison)
    assert key(comparison, is_null("age")) == EMPTY


def test_is_not_null_alone_is_a_condition() -> None:
    assert json.loads(key(not_null("town"))) == {"town": {"is": "not null"}}
    assert key(not_null("town")) != key()
    assert key(not_null("town")) != key(is_null("town"))


@pytest.mark.parametrize(
    "contradiction",
    [
        (is_null("age"), eq("age", 1)),
        (eq("age", 1), is_null("age")),
        (cmp("age", PredOp.GT, 5), cmp("age", PredOp.LT, 3)),
        (between("age", 5, 3),),
        (between("w", 2.5, 1.5),),
        (cmp("w", PredOp.GT, 2), cmp("w", PredOp.LT, 2)),
        (cmp("w", PredOp.GE, 2), cmp("w", PredOp.LT, 2)),
        (cmp("age", PredOp.GT, 29), cmp("age", PredOp.LT, 30)),  # no integer in (29, 30)
        (between("age", 30, 30), cmp("age", PredOp.NE, 30)),
        (eq("age", 1), cmp("age", PredOp.NE, 1)),
        (isin("town", "A", "B"), isin("town", "C", "D")),
        (isin("age", 1, 2), cmp("age", PredOp.GT, 2)),
        (eq("town", "A"), eq("age", 3), is_null("age")),
    ],
)
def test_contradictions_are_empty(contradiction: tuple[Predicate, ...]) -> None:
    assert key(*contradiction) == EMPTY


def test_a_contradicting_group_key_is_empty() -> None:
    assert key(eq("town", "A"), keys=[("town", "B")]) == EMPTY
    assert key(cmp("age", PredOp.GT, 40), keys=[("age", 30)]) == EMPTY
    assert key(not_null("age"), cmp("age", PredOp.GE, 0), keys=[("age", None)]) == EMPTY


def test_column_name_case_and_conjunct_order_do_not_matter() -> None:
    conjuncts = [eq("Town", "Enfield"), cmp("AGE", PredOp.GE, 30), cmp("age", PredOp.LT, 50)]
    expected = key(eq("town", "Enfield"), between("age", 30, 49))
    for order in itertools.permutations(conjuncts):
        assert key(*order) == expected
    assert key(keys=[("TOWN", "Enfield")]) == key(eq("town", "Enfield"))
    # the types mapping is read case-insensitively too
    upper = cell_selection([cmp("AGE", PredOp.GT, 29)], [], {"Age": "integer"})
    assert upper == key(cmp("age", PredOp.GE, 30))


def test_values_are_not_case_folded() -> None:
    assert key(eq("town", "enfield")) != key(eq("town", "Enfield"))


def test_other_columns_do_not_mix() -> None:
    assert key(eq("a", 1)) != key(eq("b", 1))
    assert key(eq("a", 1), eq("b", 2)) == key(eq("b", 2), eq("a", 1))
    assert key(eq("a", 1), eq("b", 2)) != key(eq("a", 2), eq("b", 1))


def test_dates() -> None:
    day = dt.date(2020, 1, 31)
    assert key(eq("d", day)) == key(between("d", day, day)) == key(keys=[("d", day)])
    assert json.loads(key(eq("d", day))) == {"d": {"in": ["2020-01-31"]}}
    span = key(between("d", dt.date(2020, 1, 1), dt.date(2020, 12, 31)))
    assert span == key(cmp("d", PredOp.LE, dt.date(2020, 12, 31)), cmp("d", PredOp.GE, dt.date(2020, 1, 1)))
    later = dt.date(2021, 5, 1)
    assert key(isin("d", day, later), cmp("d", PredOp.LT, dt.date(2021, 1, 1))) == key(eq("d", day))
    assert key(cmp("d", PredOp.GT, dt.date(2021, 1, 1)), cmp("d", PredOp.LT, dt.date(2020, 1, 1))) == EMPTY


def test_integer_valued_floats_are_integers_on_integer_columns_only() -> None:
    assert key(eq("age", 30.0)) == key(eq("age", 30))
    assert key(isin("age", 30.0, 31), cmp("age", PredOp.NE, 31.0)) == key(eq("age", 30))


def test_is_null_and_is_not_null_is_a_contradiction() -> None:
    # `x IS NULL AND x IS NOT NULL` selects no row; `x IS NULL` selects the NULL rows: two
    # selections that differ on a table with a NULL must not share one cached answer
    assert key(is_null("town"), not_null("town")) == EMPTY
    assert key(not_null("town"), is_null("town")) == EMPTY
    assert key(not_null("town"), keys=[("town", None)]) == EMPTY
    assert key(is_null("town"), is_null("town")) == key(is_null("town"))
    assert key(not_null("town"), not_null("town")) == key(not_null("town"))


# --- properties -------------------------------------------------------------------------

INT_DOMAIN: tuple[int | None, ...] = (*range(-3, 8), None)
FLOAT_DOMAIN: tuple[float | None, ...] = (*(v / 4 for v in range(-12, 32)), None)
_INT_CONSTANTS = st.sampled_from([*range(-2, 7), 1.5, 3.5, 4.0])
_FLOAT_CONSTANTS = st.sampled_from([*(v / 2 for v in range(-4, 14)), 2, 3])


def _predicates(column: str, constants: st.SearchStrategy[Scalar]) -> st.SearchStrategy[Predicate]:
    single = st.sampled_from([PredOp.NE, PredOp.LT, PredOp.LE, PredOp.GT, PredOp.GE])
    return st.one_of(
        st.builds(lambda v: Predicate(column, PredOp.IN, (v,)), constants),
        st.builds(
            lambda vs: Predicate(column, PredOp.IN, tuple(vs)), st.lists(constants, min_size=1, max_size=3)
        ),
        st.builds(lambda op, v: Predicate(column, op, (v,)), single, constants),
        st.builds(lambda lo, hi: Predicate(column, PredOp.BETWEEN, (lo, hi)), constants, constants),
        st.sampled_from([Predicate(column, PredOp.IS_NULL), Predicate(column, PredOp.IS_NOT_NULL)]),
    )


_INT_PREDICATES = _predicates("a", _INT_CONSTANTS) | _predicates("b", _INT_CONSTANTS)
_FLOAT_PREDICATES = _predicates("w", _FLOAT_CONSTANTS)


def _holds(predicate: Predicate, value: float | None) -> bool:
    """SQL semantics: any comparison with NULL is not true."""
    op, values = predicate.op, predicate.values
    if op is PredOp.IS_NULL:
        return value is None
    if op is PredOp.IS_NOT_NULL or value is None:
        return value is not None
    number = float(value)
    if op is PredOp.IN:
        return any(number == v for v in values)
    if op is PredOp.BETWEEN:
        return values[0] <= number <= values[1]  # type: ignore[operator]
    bound = values[0]
    return {
        PredOp.NE: number != bound,
        PredOp.LT: number < bound,  # type: ignore[operator]
        PredOp.LE: number <= bound,  # type: ignore[operator]
        PredOp.GT: number > bound,  # type: ignore[operator]
        PredOp.GE: number >= bound,  # type: ignore[operator]
    }[op]


DOMAINS: dict[str, tuple[float | None, ...]] = {"a": INT_DOMAIN, "b": INT_DOMAIN, "w": FLOAT_DOMAIN}


def _rows(predicates: Sequence[Predicate]) -> tuple[frozenset[float | None], ...] | None:
    """The possible rows the conjunction selects, as the values each column may take
    (rows are their product; None: no row at all). Two conjunctions select the same rows
    of every table over the domain iff these are equal."""
    allowed = []
    for column, domain in DOMAINS.items():
        mine = [p for p in predicates if p.column.lower() == column]
        allowed.append(frozenset(v for v in domain if all(_holds(p, v) for p in mine)))
    return None if not all(allowed) else tuple(allowed)


def _conjunctions(predicates: st.SearchStrategy[Predicate]) -> st.SearchStrategy[list[Predicate]]:
    return st.lists(predicates, min_size=0, max_size=4)


def _variants(predicates: list[Predicate]) -> st.SearchStrategy[list[Predicate]]:
    """The same conjuncts, reordered, some repeated, column names in other letter case."""
    if not predicates:
        return st.just([])
    recased = st.lists(st.booleans(), min_size=len(predicates), max_size=len(predicates)).map(
        lambda upper: [
            Predicate(p.column.upper(), p.op, p.values) if u else p
            for p, u in zip(predicates, upper, strict=True)
        ]
    )
    return st.tuples(recased, st.lists(st.sampled_from(predicates), max_size=3)).flatmap(
        lambda pair: st.permutations([*pair[0], *pair[1]])
    )


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_conjunct_order_duplicates_and_case_never_change_the_key(data: st.DataObject) -> None:
    predicates = data.draw(_conjunctions(_INT_PREDICATES | _FLOAT_PREDICATES))
    variant = data.draw(_variants(predicates))
    assert cell_selection(variant, [], TYPES) == cell_selection(predicates, [], TYPES)


@pytest.mark.parametrize("predicates", [_INT_PREDICATES, _FLOAT_PREDICATES], ids=["integer", "double"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_equal_keys_select_the_same_rows_of_every_table(
    predicates: st.SearchStrategy[Predicate], data: st.DataObject
) -> None:
    # small constants make distinct conjunctions share keys often, and so does leaving out
    # one conjunct (the normalizer must only drop what is implied); a shared key must mean
    # the same rows for every possible row (so for every table) over the domain
    drawn = data.draw(st.lists(_conjunctions(predicates), min_size=2, max_size=8))
    pool = [c[:i] + c[i + 1 :] for c in drawn for i in range(len(c))] + drawn
    seen: dict[str, tuple[frozenset[float | None], ...] | None] = {}
    for conjunction in pool:
        rows = _rows(conjunction)
        selection = cell_selection(conjunction, [], TYPES)
        assert seen.setdefault(selection, rows) == rows, (selection, conjunction)


@settings(max_examples=200, deadline=None)
@given(_conjunctions(_INT_PREDICATES | _FLOAT_PREDICATES))
def test_the_empty_key_selects_no_row(predicates: list[Predicate]) -> None:
    if cell_selection(predicates, [], TYPES) == EMPTY:
        assert _rows(predicates) is None


@settings(max_examples=200, deadline=None)
@given(_conjunctions(_INT_PREDICATES), st.sampled_from(INT_DOMAIN))
def test_a_group_key_is_the_conjunct_it_stands_for(predicates: list[Predicate], value: int | None) -> None:
    as_key = cell_selection(predicates, [("a", value)], TYPES)
    written = Predicate("a", PredOp.IS_NULL) if value is None else Predicate("a", PredOp.IN, (value,))
    assert as_key == cell_selection([*predicates, written], [], TYPES)
    if as_key == EMPTY:
        assert _rows([*predicates, written]) is None


@settings(max_examples=200, deadline=None)
@given(_conjunctions(_INT_PREDICATES | _FLOAT_PREDICATES))
def test_the_canonical_form_read_back_is_the_same_selection(predicates: list[Predicate]) -> None:
    selection = cell_selection(predicates, [], TYPES)
    if selection == EMPTY:
        return
    rewritten: list[Predicate] = []
    for column, conditions in json.loads(selection).items():
        for name, value in conditions.items():
            if name == "in":
                rewritten.append(Predicate(column, PredOp.IN, tuple(value)))
            elif name == "ne":
                rewritten.extend(Predicate(column, PredOp.NE, (v,)) for v in value)
            elif name == "is":
                rewritten.append(Predicate(column, PredOp.IS_NULL if value == "null" else PredOp.IS_NOT_NULL))
            else:
                op = {"ge": PredOp.GE, "gt": PredOp.GT, "le": PredOp.LE, "lt": PredOp.LT}[name]
                rewritten.append(Predicate(column, op, (value,)))
    assert cell_selection(rewritten, [], TYPES) == selection
    assert _rows(rewritten) == _rows(predicates)


# --- disjunctions ---------------------------------------------------------------------


def test_a_disjunction_is_part_of_the_selection_and_never_mistaken_for_a_column() -> None:
    either = AnyOf((cmp("age", PredOp.GE, 30), eq("town", "Enfield")))  # canonical order
    with_it = key(either, eq("town", "Barnet"))
    assert with_it != key(eq("town", "Barnet"))
    assert json.loads(with_it) == {
        "and": {"town": {"in": ["Barnet"]}},
        "or": [[["age", ">=", [30]], ["town", "in", ["Enfield"]]]],
    }
    # a column named "or" or "and" keeps the per-column (object) form: no collision
    assert key(eq("or", "x")) != key(AnyOf((eq("x", "x"),)))
    # the same disjunction, wherever it sits among the conditions, is one selection
    assert key(eq("town", "Barnet"), either) == with_it
    other = AnyOf((cmp("age", PredOp.GE, 31), eq("town", "Enfield")))
    assert key(other, eq("town", "Barnet")) != with_it


@pytest.mark.parametrize(
    "pair",
    [
        (Predicate("w", PredOp.IN, (3.0,)), Predicate("w", PredOp.IN, (3,))),
        (Predicate("w", PredOp.GE, (3.0,)), Predicate("w", PredOp.GE, (3,))),
        (Predicate("w", PredOp.NE, (3.0,)), Predicate("w", PredOp.NE, (3,))),
        (Predicate("w", PredOp.BETWEEN, (3.0, 3.0)), Predicate("w", PredOp.LE, (3,))),
    ],
)
def test_equal_constants_of_two_types_give_one_key_in_either_order(pair: tuple[Predicate, Predicate]) -> None:
    """3 and 3.0 are one constant: the key must not take the form of whichever came first
    (hypothesis found IN (3.0) AND IN (3) keyed [3.0] or [3] by the order)."""
    first, second = pair
    assert cell_selection([first, second], [], {}) == cell_selection([second, first], [], {})
