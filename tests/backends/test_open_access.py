"""Choosing the data access: a DuckDB connection, a SparkSession, or a one-line error naming
what to install — without pyspark installed and without starting Spark."""

from __future__ import annotations

import sys
import types

import duckdb
import pytest

import pcor_sql
from pcor_sql.backends import open_access
from pcor_sql.backends import spark_session
from pcor_sql.backends.duckdb_access import DuckDBAccess
from pcor_sql.backends.spark_session import is_spark_session, require_spark
from pcor_sql.errors import UserError


def test_a_duckdb_connection_is_read_by_duckdb_and_anchors_its_ledger():
    con = duckdb.connect()
    access = open_access(con)
    assert isinstance(access, DuckDBAccess) and access.ledger_con is con and access.parser is con


def test_anything_else_is_refused_naming_both_engines():
    with pytest.raises(UserError, match="DuckDB connection or a SparkSession"):
        pcor_sql.Session("salaries.duckdb")


def test_a_spark_session_is_recognised_without_importing_pyspark():
    fake = type("SparkSession", (), {"__module__": "pyspark.sql.session"})()
    assert is_spark_session(fake) and not is_spark_session(duckdb.connect())


def test_missing_pyspark_names_the_extra_and_java(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # an import of pyspark now fails
    with pytest.raises(UserError) as err:
        require_spark()
    assert "pip install 'pcor-sql[spark]'" in str(err.value) and "Java" in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_java_names_the_extra_and_java(monkeypatch):
    pyspark = types.ModuleType("pyspark")
    sql = types.ModuleType("pyspark.sql")
    sql.SparkSession = object
    monkeypatch.setitem(sys.modules, "pyspark", pyspark)
    monkeypatch.setitem(sys.modules, "pyspark.sql", sql)
    monkeypatch.setattr(spark_session.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(UserError, match="Java runtime") as err:
        require_spark()
    assert "pcor-sql[spark]" in str(err.value)


def test_the_cli_reports_a_missing_spark_in_one_line(monkeypatch):
    from typer.testing import CliRunner

    from pcor_sql.cli.main import app

    monkeypatch.setitem(sys.modules, "pyspark", None)
    result = CliRunner().invoke(app, ["explain-outlier", "SELECT salary FROM t WHERE id = 1", "--engine", "spark"])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "pcor-sql[spark]" in errors[0] and "Java" in errors[0], result.stderr
