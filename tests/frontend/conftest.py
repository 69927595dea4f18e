from __future__ import annotations

import duckdb
import pytest

from frontend_data import make_connection


@pytest.fixture
def con(tmp_path, monkeypatch):
    """The fixture database; the working directory is where its files are."""
    monkeypatch.chdir(tmp_path)
    connection = make_connection(tmp_path)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def parser_con():
    """A bare connection: parsing needs no tables."""
    connection = duckdb.connect()
    yield connection
    connection.close()
