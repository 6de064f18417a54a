"""The PostgreSQL back-end: versioned snapshots, queried by a read-only, least-privilege role.

The guard never queries a live source. :mod:`guard.backends.postgres_snapshot` keeps
one snapshot per data version in the guard's schema (``backend.schema``), built by the
owner role (``backend.owner_dsn``). Queries run on the query role (``backend.dsn``),
which is checked when the backend opens: it may not be a superuser, may not reach the
server's files or programs, and may not write to the snapshots or create anything in
the schema. Every query then runs in a READ ONLY transaction, on a session whose default
is read-only too, with a statement timeout.

The guard names tables by their declared name; before rendering, each reference is
bound to its versioned snapshot, and a reference to anything else is refused.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psycopg
import sqlglot.errors
from psycopg import sql
from sqlglot import exp

from guard.backends.base import Backend, Capabilities, KeyedHash, ResultSet, TableInfo, TopN, plain_rows
from guard.backends.postgres_connect import connect, first_line
from guard.backends.postgres_snapshot import Connection, Snapshot, Snapshotter
from guard.errors import BackendError, PolicyError
from guard.policy.model import Policy

__all__ = ["POSTGRES_CAPABILITIES", "PostgresBackend", "connect"]

POSTGRES_CAPABILITIES = Capabilities(
    dialect="postgres",
    filtered_aggregates=True,
    # two-pass max-and-join: 0.30x the window template on PostgreSQL, 0.42x on Spark
    # (1M rows, one row per unit; about even on panel data): benchmarks/bench_topn.py
    top_n=TopN.MAX_JOIN,
    list_merge=False,
    keyed_hash=KeyedHash.TEXT,
)
DEFAULT_SCHEMA = "statguard"

#: session settings of every query connection; the transaction is READ ONLY besides
_SESSION = (
    "SET default_transaction_read_only = on",
    "SET statement_timeout = '300s'",
    "SET idle_in_transaction_session_timeout = '60s'",
    # tables are always schema-qualified; functions resolve in pg_catalog only
    "SET search_path = pg_catalog",
)
#: predefined roles that reach the server's files or programs
_DANGEROUS_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
#: role attributes that a query role must not have, nor reach with SET ROLE
_DANGEROUS_ATTRIBUTES = {
    "rolsuper": "is a superuser",
    "rolcreaterole": "may create roles",
    "rolreplication": "may start replication",
    "rolbypassrls": "bypasses row security",
}
_WRITES = "INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER"
#: idle query connections kept open for the next query
_IDLE_LIMIT = 32


class PostgresBackend(Backend):
    capabilities = POSTGRES_CAPABILITIES

    def __init__(self, policy: Policy) -> None:
        options = policy.backend.options
        if "dsn" not in options:
            raise PolicyError(
                f"{policy.path.name}: backend.dsn: the postgres backend needs the query role's dsn"
            )
        self._policy = policy
        self._dsn = options["dsn"]
        self._schema = options.get("schema", DEFAULT_SCHEMA)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False
        reader = self._open_reader()
        try:
            role = _check_role(reader, policy)
            snapshotter = Snapshotter(policy, self._schema, options.get("owner_dsn"))
            self._snapshots: dict[str, Snapshot] = snapshotter.ensure(reader, role)
            _check_read_only(reader, policy, self._schema, [s.name for s in self._snapshots.values()])
        except BaseException:
            reader.close()
            raise
        self._idle.append(reader)

    # -- the interface ---------------------------------------------------------------

    def table_info(self, table: str) -> TableInfo:
        return self._snapshots[table.lower()].info

    def execute(self, query: exp.Expr) -> ResultSet:
        """Run one guard-generated SELECT in a READ ONLY transaction.

        Raises BackendError if the query is not a SELECT, names an undeclared table,
        cannot be written in PostgreSQL's SQL, or fails in the engine.
        """
        if not isinstance(query, exp.Query):
            raise BackendError(f"the postgres backend runs queries only, not {query.key.upper()} statements")
        try:
            text = self.sql(self._bind(query))
        except sqlglot.errors.SqlglotError as exc:
            raise BackendError(
                f"the query cannot be written in postgres SQL: {str(exc).splitlines()[0]}"
            ) from None
        con = self._borrow()
        try:
            with con.transaction():
                # prepare=True: the extended protocol, which runs exactly one statement
                cursor = con.execute(text, prepare=True)
                rows = cursor.fetchall()
                columns = tuple(d.name for d in cursor.description or ())
        except psycopg.Error as exc:
            # the primary message may quote the guard's own query text, never a row
            raise BackendError(f"the data engine failed: {first_line(exc)}") from None
        finally:
            self._give_back(con)
        return ResultSet(columns, [tuple(_plain(v) for v in row) for row in plain_rows(rows)])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            with contextlib.suppress(psycopg.Error):
                con.close()

    # -- binding ---------------------------------------------------------------------

    def _bind(self, query: exp.Query) -> exp.Expr:
        """A copy of ``query`` whose declared tables name their versioned snapshots."""
        tree = query.copy()
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        for table in list(tree.find_all(exp.Table)):
            plain = isinstance(table.this, exp.Identifier) and not table.args.get("db")
            if plain and not table.args.get("catalog"):
                if table.name.lower() in ctes:
                    continue
                snapshot = self._snapshots.get(table.name.lower())
                if snapshot is not None:
                    alias = table.args.get("alias") or exp.TableAlias(
                        this=exp.to_identifier(table.name, quoted=True)
                    )
                    table.set("this", exp.to_identifier(snapshot.name, quoted=True))
                    table.set("db", exp.to_identifier(self._schema, quoted=True))
                    table.set("alias", alias)
                    continue
            raise BackendError(
                f"the query names {table.sql(dialect='postgres')!r}, which is not a table of the policy; "
                "only declared tables can be queried"
            )
        return tree

    # -- connections -----------------------------------------------------------------

    def _open_reader(self) -> Connection:
        con = connect(self._dsn, self._policy, "backend.dsn")
        try:
            for statement in _SESSION:
                con.execute(statement)
        except psycopg.Error as exc:
            con.close()
            raise BackendError(f"cannot configure the query connection: {first_line(exc)}") from None
        con.read_only = True
        return con

    def _borrow(self) -> Connection:
        # a small pool rather than one connection per thread: the server's worker threads
        # come and go, and a connection can serve one query at a time
        with self._lock:
            if self._closed:
                raise BackendError("the postgres backend is closed")
            if self._idle:
                return self._idle.pop()
        return self._open_reader()

    def _give_back(self, con: Connection) -> None:
        with self._lock:
            keep = not self._closed and not con.closed and not con.broken and len(self._idle) < _IDLE_LIMIT
            if keep:
                self._idle.append(con)
        if not keep:
            with contextlib.suppress(psycopg.Error):
                con.close()


def _check_role(con: Connection, policy: Policy) -> str:
    """The query role's name, once it is known to be harmless; else PolicyError.

    Checks the session user and every role it may SET ROLE to: a role it can become
    is a role a slipped query could act as (``set_config('role', ...)``).
    """
    attributes = sql.SQL(", ").join(
        sql.SQL("coalesce(string_agg(m.rolname, ', ') FILTER (WHERE m.{}), '')").format(sql.Identifier(a))
        for a in _DANGEROUS_ATTRIBUTES
    )
    query = sql.SQL(
        "SELECT current_user::text, session_user::text, {}, "
        "ARRAY(SELECT g FROM unnest(%s::text[]) AS g "
        "      WHERE to_regrole(g) IS NOT NULL AND pg_has_role(session_user, g, 'MEMBER')) "
        "FROM pg_roles AS m WHERE pg_has_role(session_user, m.oid, 'MEMBER')"
    ).format(attributes)
    try:
        row = con.execute(query, [list(_DANGEROUS_ROLES)]).fetchone()
    except psycopg.Error as exc:
        raise BackendError(f"cannot inspect the query role (backend.dsn): {first_line(exc)}") from None
    assert row is not None
    current, session, *flagged, members = row
    fix = "give backend.dsn a role that may only read the guard's schema"
    for what, roles in zip(_DANGEROUS_ATTRIBUTES.values(), flagged, strict=True):
        if roles:
            via = "" if roles == session else f" (through role {roles})"
            raise PolicyError(f"{policy.path.name}: backend.dsn: the query role {session} {what}{via}; {fix}")
    if members:
        raise PolicyError(
            f"{policy.path.name}: backend.dsn: the query role {session} is a member of "
            f"{', '.join(members)}, which reach the server's files or programs; {fix}"
        )
    return str(current)


def _check_read_only(con: Connection, policy: Policy, schema: str, names: list[str]) -> None:
    """PolicyError if the query role (or a role it can become) may change the snapshots."""
    from guard.backends.postgres_snapshot import REGISTRY

    query = (
        "WITH reach AS (SELECT oid FROM pg_roles WHERE pg_has_role(session_user, oid, 'MEMBER')) "
        "SELECT 'create in the database' WHERE EXISTS "
        "  (SELECT 1 FROM reach WHERE has_database_privilege(reach.oid, current_database(), 'CREATE')) "
        "UNION ALL SELECT 'create in schema ' || n.nspname FROM pg_namespace AS n "
        "  WHERE n.nspname = %s AND EXISTS (SELECT 1 FROM reach WHERE reach.oid = n.nspowner "
        "    OR has_schema_privilege(reach.oid, n.oid, 'CREATE')) "
        "UNION ALL SELECT 'write to ' || n.nspname || '.' || c.relname FROM pg_class AS c "
        "  JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "  WHERE n.nspname = %s AND c.relname = ANY(%s) AND EXISTS (SELECT 1 FROM reach "
        "    WHERE reach.oid = c.relowner OR has_table_privilege(reach.oid, c.oid, %s))"
    )
    try:
        found = con.execute(query, [schema, schema, [REGISTRY, *names], _WRITES]).fetchall()
    except psycopg.Error as exc:
        raise BackendError(
            f"cannot inspect the query role's privileges (backend.dsn): {first_line(exc)}"
        ) from None
    if found:
        raise PolicyError(
            f"{policy.path.name}: backend.dsn: the query role may {found[0][0]}; it must only read: "
            "give backend.dsn a read-only role and build the snapshots with backend.owner_dsn"
        )


def _plain(value: Any) -> Any:
    # arrays arrive as Python lists; their numbers are made plain like top-level ones
    if isinstance(value, list):
        return [_plain(v) for v in plain_rows([tuple(value)])[0]]
    return value
