"""Bound parameters (``$1``, ``?``) replaced by literals in the syntax tree, before validation.

Values never pass through SQL text: each placeholder node becomes a literal node, so a
value cannot change the statement's structure whatever it contains, and the validator
then sees exactly what will run.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Sequence

from sqlglot import exp

from guard.errors import QueryRejected

__all__ = ["MAX_PARAMETERS", "Parameter", "bind_parameters"]

Parameter = str | int | float | decimal.Decimal | bool | dt.date | dt.datetime | None


#: the most parameters one statement may have (PostgreSQL's protocol counts them in 16 bits)
MAX_PARAMETERS = 65_535


def _short(text: str) -> str:
    return text if len(text) <= 12 else text[:12] + "..."


def bind_parameters(tree: exp.Expr, parameters: Sequence[Parameter] | None) -> exp.Expr:
    """``tree`` with every placeholder replaced by its parameter's literal.

    ``$n`` takes ``parameters[n-1]``; bare ``?`` take them in order (the two styles do
    not mix). With ``parameters`` None the tree must have no placeholder.

    Raises:
        QueryRejected: a placeholder without a value, a value without a placeholder,
            mixed styles, a named placeholder, or a value of an unsupported type.
    """
    placeholders = list(tree.find_all(exp.Placeholder))
    given = [] if parameters is None else list(parameters)
    if not placeholders:
        if given:
            raise QueryRejected(
                f"{len(given)} parameter value(s) sent but the query has no placeholder: "
                "write $1, $2, ... where the values go"
            )
        return tree
    numbered = [p for p in placeholders if p.this is not None]
    if numbered and len(numbered) != len(placeholders):
        raise QueryRejected("the query mixes $n and ? placeholders: use one style")
    if numbered:
        positions = []
        for p in numbered:
            text = str(p.this)
            if not text.isdigit() or int(text) < 1:
                raise QueryRejected(
                    f"named placeholder :{text} is not allowed: number the parameters $1, $2, ... "
                    "and send their values"
                )
            if int(text) > MAX_PARAMETERS:
                raise QueryRejected(
                    f"placeholder ${_short(text)} is beyond ${MAX_PARAMETERS}, the most parameters a "
                    "statement may have: number them $1, $2, ..."
                )
            positions.append(int(text))
        needed = max(positions)
    else:
        positions = list(range(1, len(placeholders) + 1))
        needed = len(placeholders)
    if parameters is None:
        raise QueryRejected(
            f"the query has placeholders but no parameter values: query parameters must be bound to "
            f"values, send {needed}"
        )
    if len(given) != needed:
        raise QueryRejected(
            f"the query uses {needed} parameter(s) but {len(given)} value(s) were sent: "
            "send one per placeholder"
        )
    for node, position in zip(placeholders, positions, strict=True):
        node.replace(_literal(given[position - 1], position))
    return tree


def _literal(value: Parameter, position: int) -> exp.Expr:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float | decimal.Decimal):
        if not math.isfinite(value):
            raise QueryRejected(f"parameter ${position} is not a finite number: send a finite value")
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        if "\x00" in value:
            raise QueryRejected(f"parameter ${position} contains a NUL character: remove it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise QueryRejected(
                f"parameter ${position} is not valid Unicode (a lone surrogate): send it as UTF-8 text"
            ) from None
        return exp.Literal.string(value)
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.Type.TIMESTAMP)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)
    raise QueryRejected(
        f"parameter ${position} has type {type(value).__name__}: "
        "send text, a number, a boolean, a date or NULL"
    )
