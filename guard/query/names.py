"""The names under which an analyst's tables are known: ``t``, ``public.t`` and
``statguard.public.t``, quoted or not, as the PostgreSQL endpoint's catalog advertises
them (database ``statguard``, schema ``public``). BI tools write the qualified forms.

Any other schema or database is refused with what to write instead: ``main.t`` (the
engine's own schema) or ``other.t`` would otherwise let a name reach past the policy.
"""

from __future__ import annotations

from sqlglot import exp

from guard.errors import QueryRejected

__all__ = ["DATABASE", "SCHEMA", "SYSTEM_SCHEMAS", "check_table_qualifiers", "column_qualifier"]

#: the database (catalog) the endpoints advertise: current_database()
DATABASE = "statguard"
#: the one schema holding the analyst's tables: current_schema()
SCHEMA = "public"
#: schemas of system catalogs (never data tables)
SYSTEM_SCHEMAS = ("information_schema", "pg_catalog", "system", "temp")


def _matches(part: exp.Expr | None, expected: str) -> bool:
    """Whether the name part is ``expected``: exactly when quoted, in any case otherwise
    (PostgreSQL folds unquoted names to lower case)."""
    if not isinstance(part, exp.Identifier):
        return False
    return part.name == expected if part.quoted else part.name.lower() == expected


def check_table_qualifiers(table: exp.Table) -> None:
    """Accept ``[statguard.][public.]name``; refuse any other schema or database.

    Raises:
        QueryRejected: another schema or database, with the forms that are accepted.
    """
    db, catalog = table.args.get("db"), table.args.get("catalog")
    name = table.name
    hint = f"write FROM {name}, FROM {SCHEMA}.{name} or FROM {DATABASE}.{SCHEMA}.{name}"
    if catalog is not None and not _matches(catalog, DATABASE):
        raise QueryRejected(
            f"database {catalog.sql(dialect='postgres')} is not available: the only database is "
            f"{DATABASE}; {hint}"
        )
    if db is not None and not _matches(db, SCHEMA):
        raise QueryRejected(
            f"schema {db.sql(dialect='postgres')} is not available: the tables you may query are in "
            f"schema {SCHEMA}; {hint}"
        )


def column_qualifier(column: exp.Column, table: str, alias: str | None) -> None:
    """Check a column's qualifiers against the one table read (``name`` or ``alias``):
    ``t.c``, ``alias.c``, ``public.t.c`` and ``statguard.public.t.c`` are accepted.

    Raises:
        QueryRejected: a qualifier naming anything else, with the accepted forms.
    """
    qualifier = column.args.get("table")
    db, catalog = column.args.get("db"), column.args.get("catalog")
    if qualifier is None:
        return
    names = {table.lower()} if db is not None else {table.lower(), (alias or table).lower()}
    if qualifier.name.lower() not in names:
        raise QueryRejected(
            f"unknown table qualifier {qualifier.name!r} in {column.sql(dialect='postgres')}: "
            f"only {table} is queried; write {alias or table}.{column.name}"
            + ("" if alias else f" or {SCHEMA}.{table}.{column.name}")
        )
    other_schema = db is not None and not _matches(db, SCHEMA)
    if other_schema or (catalog is not None and not _matches(catalog, DATABASE)):
        raise QueryRejected(
            f"{column.sql(dialect='postgres')}: the only schema is {SCHEMA} in database {DATABASE}; "
            f"write {alias or table}.{column.name}"
        )
