"""A host's copy of the data is checked against the registered content fingerprints when its
service starts on a shared PostgreSQL ledger (DESIGN.md §11 "Units across hosts"), with real
`pcor-sql serve` processes and a real PostgreSQL server:

- a copy with one changed row in one dataset's table: that dataset is refused (one line on
  stderr naming it and why), the other is served; to analysts the refused one is unknown;
- a copy where every dataset differs: the service does not start (one line, exit code 2);
- after the owner re-registers from the changed copy (`dataset add --replace`, recorded in the
  fingerprints' history), that copy serves it.
"""

from __future__ import annotations

import subprocess
import sys

import duckdb
import httpx
import pytest

import pcor_sql
from benchmarks.service_process import free_port, start
from benchmarks.shared_ledger import copies, make_data

pytestmark = pytest.mark.slow


def change_one_row(path, table: str) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(f"UPDATE {table} SET pay = pay + 1 WHERE id = 100")
    finally:
        con.close()


@pytest.fixture
def registered(postgres_server, tmp_path):
    url = postgres_server.fresh_url()
    data = tmp_path / "data.duckdb"
    make_data(data, 2000)
    con = duckdb.connect(str(data))
    try:
        con.execute("CREATE TABLE bonus AS SELECT * FROM staff")
        owner = pcor_sql.Owner(con, url, warn=lambda message: None)
        for name in ("staff", "bonus"):
            owner.register(name, name, key="id", metric="pay", by="dept,year", limit=1.0, releasable=list(range(24)))
        token = owner.add_analyst("ann")
    finally:
        con.close()
    return url, data, token


def test_a_copy_with_one_changed_row_is_refused_that_dataset_and_serves_the_other(registered):
    url, data, token = registered
    (copy,) = copies(data, 1)
    change_one_row(copy, "staff")
    service = start(copy, args=["--ledger", url, "--workers", "1"])
    try:
        shown = httpx.get(service.url + "/v1/datasets", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert [d["name"] for d in shown.json()["datasets"]] == ["bonus"]
        asked = httpx.post(service.url + "/v1/explain", headers={"Authorization": f"Bearer {token}"}, timeout=30,
                           json={"dataset": "staff", "keys": [1], "epsilon": 0.1})
        assert asked.status_code == 403 and "no dataset 'staff'" in asked.json()["error"]
    finally:
        service.stop()
    lines = [line for line in service.log().splitlines() if "is not served from this copy" in line]
    assert len(lines) == 1 and "'staff'" in lines[0] and "rows differ" in lines[0], service.log()[-2000:]


def test_a_copy_where_every_dataset_differs_does_not_start_and_re_registering_lets_it(registered):
    url, data, token = registered
    (copy,) = copies(data, 1)
    change_one_row(copy, "staff")
    change_one_row(copy, "bonus")
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "pcor_sql", "serve", "--db", str(copy), "--ledger", url,
                           "--port", str(port), "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no registered dataset can be served from this copy" in errors[0], done.stderr
    assert "Traceback" not in done.stderr

    # The owner's explicit act: re-register from the changed copy; the history keeps both contents.
    for name in ("staff", "bonus"):
        added = subprocess.run([sys.executable, "-m", "pcor_sql", "dataset", "add", name, name, "--key", "id",
                                "--metric", "pay", "--by", "dept,year", "--releasable-keys", ",".join(map(str, range(24))),
                                "--replace", "--db", str(copy), "--ledger", url], capture_output=True, text=True,
                               timeout=300)
        assert added.returncode == 0, added.stdout + added.stderr
    from pcor_sql.ledger import fingerprints
    from pcor_sql.ledger.postgres_store import PostgresStore
    from pcor_sql.ledger.store import Ledger

    ledger = Ledger(store=PostgresStore(url))
    try:
        assert [e.note for e in fingerprints.history(ledger, "staff")] == ["registered", "re-registered: content changed"]
    finally:
        ledger.close()
    service = start(copy, args=["--ledger", url, "--workers", "1"])
    try:
        shown = httpx.get(service.url + "/v1/datasets", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert sorted(d["name"] for d in shown.json()["datasets"]) == ["bonus", "staff"]
    finally:
        service.stop()
