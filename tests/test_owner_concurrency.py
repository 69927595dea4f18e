"""Racing on one unit through different spellings never overspends: a thread per spelling on
one connection, and two processes on one database file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import duckdb
import pytest

import pcor_sql
from test_owner import make_table
from tests.start_line import start_together

SPELLINGS = ["t", "main.t", "memory.main.t", "v", "vv", "(SELECT * FROM t)", "t AS s", "(SELECT * FROM v)",
             # the public ids, with pay read from t in the select list: t pays
             "(SELECT p.id, p.dept, (SELECT pay FROM t AS x WHERE x.id = p.id) AS pay FROM pubn AS p)"]
WORKER = Path(__file__).with_name("spelling_worker.py")


def test_a_thread_per_spelling_shares_one_limit():
    con = duckdb.connect()
    make_table(con)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pcor_sql.PrivacyWarning)
        owner = pcor_sql.Owner(con)
    owner.set_limit("t", 1.0)
    owner.mark_public("pubn")
    outcomes: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(SPELLINGS))

    def work(spelling: str) -> None:
        cursor = con.cursor()  # one connection per thread, one database and ledger
        try:
            session = pcor_sql.Session(cursor, ledger=owner.ledger)
            start.wait()
            for _ in range(3):
                try:
                    pcor_sql.explain_outlier(None, f"SELECT pay FROM {spelling} WHERE id = 42", session=session,
                                             epsilon=0.1, verifier="grubbs", by="dept")
                    outcomes.append("charged")
                except pcor_sql.BudgetExceeded:
                    outcomes.append("refused")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            cursor.close()

    threads = [threading.Thread(target=work, args=(s,)) for s in SPELLINGS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert outcomes.count("charged") == 10 and outcomes.count("refused") == 3 * len(SPELLINGS) - 10
    assert owner.spent("t") == pytest.approx(1.0)


def test_two_processes_with_two_spellings_share_one_limit(tmp_path):
    path = tmp_path / "race.duckdb"
    con = duckdb.connect(str(path))
    make_table(con)
    pcor_sql.Owner(con).set_limit("t", 0.5)
    con.close()
    go = tmp_path / "go"
    env = dict(os.environ)
    package_root = str(Path(pcor_sql.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    workers = [
        subprocess.Popen([sys.executable, str(WORKER), str(path), spelling, "5", str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for spelling in ("t", "(SELECT * FROM main.v)")
    ]
    start_together(go, len(workers))
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["charged"] for r in reports) == 5 and sum(r["refused"] for r in reports) == 5
    reader = duckdb.connect(str(path), read_only=True)
    assert pcor_sql.Owner(reader).spent("t") == pytest.approx(0.5)
    reader.close()
