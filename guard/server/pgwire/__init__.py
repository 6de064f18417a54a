"""PostgreSQL wire protocol v3 endpoint: analysts connect with psql, JDBC, psycopg,
SQLAlchemy or pandas, authenticate with SCRAM-SHA-256, and get the guard's answers.

Queries go to :meth:`guard.core.Guard.query`; metadata probes (``\\dt``, JDBC
``getTables``, driver start-up queries) are answered from an emulated catalog of the
policy that holds no data (``catalog.py``). See ``server.py`` for the entry points.
"""

from guard.server.pgwire.server import PgServer, running_pg_server

__all__ = ["PgServer", "running_pg_server"]
