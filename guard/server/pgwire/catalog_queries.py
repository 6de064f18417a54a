"""What a catalog query reads, before it is rewritten: whether it reads a system catalog
at all, whether it can return a row, and what its columns are called.

Drivers' metadata queries join many catalogs; those that describe objects statguard
never has (indexes, policies, publications, inheritance...) are always empty, and a
query that must read one of them through an inner join is answered with no row and
without running (:func:`certainly_empty`): PostgreSQL-only syntax in the rest of such a
query never has to be emulated.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from guard.query.names import DATABASE, SCHEMA

__all__ = [
    "CATALOG_SCHEMA",
    "DATABASE",
    "FEATURES_NEVER_PRESENT",
    "INFO_SCHEMA",
    "USER_SCHEMA",
    "CatalogNames",
    "certainly_empty",
    "cte_names",
    "output_names",
    "references_catalog",
]

CATALOG_SCHEMA = "pgcat"
INFO_SCHEMA = "infoschema"
#: the schema and database the analyst's tables are in (the guard accepts these names too)
USER_SCHEMA = SCHEMA

#: catalog relations describing objects statguard never has: always empty, no DDL needed
FEATURES_NEVER_PRESENT = frozenset(
    {
        "pg_statistic_ext",
        "pg_statistic_ext_data",
        "pg_publication",
        "pg_publication_rel",
        "pg_publication_namespace",
        "pg_publication_tables",
        "pg_subscription",
        "pg_subscription_rel",
        "pg_event_trigger",
        "pg_foreign_server",
        "pg_foreign_data_wrapper",
        "pg_user_mapping",
        "pg_largeobject_metadata",
        "pg_init_privs",
        "pg_seclabel",
        "pg_shseclabel",
        "pg_default_acl",
        "pg_db_role_setting",
        "pg_transform",
        "pg_policies",
        "pg_rules",
        "pg_triggers",
    }
)


@dataclass(frozen=True)
class CatalogNames:
    """What the analyst's catalog database holds (read from it after it is built)."""

    #: relations of the emulated pg_catalog
    relations: frozenset[str]
    #: relations that never have rows (empty emulated ones and FEATURES_NEVER_PRESENT)
    empty: frozenset[str]
    #: views of the emulated information_schema
    info_views: frozenset[str]
    #: PostgreSQL functions the emulation defines as macros
    functions: frozenset[str]
    #: the analyst's tables, lower-cased
    user_tables: frozenset[str]


def references_catalog(tree: exp.Expr) -> bool:
    """Whether ``tree`` reads a system catalog, or reads no relation at all (constants,
    session functions): such queries are answered from the catalog emulation."""
    ctes = cte_names(tree)
    tables = [t for t in tree.find_all(exp.Table) if t.name.lower() not in ctes or t.args.get("db")]
    return not tables or any(_is_system(t) for t in tables)


def _is_system(table: exp.Table) -> bool:
    db = table.text("db").lower()
    name = table.name.lower()
    if db in ("pg_catalog", "information_schema"):
        return True
    return not db and name.startswith("pg_")


def cte_names(tree: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


# --- empty answers -------------------------------------------------------------------


def certainly_empty(tree: exp.Expr, names: CatalogNames) -> bool:
    """Whether ``tree`` returns no row whatever the catalog holds: every branch reads a
    relation that is always empty through an inner join (and aggregates nothing)."""
    if isinstance(tree, exp.Subquery | exp.Paren):
        return certainly_empty(tree.this, names)
    if isinstance(tree, exp.Union):
        return certainly_empty(tree.this, names) and certainly_empty(tree.expression, names)
    if isinstance(tree, exp.Intersect):
        return certainly_empty(tree.this, names) or certainly_empty(tree.expression, names)
    if isinstance(tree, exp.Except):
        return certainly_empty(tree.this, names)
    if not isinstance(tree, exp.Select):
        return False
    if not tree.args.get("group") and any(
        isinstance(node, exp.AggFunc) for p in tree.expressions for node in _outside_subqueries(p)
    ):
        return False  # SELECT count(*) FROM empty has one row
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        return False
    joins = tree.args.get("joins") or []
    if any(j.args.get("side") in ("RIGHT", "FULL") for j in joins):
        return False
    required = [from_.this, *(j.this for j in joins if j.args.get("side") != "LEFT")]
    return any(_always_empty(source, names) for source in required)


def _always_empty(source: exp.Expr, names: CatalogNames) -> bool:
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
        db = source.text("db").lower()
        return db in ("", "pg_catalog") and source.name.lower() in names.empty
    if isinstance(source, exp.Subquery):
        return certainly_empty(source.this, names)
    return False


def _outside_subqueries(node: exp.Expr) -> list[exp.Expr]:
    return list(node.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select) and n is not node))


def output_names(tree: exp.Expr) -> tuple[str, ...] | None:
    """Column names of a query's answer; None when they cannot be read off the text (``*``)."""
    while isinstance(tree, exp.Subquery | exp.Paren | exp.SetOperation):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return None
    names = []
    for projection in tree.expressions:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None
        names.append(projection.alias_or_name or "?column?")
    return tuple(names)
