"""Hostile statements: what an attacker would try through the guard's SQL front door.

Files and table functions (read_csv, glob, paths and URLs), statements that change the
engine (ATTACH, COPY, PRAGMA, INSTALL, LOAD, SET, CALL, CREATE, DROP, ...), system
catalogs (information_schema, pg_catalog, duckdb_*()), several statements in one
request, and SQL injection in literals, identifiers, comments and parameter values.
"""

from __future__ import annotations

from hypothesis import strategies as st

from benchmarks.fuzz.grammar import Draw, Fuzzed, below, draw_valid, one_in, pick, sql_string
from benchmarks.fuzz.schema import Schema

__all__ = ["CATALOGS", "ENGINE_COMMANDS", "FILES", "INJECTIONS", "hostile"]

FILES = (
    "read_csv('examples/students/students.csv')",
    "read_csv_auto('/etc/passwd')",
    "read_parquet('state/students/snapshot.parquet')",
    "read_json('/proc/self/environ')",
    "read_text('/etc/hostname')",
    "read_blob('state/students/secret.key')",
    "glob('*')",
    "'examples/students/students.csv'",
    "'/etc/passwd'",
    '"https://example.org/a.csv"',
    "'s3://bucket/x.parquet'",
    "sqlite_scan('x.db', 't')",
    "postgres_scan('host=127.0.0.1', 'public', 't')",
    "range(10)",
    "generate_series(1, 3)",
    "unnest([1, 2])",
    "query('SELECT * FROM students')",
    "query_table('students')",
)

ENGINE_COMMANDS = (
    "ATTACH 'x.db' AS x",
    "ATTACH ':memory:' AS m; SELECT COUNT(*) FROM m.t",
    "DETACH students",
    "USE memory",
    "COPY students TO '/tmp/students.csv'",
    "COPY (SELECT * FROM students) TO '/tmp/x.parquet' (FORMAT parquet)",
    "COPY students FROM '/tmp/students.csv'",
    "COPY students TO STDOUT",
    "COPY students TO PROGRAM 'id'",
    "EXPORT DATABASE '/tmp/dump'",
    "IMPORT DATABASE '/tmp/dump'",
    "PRAGMA database_list",
    "PRAGMA table_info('students')",
    "PRAGMA enable_profiling",
    "INSTALL httpfs",
    "FORCE INSTALL httpfs FROM 'http://127.0.0.1/'",
    "LOAD httpfs",
    "LOAD '/tmp/evil.duckdb_extension'",
    "SET enable_external_access = true",
    "SET memory_limit = '1TB'",
    "SET threads = 1000",
    "SET ROLE postgres",
    "SET SESSION AUTHORIZATION postgres",
    "RESET ALL",
    "SET search_path = pg_catalog",
    "CALL pragma_version()",
    "CREATE TABLE t AS SELECT * FROM students",
    "CREATE TEMP VIEW v AS SELECT * FROM students",
    "CREATE MACRO leak() AS TABLE SELECT * FROM students",
    "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')",
    "DROP TABLE students",
    "ALTER TABLE students RENAME TO s",
    "DELETE FROM students",
    "UPDATE students SET income = 0",
    "INSERT INTO students VALUES ('Zed', 'Male', 'EE', 1980, 1)",
    "TRUNCATE students",
    "CHECKPOINT",
    "VACUUM",
    "DESCRIBE students",
    "SUMMARIZE students",
    "SHOW TABLES",
    "SHOW ALL",
    "EXPLAIN SELECT * FROM students",
    "EXPLAIN ANALYZE SELECT COUNT(*) FROM students",
    "PREPARE q AS SELECT * FROM students",
    "EXECUTE q",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "LISTEN x",
    "NOTIFY x, 'y'",
    "DO $$ BEGIN END $$",
    "SELECT pg_sleep(0.01)",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT getenv('HOME')",
    "SELECT current_setting('max_memory')",
    "SELECT version()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_extensions()",
    ".read /etc/passwd",
    "\\copy students to 'x'",
)

CATALOGS = (
    "information_schema.tables",
    "information_schema.columns",
    '"information_schema"."columns"',
    "pg_catalog.pg_class",
    "pg_catalog.pg_attribute",
    "pg_catalog.pg_stats",
    "pg_catalog.pg_statistic",
    "pg_catalog.pg_roles",
    "pg_catalog.pg_authid",
    "pg_catalog.pg_shadow",
    "pg_settings",
    "pg_stat_activity",
    "sqlite_master",
    "duckdb_columns()",
    "duckdb_tables()",
    "duckdb_settings()",
    "duckdb_databases()",
    "duckdb_temporary_files()",
    "pragma_table_info('students')",
    "pragma_storage_info('students')",
    "main.students",
    "memory.main.students",
    "system.main.duckdb_tables",
    "temp.main.students",
)

#: text that tries to end a literal or identifier early
INJECTIONS = (
    "EE' OR '1'='1",
    "EE' OR 1=1 --",
    "EE'; DROP TABLE students; --",
    "EE' UNION SELECT name FROM students --",
    "EE' AND (SELECT income FROM students WHERE name = 'Baker') > 0 --",
    "EE'||(SELECT name FROM students LIMIT 1)||'",
    "EE\\' OR 1=1 --",
    "EE\\",
    "EE'/*",
    "EE$$ OR 1=1 --",
    "EE\x00' OR '1'='1",
    "EE\u02bc OR \u02bc1\u02bc=\u02bc1",
    "EE\uff07 OR 1=1 --",
    "'",
    "''",
    "%' OR name LIKE '%",
)


@st.composite
def injection(draw: Draw, sch: Schema) -> Fuzzed:
    """Injection attempts in a literal (escaped or not), an identifier, or a parameter."""
    dim = pick(draw, list(sch.dimensions))
    payload = pick(draw, INJECTIONS)
    t = sch.table
    form = draw(below(6))
    if form == 0:  # spliced raw, as a careless client would
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} = '{payload}'", None, "hostile")
    if form == 1:  # escaped properly: must stay one literal
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} = {sql_string(payload)}", None, "hostile")
    if form == 2:  # bound as a parameter: must stay one value
        return Fuzzed(f"SELECT COUNT(*) FROM {t} WHERE {dim} = $1", (payload,), "hostile")
    if form == 3:
        return Fuzzed(f'SELECT COUNT("{payload}") FROM {t}', None, "hostile")
    if form == 4:
        return Fuzzed(f"SELECT COUNT(*) FROM {t} -- {payload}\nWHERE {dim} = 'EE'", None, "hostile")
    return Fuzzed(
        f"SELECT {dim}, COUNT(*) FROM {t} WHERE {dim} IN ('{payload}') GROUP BY {dim}", None, "hostile"
    )


@st.composite
def files(draw: Draw, sch: Schema) -> Fuzzed:
    source = pick(draw, FILES)
    form = draw(below(4))
    measure = next(iter(sch.measures))
    if form == 0:
        return Fuzzed(f"SELECT COUNT(*) FROM {source}", None, "hostile")
    if form == 1:
        return Fuzzed(f"SELECT * FROM {source}", None, "hostile")
    if form == 2:
        return Fuzzed(
            f"WITH {sch.table} AS (SELECT * FROM {source}) SELECT COUNT(*) FROM {sch.table}", None, "hostile"
        )
    return Fuzzed(f"SELECT SUM({measure}) FROM {sch.table} JOIN {source} ON true", None, "hostile")


@st.composite
def catalogs(draw: Draw, sch: Schema) -> Fuzzed:
    relation = pick(draw, CATALOGS)
    form = pick(draw, ["SELECT COUNT(*) FROM {}", "SELECT * FROM {}", "SELECT * FROM {} LIMIT 5"])
    return Fuzzed(form.format(relation), None, "hostile")


@st.composite
def commands(draw: Draw, sch: Schema) -> Fuzzed:
    return Fuzzed(pick(draw, ENGINE_COMMANDS), None, "hostile")


@st.composite
def several(draw: Draw, sch: Schema) -> Fuzzed:
    """Two or three statements in one request: a valid one and something else."""
    first = draw_valid(draw, sch)
    choices = [*ENGINE_COMMANDS[:12], f"SELECT * FROM {sch.table}", "SELECT 1", ""]
    others = [pick(draw, choices) for _ in range(1 + draw(below(2)))]
    separator = pick(draw, [";", "; ", ";\n", ";;", "; -- x\n"])
    parts = [first.sql.rstrip(";"), *others]
    if one_in(draw, 2):
        parts.reverse()
    return Fuzzed(separator.join(parts), first.parameters, "hostile")


def hostile(sch: Schema) -> st.SearchStrategy[Fuzzed]:
    """One of the hostile forms above, about equally often."""
    return st.one_of(injection(sch), files(sch), catalogs(sch), commands(sch), several(sch))
