"""One process of the spelling race (tests/test_owner_concurrency.py).

Usage: python spelling_worker.py DB SPELLING ATTEMPTS GO_FILE

Waits at the start line for GO_FILE (tests/start_line.py), then ATTEMPTS times opens the database file, releases record 42 through
SPELLING (a FROM clause) at ε = 0.1 and closes it. Prints one JSON line: charged, refused.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pcor_sql
from pcor_sql.ledger.database_file import connect_with_retry
from tests.start_line import arrive_and_wait


def main(db: str, spelling: str, attempts: int, go: Path) -> dict:
    arrive_and_wait(go)
    charged = refused = 0
    warnings.simplefilter("ignore", pcor_sql.PrivacyWarning)
    for _ in range(attempts):
        con = connect_with_retry(db, timeout=30.0)
        try:
            pcor_sql.explain_outlier(con, f"SELECT pay FROM {spelling} WHERE id = 42", epsilon=0.1,
                                     verifier="grubbs", by="dept")
            charged += 1
        except pcor_sql.BudgetExceeded:
            refused += 1
        finally:
            con.close()
    return {"charged": charged, "refused": refused}


if __name__ == "__main__":
    path, spelled, count, go_file = sys.argv[1:5]
    print(json.dumps(main(path, spelled, int(count), Path(go_file))))
