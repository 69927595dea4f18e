"""One of the processes of the two-process ledger test (tests/ledger/test_ledger.py).

Usage: python ledger_worker.py DB DATASET TAG ATTEMPTS EPSILON GO_FILE WORK_SECONDS MODE

Waits at the start line for GO_FILE (tests/start_line.py: both processes start together), then ATTEMPTS times does what a
release does, opening and closing the database file each time. MODE "check": open, check that
the charge fits (`Ledger.check_fit`, the analyst service's early refusal), close (the "expensive
work" happens here: a sleep of WORK_SECONDS, while the other process may charge), open again,
charge (`reserve`, then `answered`, as the pipeline does), close. MODE "direct": the same without
the check, so the reservation's own check is all that stands between the two processes and an
overspent budget.
Prints one JSON line: how many charges went through, how many were refused, and how long the
opens waited for the other process's lock.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.core.accounting import OcdpCost
from pcor_sql.ledger.store import ChargeItem, Ledger
from pcor_sql.errors import BudgetExceeded
from tests.start_line import arrive_and_wait


def main(
    db: str, dataset: str, tag: str, attempts: int, epsilon: float, go_file: Path, work: float, mode: str
) -> dict:
    if mode not in ("check", "direct"):
        raise SystemExit(f"unknown mode {mode!r}")
    arrive_and_wait(go_file)
    charged = refused = 0
    open_waits: list[float] = []

    def open_db():
        started = time.monotonic()
        con = connect_with_retry(db, timeout=10.0)
        open_waits.append(time.monotonic() - started)
        return con

    for attempt in range(attempts):
        item = ChargeItem(f"{tag}-{attempt}", OcdpCost(epsilon), "test", record_key=tag)
        if mode == "check":
            con = open_db()
            try:
                Ledger(con).check_fit(dataset, [item])
            except BudgetExceeded:
                refused += 1
                continue
            finally:
                con.close()
        time.sleep(work)
        con = open_db()
        try:
            Ledger(con).reserve(dataset, [item]).answered()
            charged += 1
        except BudgetExceeded:
            refused += 1
        finally:
            con.close()
    return {
        "charged": charged,
        "refused": refused,
        "opens": len(open_waits),
        "open_wait_total": sum(open_waits),
        "open_wait_max": max(open_waits),
    }


if __name__ == "__main__":
    path, name, label, count, eps, go, seconds, how = sys.argv[1:9]
    print(json.dumps(main(path, name, label, int(count), float(eps), Path(go), float(seconds), how)))
