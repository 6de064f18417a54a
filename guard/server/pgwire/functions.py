"""PostgreSQL functions whose meaning depends on their arguments' text, rewritten for the
catalog emulation when the arguments are known (``translate.py`` calls these).

- ``format(fmt, ...)`` with a literal format: ``%s``, ``%I`` and ``%L`` become a
  concatenation (DuckDB's ``format`` reads ``{}`` placeholders, not PostgreSQL's);
- ``'{a,b}'::text[]``: PostgreSQL's array literal, as an array of strings;
- ``current_setting(x)`` of a name known only when the query runs (a bound parameter):
  a CASE over the session's values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlglot import exp

from guard.server.pgwire import sqlstate
from guard.server.pgwire.catalog_queries import CATALOG_SCHEMA
from guard.server.pgwire.sqlstate import SqlError

__all__ = ["UNKNOWN_SETTING", "array_literal", "format_call", "setting_lookup"]

#: how a failed current_setting() lookup starts (PostgreSQL's words)
UNKNOWN_SETTING = "unrecognized configuration parameter"

_SPECIFIER = re.compile(r"%(.)")
_ELEMENT = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^,"]*?))\s*(?:,|$)')


def array_literal(text: str) -> exp.Expr:
    """PostgreSQL's text form of a one-dimensional array (``{a,"b c",NULL}``) as an
    array of string literals (unquoted NULL: NULL).

    Raises:
        SqlError: 22P02, text that is not such an array.
    """
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")) or "{" in body[1:-1]:
        raise SqlError(sqlstate.INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{text}"')
    inner, at = body[1:-1], 0
    elements: list[exp.Expr] = []
    while inner.strip() and at < len(inner):
        match = _ELEMENT.match(inner, at)
        if match is None or match.end() == at:
            raise SqlError(sqlstate.INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{text}"')
        quoted, bare = match.group(1), match.group(2)
        if quoted is not None:
            elements.append(exp.Literal.string(re.sub(r"\\(.)", r"\1", quoted)))
        elif bare.upper() == "NULL":
            elements.append(exp.Null())
        else:
            elements.append(exp.Literal.string(bare))
        at = match.end()
    return exp.Array(expressions=elements)


def format_call(template: str, arguments: Sequence[exp.Expr]) -> exp.Expr:
    """``format(template, arguments...)`` as PostgreSQL computes it: ``%s`` the argument
    as text (NULL: empty), ``%I`` quoted as an identifier, ``%L`` as a literal (NULL:
    ``NULL``), ``%%`` a percent sign.

    Raises:
        SqlError: 22023 for a specifier PostgreSQL does not know or too few arguments
            (positional ``%1$s`` and widths are not emulated: 0A000).
    """
    parts: list[exp.Expr] = []
    at, used = 0, 0
    for match in _SPECIFIER.finditer(template):
        if match.start() > at:
            parts.append(exp.Literal.string(template[at : match.start()]))
        at = match.end()
        kind = match.group(1)
        if kind == "%":
            parts.append(exp.Literal.string("%"))
            continue
        if kind not in "sIL":
            code = sqlstate.FEATURE_NOT_SUPPORTED if kind.isdigit() or kind in "-*" else None
            raise SqlError(
                code or sqlstate.INVALID_PARAMETER_VALUE,
                f'unrecognized format() type specifier "{kind}"'
                if code is None
                else "format() with positions or widths is not supported by the catalog emulation",
            )
        if used >= len(arguments):
            raise SqlError(sqlstate.INVALID_PARAMETER_VALUE, "too few arguments for format()")
        parts.append(_formatted(kind, arguments[used].copy()))
        used += 1
    if at < len(template):
        parts.append(exp.Literal.string(template[at:]))
    if not parts:
        return exp.Literal.string("")
    result = parts[0]
    for part in parts[1:]:
        result = exp.DPipe(this=result, expression=part)
    return result


def _formatted(kind: str, argument: exp.Expr) -> exp.Expr:
    text = exp.Cast(this=argument, to=exp.DataType.build("VARCHAR"))
    if kind == "s":
        return exp.Coalesce(this=text, expressions=[exp.Literal.string("")])
    if kind == "I":
        return exp.Dot(
            this=exp.to_identifier(CATALOG_SCHEMA),
            expression=exp.Anonymous(this="quote_ident", expressions=[text]),
        )
    quoted = exp.DPipe(
        this=exp.DPipe(
            this=exp.Literal.string("'"),
            expression=exp.Anonymous(
                this="replace", expressions=[text.copy(), exp.Literal.string("'"), exp.Literal.string("''")]
            ),
        ),
        expression=exp.Literal.string("'"),
    )
    return exp.Coalesce(this=quoted, expressions=[exp.Literal.string("NULL")])


def setting_lookup(argument: exp.Expr, settings: Sequence[tuple[str, str]]) -> exp.Expr:
    """``current_setting(argument)`` over the session's ``settings`` (name, value): an
    unknown name fails as in PostgreSQL (42704, see ``catalog._sql_error``), NULL gives
    NULL."""
    key = exp.Lower(this=exp.Cast(this=argument, to=exp.DataType.build("VARCHAR")))
    case = exp.Case().when(exp.Is(this=argument.copy(), expression=exp.Null()), exp.Null())
    for setting, value in settings:
        named = exp.EQ(this=key.copy(), expression=exp.Literal.string(setting.lower()))
        case = case.when(named, exp.Literal.string(value))
    unknown = exp.DPipe(
        this=exp.DPipe(this=exp.Literal.string(f'{UNKNOWN_SETTING} "'), expression=key.copy()),
        expression=exp.Literal.string('"'),
    )
    return case.else_(exp.Anonymous(this="error", expressions=[unknown]))
