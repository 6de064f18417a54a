"""Catalog queries, PostgreSQL dialect in, DuckDB SQL over the emulated catalog out.

Drivers and tools ask PostgreSQL's system catalogs what exists. Their queries are
parsed (sqlglot, postgres dialect) and rewritten to run in the analyst's private
catalog database (``catalog.py``), which holds no data:

- ``pg_catalog.X`` relations and functions become the emulation's ``pgcat.X``, and
  ``information_schema.X`` views ``infoschema.X``; the analyst's tables are ``public``;
- session facts (``current_user``, ``version()``, ``current_setting(...)``) become
  literals of this session;
- PostgreSQL-only syntax becomes DuckDB's: ``OPERATOR(pg_catalog.~)``, ``COLLATE``,
  casts to ``regclass``/``regtype``/``oid``/``name``;
- DuckDB's own table functions and system functions are refused: the only system
  catalog an analyst sees is the emulation.

Which queries come here, and which are answered empty without running, is decided
by ``catalog_queries.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from guard.server.pgwire import sqlstate
from guard.server.pgwire.catalog_queries import (
    CATALOG_SCHEMA,
    DATABASE,
    INFO_SCHEMA,
    USER_SCHEMA,
    CatalogNames,
    cte_names,
)
from guard.server.pgwire.functions import array_literal, format_call, setting_lookup
from guard.server.pgwire.settings import version_text
from guard.server.pgwire.sqlstate import SqlError

__all__ = ["SessionFacts", "to_duckdb"]

# Table functions a catalog query may use; every other (DuckDB's read_*, duckdb_*,
# query(), ...) would reach past the emulation.
_TABLE_FUNCTIONS = (exp.ExplodingGenerateSeries, exp.GenerateSeries, exp.Unnest, exp.Explode)
# Scalar functions of DuckDB that describe the engine rather than the policy
_REFUSED_PREFIXES = ("duckdb_", "pragma_", "read_", "glob", "getenv", "getvariable", "sniff_", "parquet_")

_OPERATORS: dict[str, Callable[[exp.Expr, exp.Expr], exp.Expr]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "!~": lambda a, b: exp.Not(this=exp.RegexpLike(this=a, expression=b)),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~*": lambda a, b: exp.Not(this=exp.RegexpILike(this=a, expression=b)),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "!~~": lambda a, b: exp.Not(this=exp.Like(this=a, expression=b)),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "!~~*": lambda a, b: exp.Not(this=exp.ILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
    "!=": lambda a, b: exp.NEQ(this=a, expression=b),
    "<": lambda a, b: exp.LT(this=a, expression=b),
    "<=": lambda a, b: exp.LTE(this=a, expression=b),
    ">": lambda a, b: exp.GT(this=a, expression=b),
    ">=": lambda a, b: exp.GTE(this=a, expression=b),
}

# PostgreSQL types without a DuckDB namesake, by what they hold
_TYPE_NAMES = {
    "oid": "BIGINT",
    "xid": "BIGINT",
    "cid": "BIGINT",
    "name": "VARCHAR",
    "char": "VARCHAR",
    "pg_node_tree": "VARCHAR",
    "text": "VARCHAR",
    "regproc": "VARCHAR",
    "int2vector": "SMALLINT[]",
    "oidvector": "BIGINT[]",
    "aclitem": "VARCHAR",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "REAL",
    "float8": "DOUBLE",
    "bool": "BOOLEAN",
}
# reg* casts: (function for a name -> OID, function for an OID -> name)
_REG_TYPES = {
    "regclass": ("regclass_oid", "regclass_name"),
    "regtype": ("regtype_oid", "regtype_name"),
    "regnamespace": ("regnamespace_oid", "regnamespace_name"),
    "regrole": ("regrole_oid", "regrole_name"),
    "regproc": ("regproc_name", "regproc_name"),
    "regprocedure": ("regproc_name", "regproc_name"),
}

_NAME_OF_OID = {by_name: by_oid for by_name, by_oid in _REG_TYPES.values() if by_name != by_oid}


@dataclass(frozen=True)
class SessionFacts:
    """Facts of the asking session that catalog queries may read."""

    analyst: str
    process_id: int
    #: current_setting(name): the session's value; raises SqlError for an unknown name
    setting: Callable[[str], str]
    #: every (name, value) of the session, for current_setting() of a name not written
    #: as a literal (a bound parameter)
    settings: Callable[[], Sequence[tuple[str, str]]] = tuple


# --- rewriting -----------------------------------------------------------------------


def to_duckdb(tree: exp.Expr, names: CatalogNames, facts: SessionFacts) -> str:
    """DuckDB SQL of the catalog query ``tree`` over the emulation.

    Raises:
        SqlError: a relation or function that does not exist here (42P01, 42883), or a
            construct the emulation does not support.
    """
    tree = tree.copy()
    _name_outputs(tree)
    ctes = cte_names(tree)
    # children first, so a rewritten node is built from rewritten parts
    for node in reversed(list(tree.walk())):
        replacement = _rewrite(node, names, facts, ctes)
        if replacement is not node:
            if node is tree:
                tree = replacement
            else:
                node.replace(replacement)
    return tree.sql(dialect="duckdb")


def _name_outputs(tree: exp.Expr) -> None:
    """Alias unnamed output columns as PostgreSQL names them (``version``, ``?column?``):
    the rewriting below would otherwise leak into the names DuckDB gives them."""
    while isinstance(tree, exp.Subquery | exp.Paren | exp.SetOperation):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return
    for projection in list(tree.expressions):
        if isinstance(projection, exp.Alias | exp.Column | exp.Star):
            continue
        projection.replace(exp.alias_(projection.copy(), _pg_output_name(projection), quoted=True))


def _pg_output_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Dot):
        return _pg_output_name(node.expression)
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Cast):
        inner = _pg_output_name(node.this)
        return _type_name(node.to).split("[")[0].split("(")[0] if inner == "?column?" else inner
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    if isinstance(node, exp.CurrentVersion):
        return "version"
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"


def _rewrite(node: exp.Expr, names: CatalogNames, facts: SessionFacts, ctes: set[str]) -> exp.Expr:
    if isinstance(node, exp.Table):
        return _table(node, names, ctes)
    if isinstance(node, exp.Column):
        return _column(node, facts)
    if isinstance(node, exp.Operator):
        return _operator(node)
    if isinstance(node, exp.Collate):
        collated: exp.Expr = node.this
        return collated
    if isinstance(node, exp.Dot) and node.this.name.lower() in ("pg_catalog", "information_schema"):
        qualified: exp.Expr = node.expression  # functions: the emulation has one namespace for them
        return qualified
    if isinstance(node, exp.Cast):
        return _cast(node)
    if isinstance(node, exp.Func):
        return _function(node, names, facts)
    return node


def _table(node: exp.Table, names: CatalogNames, ctes: set[str]) -> exp.Expr:
    if not isinstance(node.this, exp.Identifier):
        if isinstance(node.this, _TABLE_FUNCTIONS):
            node.set("db", None)  # pg_catalog.unnest(...) is DuckDB's unnest
            return node
        macro = node.this.expression if isinstance(node.this, exp.Dot) else None
        if node.this.text("this") == CATALOG_SCHEMA and isinstance(macro, exp.Anonymous):
            node.set("this", macro)  # pg_get_keywords(), already named as the emulation's macro
            return _qualified(node, CATALOG_SCHEMA)
        raise SqlError(
            sqlstate.UNDEFINED_FUNCTION, f"table function {node.this.sql('postgres')} is not available"
        )
    name = node.name.lower()
    db = node.text("db").lower()
    catalog = node.text("catalog").lower()
    if catalog and catalog != DATABASE:
        raise SqlError(
            sqlstate.FEATURE_NOT_SUPPORTED, f"cross-database references are not implemented: {catalog}"
        )
    if not db and name in ctes:
        return node
    if db == "pg_catalog" or (not db and name.startswith("pg_")):
        if name in names.relations:
            return _qualified(node, CATALOG_SCHEMA)
    elif db == "information_schema":
        if name in names.info_views:
            return _qualified(node, INFO_SCHEMA)
    elif db in ("", USER_SCHEMA) and name in names.user_tables:
        return _qualified(node, USER_SCHEMA)
    shown = f"{db}.{node.name}" if db else node.name
    raise SqlError(sqlstate.UNDEFINED_TABLE, f'relation "{shown}" does not exist')


def _qualified(node: exp.Table, schema: str) -> exp.Table:
    node.set("db", exp.to_identifier(schema))
    node.set("catalog", None)
    return node


def _column(node: exp.Column, facts: SessionFacts) -> exp.Expr:
    db = node.text("db").lower()
    if db == "pg_catalog":
        node.set("db", exp.to_identifier(CATALOG_SCHEMA))
    elif db == "information_schema":
        node.set("db", exp.to_identifier(INFO_SCHEMA))
    elif not node.table and not node.this.quoted and node.name.lower() in ("user", "current_role"):
        return exp.Literal.string(facts.analyst)  # keywords in PostgreSQL, not columns
    return node


def _operator(node: exp.Operator) -> exp.Expr:
    symbol = str(node.args.get("operator") or "").replace("pg_catalog.", "").strip()
    build = _OPERATORS.get(symbol)
    if build is None:
        raise SqlError(sqlstate.UNDEFINED_FUNCTION, f"operator does not exist: {symbol}")
    return build(node.this, node.expression)


def _type_name(to: exp.Expr) -> str:
    return to.sql(dialect="postgres").lower().replace("pg_catalog.", "").replace('"', "")


def _cast(node: exp.Cast) -> exp.Expr:
    name = _type_name(node.to)
    if name in _REG_TYPES:
        by_name, by_oid = _REG_TYPES[name]
        operand = node.this
        return _macro(by_name if _is_text(operand) else by_oid, operand)
    element = name[:-2] if name.endswith("[]") else name
    inner = node.this
    if name.endswith("[]") and isinstance(inner, exp.Literal) and inner.is_string:
        node.set("this", array_literal(inner.this))  # '{a,b}'::text[]
    if element in ("text", "varchar", "name") and isinstance(inner, exp.Dot) and inner.name in _NAME_OF_OID:
        return _macro(_NAME_OF_OID[inner.name], inner)  # 'int8'::regtype::text is "bigint"
    if element in _TYPE_NAMES:
        target = _TYPE_NAMES[element] + ("[]" if name.endswith("[]") else "")
        return exp.Cast(this=node.this, to=exp.DataType.build(target, dialect="duckdb"))
    return node


def _is_text(operand: exp.Expr) -> bool:
    """Whether a reg* cast's operand names something (text) rather than being an OID."""
    if isinstance(operand, exp.Placeholder | exp.Parameter | exp.DPipe | exp.Concat):
        return True  # a parameter, or text built by || or format()
    if isinstance(operand, exp.Cast):
        return _type_name(operand.to) in ("text", "varchar", "name")
    return isinstance(operand, exp.Literal) and operand.is_string


def _macro(name: str, *arguments: exp.Expr) -> exp.Expr:
    return exp.Dot(
        this=exp.to_identifier(CATALOG_SCHEMA),
        expression=exp.Anonymous(this=name, expressions=list(arguments)),
    )


def _function(node: exp.Func, names: CatalogNames, facts: SessionFacts) -> exp.Expr:
    if isinstance(node, exp.CurrentCatalog | exp.CurrentDatabase):
        return exp.Literal.string(DATABASE)
    if isinstance(node, exp.CurrentSchema):
        return exp.Literal.string(USER_SCHEMA)
    if isinstance(node, exp.CurrentUser | exp.SessionUser | exp.CurrentRole):
        return exp.Literal.string(facts.analyst)
    if isinstance(node, exp.CurrentVersion):
        return exp.Literal.string(version_text())
    if isinstance(node, exp.Format) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return format_call(node.this.this, node.expressions)
    if not isinstance(node, exp.Anonymous):
        return node
    name = node.name.lower()
    arguments = list(node.expressions)
    session = _session_function(name, arguments, facts)
    if session is not None:
        return session
    if name == "json_build_object":
        return exp.Anonymous(this="json_object", expressions=arguments)
    if name in names.functions:
        return _macro(name, *arguments)
    if name.startswith(_REFUSED_PREFIXES):
        raise SqlError(sqlstate.UNDEFINED_FUNCTION, f"function {name} does not exist")
    return node


def _session_function(name: str, arguments: list[exp.Expr], facts: SessionFacts) -> exp.Expr | None:
    if name in ("current_database", "current_catalog"):
        return exp.Literal.string(DATABASE)
    if name == "current_schema":
        return exp.Literal.string(USER_SCHEMA)
    if name in ("current_user", "session_user", "user", "current_role"):
        return exp.Literal.string(facts.analyst)
    if name == "version":
        return exp.Literal.string(version_text())
    if name == "pg_backend_pid":
        return exp.Literal.number(facts.process_id)
    if name == "current_schemas":
        implicit = bool(arguments) and arguments[0].sql().upper() in ("TRUE", "'T'", "'TRUE'")
        schemas = ["pg_catalog", USER_SCHEMA] if implicit else [USER_SCHEMA]
        return exp.Array(expressions=[exp.Literal.string(s) for s in schemas])
    if name == "current_setting":
        if not arguments:
            raise SqlError(sqlstate.UNDEFINED_FUNCTION, "function current_setting() does not exist")
        if isinstance(arguments[0], exp.Literal) and arguments[0].is_string:
            return exp.Literal.string(facts.setting(arguments[0].this))
        return setting_lookup(arguments[0], facts.settings())
    return None
