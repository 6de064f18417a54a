"""The one SQL expression of each derived dimension, shared by every snapshot builder.

A derived dimension (``guard.policy.derivation``) becomes a column of the snapshot,
computed from its source's column by one CASE built here with sqlglot and rendered in
the engine's dialect: the DuckDB loader of files (whose snapshot PostgreSQL and Spark
copy) and the in-engine snapshots of PostgreSQL and Spark tables compute the same
values. Every stage then reads it as an ordinary dimension.

The checks that need the source's type live here too: bands need a numeric source; map
keys are compared as numbers with a numeric source and as texts with a text source; a
non-NULL value that no key covers (and no ``other``) fails the snapshot.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

from sqlglot import ErrorLevel, exp

from guard.engines import NUMERIC_TYPES
from guard.errors import PolicyError
from guard.policy.derivation import Derivation, DerivationKind, MapKey
from guard.policy.model import Column, Policy, Role, Table

__all__ = ["TEXT", "check_maps", "declaration", "derived_sql"]

#: examples of uncovered values a policy error names (dimension sources only)
_EXAMPLES = 3
#: distinct uncovered values counted before the message says "more than"
_COUNTED = 1000
_INTEGER = re.compile(r"[+-]?\d+")
#: the snapshot's own text type as the guard names it
TEXT = "VARCHAR"


def declaration(table: Table) -> list[object]:
    """What the table's data version must change with besides its stored columns: every
    derivation, as one entry to append to the declaration (none when the table has no
    derived dimension, so such a table keeps its version)."""
    derived = [[c.name, c.derived.declaration()] for c in table.columns if c.derived is not None]
    return [["derived", derived]] if derived else []


def derived_sql(
    policy: Policy, table: Table, types: Mapping[str, str], dialect: str, qualifier: str | None = None
) -> list[str]:
    """``CASE ... END AS name`` for each derived dimension of ``table`` in ``dialect``
    (anything the dialect cannot express raises), over the source columns by their
    declared names (qualified by ``qualifier`` if given). ``types`` maps a lower-cased
    source column to its type in the guard's (DuckDB's) vocabulary.

    Raises:
        PolicyError: a band of a non-numeric column, a map over a column that is neither
            numeric nor text, or a map key of the wrong kind.
    """
    projections: list[str] = []
    for column in table.derived:
        derivation = column.derived
        assert derivation is not None
        source = exp.column(derivation.source, table=qualifier, quoted=True)
        kind = types[derivation.source.lower()].upper()
        numeric = kind.split("(")[0] in NUMERIC_TYPES
        where = f"{policy.path.name}: tables.{table.name}.derived.{column.name}"
        if derivation.kind is DerivationKind.BANDS:
            if not numeric:
                raise PolicyError(
                    f"{where}.bands: bands need a numeric column, and {derivation.source} has {kind}: "
                    "derive with map: or labels: instead"
                )
            case = _bands(source, derivation)
        else:
            if not numeric and kind != TEXT:
                raise PolicyError(
                    f"{where}.from: {derivation.source} has {kind}; a map or labels need a number or "
                    "text column"
                )
            case = _lookup(source, derivation, where, numeric)
        projection = exp.alias_(case, column.name, quoted=True)
        projections.append(projection.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE))
    return projections


def _bands(source: exp.Column, derivation: Derivation) -> exp.Case:
    case = exp.Case()
    for band in derivation.bands:
        if band.upper is None:
            condition: exp.Expr = exp.Not(this=exp.Is(this=source.copy(), expression=exp.Null()))
        else:
            bound = _number(band.upper)
            condition = (
                exp.LTE(this=source.copy(), expression=bound)
                if band.inclusive
                else exp.LT(this=source.copy(), expression=bound)
            )
        case = case.when(condition, exp.Literal.string(band.label))
    return case


def _lookup(source: exp.Column, derivation: Derivation, where: str, numeric: bool) -> exp.Case:
    key_name = "map_file" if derivation.file is not None else derivation.kind.value
    by_label: dict[str, list[exp.Expr]] = {}
    seen: dict[object, MapKey] = {}
    for key, label in derivation.mapping:
        value = _key(key, numeric, f"{where}.{key_name}", derivation.source)
        if value in seen:
            raise PolicyError(
                f"{where}.{key_name}: the keys {seen[value]!r} and {key!r} are the same value of "
                f"{derivation.source}: keep one"
            )
        seen[value] = key
        literal = _number(value) if isinstance(value, int | float) else exp.Literal.string(str(value))
        by_label.setdefault(label, []).append(literal)
    case = exp.Case()
    for label, keys in by_label.items():
        condition: exp.Expr = (
            exp.EQ(this=source.copy(), expression=keys[0])
            if len(keys) == 1
            else exp.In(this=source.copy(), expressions=keys)
        )
        case = case.when(condition, exp.Literal.string(label))
    if derivation.other is not None:
        present = exp.Not(this=exp.Is(this=source.copy(), expression=exp.Null()))
        case = case.when(present, exp.Literal.string(derivation.other))
    return case


def _key(key: MapKey, numeric: bool, where: str, source: str) -> int | float | str:
    """A map key as the source's values compare with it."""
    if numeric:
        if isinstance(key, str):
            text = key.strip()
            try:
                number: float = int(text) if _INTEGER.fullmatch(text) else float(text)
            except ValueError:
                raise PolicyError(
                    f"{where}: the key {key!r} is not a number, but {source} is numeric: "
                    "write its values as numbers"
                ) from None
            key = number
        if isinstance(key, float) and not math.isfinite(key):
            raise PolicyError(f"{where}: the key {key!r} is not a finite number")
        return int(key) if isinstance(key, float) and key.is_integer() else key
    if isinstance(key, float):
        raise PolicyError(
            f"{where}: the key {key!r} is a number but {source} holds text: quote it as the text it is "
            "in the data"
        )
    return str(key)


def _number(value: float) -> exp.Expr:
    if isinstance(value, float) and value.is_integer():
        return exp.Literal.number(int(value))
    return exp.Literal.number(repr(value) if isinstance(value, float) else value)


def check_maps(
    policy: Policy,
    table: Table,
    relation: exp.Table,
    dialect: str,
    fetch: Callable[[str], Sequence[Sequence[object]]],
) -> None:
    """Every map without ``other`` covers every value of its source in the built snapshot
    ``relation``; ``fetch`` runs a query (in ``dialect``) on it and returns its rows.

    Raises:
        PolicyError: a non-NULL value of the source has no label (the caller drops the
            snapshot).
    """
    for column in table.derived:
        assert column.derived is not None
        if column.derived.other is not None or not column.derived.mapping:
            continue
        found = fetch(_unmapped_query(relation, column).sql(dialect=dialect))
        if found:
            raise _unmapped_error(policy, table, column, [row[0] for row in found])


def _unmapped_query(relation: exp.Table, column: Column) -> exp.Select:
    """The values (as text, in order) of the built snapshot's rows whose source has a
    value but whose derived column is NULL: the values the map does not cover."""
    derivation = column.derived
    assert derivation is not None
    source = exp.column(derivation.source, quoted=True)
    missing = exp.and_(
        exp.Not(this=exp.Is(this=source.copy(), expression=exp.Null())),
        exp.Is(this=exp.column(column.name, quoted=True), expression=exp.Null()),
    )
    text = exp.Cast(this=source.copy(), to=exp.DataType.build("VARCHAR"))
    return (
        exp.select(exp.alias_(text, "value", quoted=True))
        .distinct()
        .from_(relation.copy())
        .where(missing)
        .order_by(exp.column("value", quoted=True))
        .limit(_COUNTED + 1)
    )


def _unmapped_error(policy: Policy, table: Table, column: Column, found: list[object]) -> PolicyError:
    """The policy error for the rows of ``_unmapped_query``; values are named only when the
    source is a dimension (a measure's values are confidential even to the log)."""
    derivation = column.derived
    assert derivation is not None
    key_name = "map_file" if derivation.file is not None else derivation.kind.value
    source = table.column(derivation.source)
    count = f"more than {_COUNTED}" if len(found) > _COUNTED else str(len(found))
    what = f"{derivation.source} has {count} value{'' if len(found) == 1 else 's'} with no label"
    if source is not None and source.role is Role.DIMENSION:
        shown = ", ".join(repr(str(v)) for v in found[:_EXAMPLES])
        what += f" ({shown}{', ...' if len(found) > _EXAMPLES else ''})"
    return PolicyError(
        f"{policy.path.name}: tables.{table.name}.derived.{column.name}.{key_name}: {what}: add them, or "
        "declare other: with the label of every value not listed"
    )
