"""Stage 2: the allow-list of statement shapes.

Structural checks only: one plain SELECT over one declared table, none of the
constructs that reach outside the policy (files, catalogs, extensions) or that combine
query sets in ways the controls cannot see (subqueries, set operations, windows).
What each clause may contain, column by column, is checked by :mod:`analyze`.
"""

from __future__ import annotations

import difflib

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Table
from guard.query.names import SYSTEM_SCHEMAS, check_table_qualifiers

__all__ = ["validate"]

_SYSTEM_PREFIXES = ("duckdb_", "pg_", "sqlite_", "pragma_")

# Statements other than SELECT, by sqlglot node class: what to tell the analyst.
_STATEMENTS: tuple[tuple[tuple[type[exp.Expr], ...], str], ...] = (
    (
        (exp.Union, exp.Intersect, exp.Except),
        "{kind} is not allowed: set operations combine query sets the guard cannot "
        "control; send each SELECT separately",
    ),
    (
        (
            exp.Insert,
            exp.Update,
            exp.Delete,
            exp.Merge,
            exp.Create,
            exp.Drop,
            exp.Alter,
            exp.TruncateTable,
        ),
        "{kind} is not allowed: the guard is read-only; send a SELECT of aggregates",
    ),
    (
        (exp.Attach, exp.Detach, exp.Use),
        "{kind} is not allowed: only the tables declared in the policy can be queried",
    ),
    (
        (exp.Copy, exp.Export),
        "{kind} is not allowed: the guard never reads or writes files; send a SELECT",
    ),
    (
        (
            exp.Pragma,
            exp.Set,
            exp.Install,
            exp.Command,
            exp.Describe,
            exp.Show,
            exp.Summarize,
            exp.Transaction,
            exp.Commit,
            exp.Rollback,
        ),
        "{kind} is not allowed: only SELECT statements of aggregates are accepted",
    ),
)

# Constructs that may not appear anywhere inside an accepted SELECT.
_FORBIDDEN: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Window, "window functions (OVER ...) are not allowed: use GROUP BY"),
    (exp.TableSample, "sampling (USING SAMPLE / TABLESAMPLE) is not allowed: query whole tables"),
    (
        exp.Having,
        "HAVING is not allowed: it releases or hides cells depending on confidential "
        "values; filter on dimensions in WHERE instead",
    ),
    (exp.Qualify, "QUALIFY is not allowed: filter on dimensions in WHERE instead"),
    (exp.Lateral, "LATERAL is not allowed: query one table"),
    (exp.Pivot, "PIVOT/UNPIVOT is not allowed: use GROUP BY"),
    (exp.Unnest, "UNNEST is not allowed: query a table declared in the policy"),
    (exp.Into, "SELECT ... INTO is not allowed: the guard is read-only"),
    (exp.Placeholder, "query parameters must be bound to values before the query is checked"),
    (exp.Parameter, "query parameters must be bound to values before the query is checked"),
)

# The SELECT clauses analyze() reads; any other clause sqlglot fills in (FOR UPDATE, ...)
# would be silently ignored by the rewrite, so it is refused instead.
_SELECT_CLAUSES = frozenset({"expressions", "from_", "from", "where", "group", "order", "limit", "offset"})
_CLAUSE_NAMES = {"locks": "FOR UPDATE / FOR SHARE", "sample": "USING SAMPLE", "windows": "WINDOW"}
# The parts a FROM table may have (schema and database checked by names.py); anything
# else, such as time travel (AT ...), WITH ORDINALITY or ONLY, is refused.
_TABLE_PARTS = frozenset({"this", "alias", "db", "catalog"})
_SHAPE_HINT = "send SELECT aggregates FROM one table [WHERE ...] [GROUP BY ...] [ORDER BY ...] [LIMIT n]"


def validate(tree: exp.Expr, tables: tuple[Table, ...]) -> tuple[exp.Select, Table]:
    """Check the statement's overall shape and return it with the table it reads.

    ``tables`` are the tables this analyst may query; the others do not exist for them
    (deny by default: messages never name a table the analyst cannot use).

    Raises:
        QueryRejected: the message says what is not allowed and what to send instead.
    """
    if not isinstance(tree, exp.Select):
        raise QueryRejected(_statement_message(tree))
    if tree.args.get("with_") is not None or tree.args.get("with") is not None:
        raise QueryRejected("WITH (common table expressions) is not allowed: query one table directly")
    if tree.args.get("distinct") is not None:
        raise QueryRejected(
            "SELECT DISTINCT with aggregates is not allowed: group by dimensions instead; to list "
            "a dimension's values, write SELECT DISTINCT dimension FROM table"
        )
    table = _from_table(tree, tables)
    _no_forbidden_nodes(tree)
    _no_other_clauses(tree)
    return tree, table


def _statement_message(tree: exp.Expr) -> str:
    kind = _statement_kind(tree)
    for classes, template in _STATEMENTS:
        if isinstance(tree, classes):
            return template.format(kind=kind)
    return f"{kind} is not allowed: only SELECT statements of aggregates are accepted"


def _statement_kind(tree: exp.Expr) -> str:
    if isinstance(tree, exp.Command):
        return str(tree.this).upper()
    if isinstance(tree, exp.Create | exp.Drop | exp.Alter):
        kind = tree.args.get("kind")
        return f"{type(tree).__name__.upper()} {kind}".strip() if kind else type(tree).__name__.upper()
    names = {exp.TruncateTable: "TRUNCATE", exp.Transaction: "BEGIN", exp.Set: "SET"}
    for klass, name in names.items():
        if isinstance(tree, klass):
            return name
    if any(isinstance(tree, classes) for classes, _ in _STATEMENTS):
        return type(tree).__name__.upper()
    # Statements sqlglot does not know may come back as expressions (DEALLOCATE p parses
    # as a column alias): name them by their first word, as the analyst typed them.
    words = tree.sql(dialect="duckdb").split()
    return words[0].upper() if words else type(tree).__name__.upper()


def _from_table(select: exp.Select, tables: tuple[Table, ...]) -> Table:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise QueryRejected(
            "a FROM clause naming a protected table is required: the tables you may query are "
            + _names(tables)
        )
    if select.args.get("joins"):
        raise QueryRejected("JOIN is not allowed: query one protected table at a time")
    source = from_.this
    if isinstance(source, exp.Subquery):
        raise QueryRejected("subqueries are not allowed: query a protected table directly")
    if isinstance(source, exp.Values):
        raise QueryRejected("VALUES lists are not allowed: query a table declared in the policy")
    if isinstance(source, exp.Unnest):
        raise QueryRejected("UNNEST is not allowed: query a table declared in the policy")
    if not isinstance(source, exp.Table):
        raise QueryRejected(
            f"FROM {source.sql(dialect='duckdb')} is not allowed: "
            "query a table declared in the policy by its name"
        )
    if not isinstance(source.this, exp.Identifier):
        raise QueryRejected(
            "table functions such as read_csv(...) are not allowed: "
            "query a table declared in the policy by its name"
        )
    name = source.name
    if source.this.quoted and any(ch in name for ch in "/\\.:"):
        raise QueryRejected(
            f"reading files ({name!r}) is not allowed: query a table declared in the policy by its name"
        )
    qualifiers = [p.name.lower() for p in (source.args.get("catalog"), source.args.get("db")) if p]
    if (
        any(q in SYSTEM_SCHEMAS for q in qualifiers)
        or name.lower().startswith(_SYSTEM_PREFIXES)
        or (name.lower() in SYSTEM_SCHEMAS)
    ):
        raise QueryRejected(
            "system catalogs are not available: the tables you may query are " + _names(tables)
        )
    check_table_qualifiers(source)
    alias = source.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        raise QueryRejected(
            "column aliases on the table (AS t(a, b, ...)) are not allowed: they rename columns; "
            f"use the column names of the policy, e.g. FROM {name} AS t"
        )
    table = next((t for t in tables if t.name.lower() == name.lower()), None)
    if table is None:
        declared = [t.name for t in tables]
        close = difflib.get_close_matches(name.lower(), [d.lower() for d in declared], n=1)
        hint = f" (did you mean {next(d for d in declared if d.lower() == close[0])!r}?)" if close else ""
        raise QueryRejected(f"unknown table {name!r}{hint}: the tables you may query are {_names(tables)}")
    return table


def _names(tables: tuple[Table, ...]) -> str:
    return ", ".join(t.name for t in tables) or "none"


def _no_forbidden_nodes(select: exp.Select) -> None:
    for node in select.walk():
        if node is not select and isinstance(node, exp.Select | exp.Subquery):
            raise QueryRejected("subqueries are not allowed: send one SELECT over one table")
        if isinstance(node, exp.SetOperation):
            raise QueryRejected("UNION/INTERSECT/EXCEPT are not allowed: send each SELECT separately")
        for klass, message in _FORBIDDEN:
            if isinstance(node, klass):
                raise QueryRejected(message)
        if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):
            raise QueryRejected(
                "SELECT * is not allowed: select aggregates such as COUNT(*), SUM(measure), "
                "AVG(measure), optionally grouped by dimension columns"
            )


def _no_other_clauses(select: exp.Select) -> None:
    """Refuse what the specific checks above have no message for."""
    for key, value in select.args.items():
        if value and key not in _SELECT_CLAUSES:
            clause = _CLAUSE_NAMES.get(key, key.rstrip("_").replace("_", " ").upper())
            raise QueryRejected(f"{clause} is not allowed: {_SHAPE_HINT}")
    from_ = select.args.get("from_") or select.args.get("from")
    source = from_.this if from_ is not None else None
    assert isinstance(source, exp.Table)  # _from_table() checked it
    if any(value for key, value in source.args.items() if key not in _TABLE_PARTS):
        raise QueryRejected(
            f"FROM {source.sql(dialect='duckdb')} is not allowed: name the table, optionally "
            f"with an alias, and nothing else (FROM {source.name} [AS alias])"
        )
