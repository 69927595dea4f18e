"""One DuckDB instance per file per process (DESIGN.md §9), on real files: a hard link, a
symlink or another spelling of a file this process holds opens the held instance — it sees the
holder's writes, and closing it keeps the file locked against other processes — or, in the other
access mode, is refused with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import pytest

from pcor_sql.errors import UserError
from pcor_sql.ledger.database_file import connect_with_retry

#: Another process tries to open the file read-write at once (no waiting): prints "opened" or "locked".
OTHER_PROCESS = (
    "import sys, duckdb\n"
    "try:\n    duckdb.connect(sys.argv[1]).close(); print('opened')\n"
    "except duckdb.IOException as e:\n    print('locked' if 'lock' in str(e).lower() else e)\n")


def other_process_opens(path) -> str:
    return subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(path)], capture_output=True, text=True,
                          timeout=120).stdout.strip()


@pytest.fixture
def held(tmp_path):
    path = tmp_path / "data.duckdb"
    duckdb.connect(str(path)).close()
    (tmp_path / "hard.duckdb").hardlink_to(path)
    (tmp_path / "soft.duckdb").symlink_to(path)
    con = connect_with_retry(path)
    yield con, tmp_path
    con.close()


@pytest.mark.parametrize("spelling", ["hard.duckdb", "soft.duckdb", "./data.duckdb", "sub/../data.duckdb"])
def test_another_path_to_a_held_file_is_the_held_instance(held, spelling):
    con, folder = held
    (folder / "sub").mkdir(exist_ok=True)
    con.execute("CREATE TABLE spent AS SELECT 1.5 AS epsilon")
    again = connect_with_retry(os.path.join(folder, spelling))
    assert again.execute("SELECT epsilon FROM spent").fetchall() == [(1.5,)]  # not a stale copy
    again.execute("INSERT INTO spent VALUES (2.5)")
    again.close()
    assert con.execute("SELECT sum(epsilon) FROM spent").fetchall() == [(4.0,)]  # its write is not lost
    assert other_process_opens(folder / "data.duckdb") == "locked"  # closing it kept the process's lock


def test_the_other_access_mode_of_a_held_file_is_one_line(held):
    _, folder = held
    with pytest.raises(UserError) as caught:
        connect_with_retry(folder / "hard.duckdb", read_only=True)
    assert "holds that file read-write" in caught.value.problem and "one DuckDB instance" in caught.value.fix


def test_a_file_no_longer_held_opens_afresh(tmp_path):
    path = tmp_path / "data.duckdb"
    first = connect_with_retry(path)
    first.execute("CREATE TABLE t AS SELECT 1 AS x")
    first.close()
    (tmp_path / "hard.duckdb").hardlink_to(path)
    ro = connect_with_retry(tmp_path / "hard.duckdb", read_only=True)  # nothing holds it: any mode
    assert ro.execute("SELECT x FROM t").fetchall() == [(1,)]
    ro.close()
