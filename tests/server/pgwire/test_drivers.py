"""Other clients analysts use: pg8000, pandas through SQLAlchemy, JDBC (when Java and the
driver are at hand)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pg8000.native
import pytest
import sqlalchemy as sa


def test_pg8000_native_query_with_parameters(students: Any) -> None:
    conn = pg8000.native.Connection(
        "alice", host="127.0.0.1", port=students.port, database="statguard", password="alice-demo"
    )
    try:
        rows = conn.run("SELECT major, COUNT(*) FROM students WHERE class >= :year GROUP BY major", year=1978)
        assert rows == [["CS", 5], ["EE", 4]]
        assert [(c["name"], c["type_oid"]) for c in conn.columns] == [("major", 25), ("count", 20)]
        assert conn.run("SELECT AVG(income) FROM students") == [[598000 / 9]]
    finally:
        conn.close()


def test_pandas_read_sql_through_sqlalchemy(serve: Callable[..., Any]) -> None:
    castro = serve("castro")
    engine = sa.create_engine(f"postgresql+psycopg://alice:alice-demo@127.0.0.1:{castro.port}/statguard")
    try:
        frame = pd.read_sql(
            "SELECT municipality, COUNT(*) AS people FROM castro GROUP BY municipality", engine
        )
        inspector = sa.inspect(engine)
        assert inspector.get_table_names() == ["castro"]
        columns = [(c["name"], str(c["type"])) for c in inspector.get_columns("castro")]
    finally:
        engine.dispose()
    assert list(frame.columns) == ["municipality", "people"]
    assert list(frame["municipality"]) == ["M1", "M2", "M3"] and frame["people"].sum() == 346
    assert columns == [("municipality", "TEXT"), ("profession", "TEXT"), ("salary", "BIGINT")]
    # read_sql first asks the catalog whether the text is a table name: only the query reaches the guard
    assert [entry["decision"] for entry in castro.guard.log()] == ["answered"]


JDBC_JAR = Path.home() / ".m2/repository/org/postgresql/postgresql/42.7.13/postgresql-42.7.13.jar"
JDBC_PROGRAM = """
import java.sql.*;
public class Probe {
  public static void main(String[] a) throws Exception {
    String url = "jdbc:postgresql://127.0.0.1:" + a[0] + "/statguard";
    try (Connection c = DriverManager.getConnection(url, "alice", "alice-demo")) {
      DatabaseMetaData md = c.getMetaData();
      try (ResultSet rs = md.getTables(null, null, "%", new String[]{"TABLE"})) {
        while (rs.next()) {
          System.out.println("TABLE " + rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
        }
      }
      try (ResultSet rs = md.getColumns(null, null, "students", "%")) {
        while (rs.next()) {
          System.out.println("COLUMN " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
        }
      }
      String sql = "SELECT major, COUNT(*) FROM students WHERE sex = ? GROUP BY major";
      try (PreparedStatement ps = c.prepareStatement(sql)) {
        ps.setString(1, "Male");
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) System.out.println("ROW " + rs.getString(1) + " " + rs.getLong(2));
        }
      }
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("java") is None or not JDBC_JAR.exists(), reason="no java or pgjdbc jar")
def test_jdbc_metadata_and_prepared_statement(serve: Callable[..., Any], tmp_path: Path) -> None:
    students = serve("students")  # a fresh history: no earlier answer to be audited against
    source = tmp_path / "Probe.java"
    source.write_text(JDBC_PROGRAM)
    done = subprocess.run(
        ["java", "-cp", str(JDBC_JAR), str(source), str(students.port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "TABLE public.students",
        "COLUMN sex text",
        "COLUMN major text",
        "COLUMN class int8",
        "COLUMN income int8",
        "ROW CS 3",
        "ROW EE 3",
    ]
