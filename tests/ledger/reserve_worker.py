"""A process of the reservation tests (tests/ledger/test_reservation.py, test_analysts.py).

Usage:
  python reserve_worker.py hold DB UNIT EPSILON
      reserve EPSILON on UNIT (DB: a file, or a postgresql:// URL), print "reserved <release id>", then sleep until killed (the
      parent kills it with SIGKILL between the reservation and its outcome).
  python reserve_worker.py race DB UNIT EPSILON ANALYST ATTEMPTS GO_FILE
      wait at the start line for GO_FILE (tests/start_line.py), then ATTEMPTS times: open the file, reserve EPSILON for ANALYST,
      record 'answered', close; print one JSON line {"charged": n, "refused": m}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import BudgetExceeded
from pcor_sql.ledger.charge_rules import ChargeItem
from pcor_sql.ledger.database_file import connect_with_retry
from pcor_sql.ledger.records import new_release_id
from pcor_sql.ledger.store import Ledger
from tests.start_line import arrive_and_wait


def hold(db: str, unit: str, epsilon: float) -> None:
    if db.startswith("postgresql://"):  # a server ledger (its lease renewed while this sleeps)
        from pcor_sql.ledger.postgres_store import PostgresStore

        ledger = Ledger(store=PostgresStore(db))
    else:
        ledger = Ledger(connect_with_retry(db))
    item = ChargeItem(new_release_id(), OcdpCost(epsilon), "test/hold")
    ledger.reserve(unit, [item])
    print(f"reserved {item.release_id}", flush=True)
    while True:
        time.sleep(1)


def race(db: str, unit: str, epsilon: float, analyst: str, attempts: int, go: Path) -> dict:
    arrive_and_wait(go)
    charged = refused = 0
    for _ in range(attempts):
        con = connect_with_retry(db, timeout=20)
        try:
            item = ChargeItem(new_release_id(), OcdpCost(epsilon), "test/race", role="analyst", dataset="people")
            Ledger(con).reserve(unit, [item], analyst=analyst).answered()
            charged += 1
        except BudgetExceeded:
            refused += 1
        finally:
            con.close()
    return {"charged": charged, "refused": refused}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "hold":
        hold(args[0], args[1], float(args[2]))
    elif mode == "race":
        print(json.dumps(race(args[0], args[1], float(args[2]), args[3], int(args[4]), Path(args[5]))))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
