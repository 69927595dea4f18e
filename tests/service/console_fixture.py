"""A served ledger for the console and analyst-page tests: a small staff table registered as two
datasets, three analysts, and (optionally) a long synthetic history spread over two weeks —
rows written straight into the ledger's tables, with each unit's spent total kept equal to its
history, so the console has something to chart and page through."""

from __future__ import annotations

import hmac
from typing import Any

import duckdb

import pcor_sql
from pcor_sql.ledger.analysts import add_analyst

OWNER_TOKEN = "owner-token-for-tests-0123456789abcdefghijklmnop"
ROWS = 150
OUTLIERS = (10, 41, 72)
ANALYSTS = ("alice", "bob", "carol")


def check_token(text: str) -> bool:
    return hmac.compare_digest(text.encode(), OWNER_TOKEN.encode())


def make_owner(path: str, *, history: int = 0, seed: int = 7) -> tuple[Any, dict[str, str]]:
    """An Owner on a DuckDB file with datasets `staff` and `payroll`, analysts and their tokens,
    and `history` synthetic history rows (analysts' requests, 14 days back to now)."""
    con = duckdb.connect(path)
    con.execute("CREATE TYPE dept AS ENUM ('a', 'b', 'c'); CREATE TYPE yr AS ENUM ('2020', '2021')")
    outliers = ", ".join(map(str, OUTLIERS))
    con.execute(
        f"CREATE TABLE staff AS SELECT CASE WHEN i IN ({outliers}) THEN 9000.0 - i * 10 ELSE 100.0 + (i * 37 % 11) END"
        f" AS pay, i AS id, (['a', 'b', 'c'])[i % 3 + 1]::dept AS dept, (['2020', '2021'])[i % 2 + 1]::yr AS year"
        f" FROM range({ROWS}) t(i)")
    con.execute("CREATE TABLE payroll AS SELECT * FROM staff")
    owner = pcor_sql.Owner(con, warn=lambda message: None)
    owner.register("staff", "staff", key="id", metric="pay", by="dept,year", limit=40.0, releasable=list(range(ROWS)))
    owner.register("payroll", "payroll", key="id", metric="pay", by="dept", limit=25.0)
    tokens = {"alice": add_analyst(owner.ledger, "alice", quota=20.0, notion="ocdp"),
              "bob": add_analyst(owner.ledger, "bob", quota=30.0),
              "carol": add_analyst(owner.ledger, "carol", datasets=["payroll"])}
    if history:
        synthetic_history(con, owner, history, seed)
    return owner, tokens


def synthetic_history(con: Any, owner: Any, count: int, seed: int) -> None:
    """`count` analysts' requests over the last 14 days, as the service records them (what was
    asked as a statement), in one set-based insert (pseudo-random choices from hash(i)); then
    every budget and quota row set to the sum of its history, as `budget verify` expects."""
    t = owner.ledger.store.tables  # the embedded store's tables, filled in DuckDB's SQL
    unit = "CASE dataset " + " ".join(f"WHEN '{d.name}' THEN '{d.units[0]}'" for d in owner.datasets()) + " END"
    choices = f"""SELECT i, CASE WHEN h % 3 = 0 THEN 'payroll' ELSE 'staff' END AS dataset,
        CASE WHEN h % 3 = 0 THEN (['alice', 'bob', 'carol'])[(h // 3) % 3 + 1]
             ELSE (['alice', 'bob'])[(h // 3) % 2 + 1] END AS analyst,
        (h // 9) % 4 <> 0 AS explain, (h // 36) % 3 AS pick, (h // 108) % {ROWS} AS key,
        (h // 16200) % 100 < 93 AS ok,
        CAST(now() AS TIMESTAMP) - to_microseconds(CAST(1209600e6 * pow(1 - i / {count}, 1.3) AS BIGINT)) AS stamp
        FROM (SELECT i, CAST(hash(i * 7919 + {seed}) // 2 AS BIGINT) AS h FROM range({count}) t(i))"""
    rows = f"""SELECT printf('%032x', i) AS release_id, {unit} AS unit, CASE WHEN explain THEN 'ocdp' ELSE 'sp' END
        AS notion, stamp, CASE WHEN explain THEN 'pcor/bfs/tight' ELSE 'anomaly/sp/k=1' END AS mechanism,
        CASE WHEN explain THEN ([0.05, 0.1, 0.2])[pick + 1] ELSE 0.1 END AS epsilon,
        CASE WHEN explain THEN NULL ELSE 1 END AS k,
        CASE WHEN explain THEN 'key = ' || key ELSE 'value (pay = ' || (9000 - key) || '.0)' END AS record_key,
        CASE WHEN explain THEN printf('EXPLAIN OUTLIER SELECT "pay" FROM %s WHERE "id" IN (%d) BY "dept"%s USING %s'
             || ' WITH (epsilon = %g, search = ''bfs'', samples = 50)', dataset, key,
             CASE WHEN dataset = 'staff' THEN ', "year"' ELSE '' END, (['grubbs(alpha=0.05)', 'lof', 'zscore'])[pick + 1],
             ([0.05, 0.1, 0.2])[pick + 1])
             ELSE printf('IDENTIFY ANOMALY SELECT "pay" FROM %s WITH (beta = 2, radius = 5, epsilon = 0.1,'
             || ' privacy = ''sp'', k = 1)', dataset) END AS statement, dataset, analyst,
        CASE WHEN ok THEN 'answered' ELSE 'failed' END AS outcome, CASE WHEN ok THEN NULL ELSE 'data' END AS reason
        FROM ({choices})"""
    with con.cursor() as cur:
        cur.execute(f"""INSERT INTO {t.history} (release_id, unit, notion, seq, released_at, mechanism, epsilon, k,
            record_key, statement, spent_after, seeded, role, dataset, analyst, outcome, reason, refunded)
            SELECT release_id, unit, notion, row_number() OVER w, stamp, mechanism, epsilon, k, record_key, statement,
            sum(epsilon) OVER w, false, 'analyst', dataset, analyst, outcome, reason, false FROM ({rows})
            WINDOW w AS (PARTITION BY unit, notion ORDER BY stamp, release_id ROWS UNBOUNDED PRECEDING)""")
        cur.execute(f"""INSERT INTO {t.budget} (unit, notion, limit_epsilon, spent_epsilon, releases, created_at,
            updated_at) SELECT unit, notion, NULL, sum(epsilon), count(*), now(), now() FROM {t.history}
            WHERE NOT refunded GROUP BY ALL ON CONFLICT (unit, notion) DO UPDATE
            SET spent_epsilon = excluded.spent_epsilon, releases = excluded.releases""")
        for scope in ("''", "dataset"):
            cur.execute(f"""INSERT INTO {t.quotas} (analyst, notion, dataset, limit_epsilon, spent_epsilon, releases,
                updated_at) SELECT analyst, notion, {scope}, NULL, sum(epsilon), count(*), now() FROM {t.history}
                WHERE NOT refunded AND analyst IS NOT NULL GROUP BY ALL ON CONFLICT (analyst, notion, dataset)
                DO UPDATE SET spent_epsilon = excluded.spent_epsilon, releases = excluded.releases""")
