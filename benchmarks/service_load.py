"""`python -m benchmarks service`: many analysts at once on one `pcor-sql serve` (DESIGN.md §8 "Concurrency").

A DuckDB file holds a generated table (`people`: `rows` rows, three ENUM attributes of 8, 5
and 4 values, a normal `salary` with 16 planted outliers, ids 0–15) registered as dataset
`people` with releasable keys 0–31, an OCDP limit on the table, and `analysts` analysts, each
with a quota for every notion (explain requests ask about the planted outliers). The service runs in a child process (`pcor-sql serve --db`, on
127.0.0.1); each analyst is a thread of this process with its own `pcor_sql.connect` client,
and all of them start at once. Each sends `requests` requests in turn: explain (Grubbs, one
releasable key), identify under SP, explain, identify under DP, ... — each at ε = `epsilon`,
so the quotas and the table's OCDP limit run out during the run and the rest is refused
(429) — what the run checks is that they are never exceeded.

The reference, measured in the same run before the service starts and again after it stopped
(the machine's load may change): the same request mix through the in-process analyst handle
(`Owner.analyst()`), one at a time, on the same file.

Checked, and reported as the verdicts of the run (a failed check fails the command):
- no 5xx and no connection error;
- no analyst's spent exceeds their quota, no unit's spent exceeds its limit;
- each analyst's spent (GET /v1/me) equals the sum of ε in their history (GET /v1/history),
  per notion, and every 200 has an answered history row;
- the owner's `verify_ledger()` (totals against history) finds nothing once the service stopped.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

TABLE = "people"
RELEASABLE = tuple(range(32))
PLANTED = 16
ATTRIBUTES = (("dept", 8), ("region", 5), ("year", 4))
TOLERANCE = 1e-9


@dataclass(frozen=True)
class LoadConfig:
    rows: int = 1_000_000
    analysts: int = 8
    requests: int = 50
    workers: int = 4
    epsilon: float = 0.1
    quota: float = 2.0
    unit_limit: float = 14.0
    reference: int = 12
    seed: int = 1
    workdir: Path = Path("/tmp/pcor-service-bench")


def generation_sql(rows: int) -> list[str]:
    """The table: hash-spread ENUM cells and a Box–Muller normal salary (mean 100, sd 15);
    ids below PLANTED get 400 + id, far above every cell."""
    out = []
    for name, size in ATTRIBUTES:
        labels = ", ".join(f"'{name[0]}{j}'" for j in range(size))
        out.append(f"CREATE TYPE {name}_t AS ENUM ({labels})")
    cells = ", ".join(f"enum_range(NULL::{name}_t)[(hash(range + {i}) % {size})::INTEGER + 1]::{name}_t AS {name}"
                      for i, (name, size) in enumerate(ATTRIBUTES))
    out.append(
        f"CREATE TABLE {TABLE} AS SELECT range AS id, {cells}, CASE WHEN range < {PLANTED} THEN 400.0 + range "
        f"ELSE 100 + 15 * sqrt(-2 * ln((hash(range * 2 + 1) % 4294967295 + 1) / 4294967297.0)) "
        f"* cos(2 * pi() * (hash(range * 2 + 2) % 4294967296) / 4294967296.0) END AS salary "
        f"FROM range({int(rows)})")
    return out


def request_plan(cfg: LoadConfig, analyst: int) -> list[dict[str, Any]]:
    """Analyst `analyst`'s requests, in order (seeded: which key, which point — the client's
    choices, not the mechanisms' coins)."""
    rng = random.Random(cfg.seed * 1009 + analyst)
    plan = []
    for j in range(cfg.requests):
        if j % 2 == 0:
            plan.append({"kind": "explain", "notion": "ocdp", "key": rng.choice(RELEASABLE[:PLANTED])})
        else:
            privacy = "sp" if j % 4 == 1 else "dp"
            plan.append({"kind": "identify", "notion": privacy, "privacy": privacy,
                         "value": {"salary": round(rng.uniform(40.0, 500.0), 2)}})
    return plan


def send(handle: Any, item: dict[str, Any], epsilon: float) -> Any:
    """One request of the plan on a remote (`pcor_sql.connect`) or in-process analyst handle."""
    if item["kind"] == "explain":
        return handle.explain_outliers(TABLE, [item["key"]], epsilon=epsilon, verifier="grubbs")
    identify = getattr(handle, "identify_value", None) or handle.identify_anomaly
    return identify(TABLE, item["value"], beta=5, radius=10.0, epsilon=epsilon, privacy=item["privacy"])


def prepare(cfg: LoadConfig, report: Callable[[str], None]) -> tuple[Path, dict[str, str], dict[str, Any]]:
    """The database file, the analysts' tokens and the reference timings."""
    import duckdb

    import pcor_sql

    cfg.workdir.mkdir(parents=True, exist_ok=True)
    db = cfg.workdir / f"service-{cfg.rows}.duckdb"
    for stale in (db, Path(f"{db}.wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    try:
        started = time.perf_counter()
        for statement in generation_sql(cfg.rows):
            con.execute(statement)
        generation_s = time.perf_counter() - started
        report(f"generated {cfg.rows:,} rows in {generation_s:.1f} s")
        owner = pcor_sql.Owner(con)
        owner.register(TABLE, TABLE, key="id", metric="salary", by=[a for a, _ in ATTRIBUTES],
                       releasable=list(RELEASABLE))
        reference = time_reference(owner, cfg, "before")
        report(f"reference: {len(reference)} in-process requests")
        # The limits come after the reference (which spent on the table) so the run gets them whole.
        for notion in ("ocdp", "dp", "sp"):
            spent = owner.spent(TABLE, notion)
            limit = cfg.unit_limit if notion == "ocdp" else 1000.0
            owner.set_limit(TABLE, spent + limit, notion)
        tokens = {f"analyst{i}": owner.add_analyst(f"analyst{i}", quota=cfg.quota) for i in range(cfg.analysts)}
        units = {s.unit: {"notion": s.notion, "spent": s.spent, "limit": s.limit} for s in owner.status(TABLE)}
    finally:
        con.close()
    return db, tokens, {"generation_s": generation_s, "reference": reference, "units_before": units}


def time_reference(owner: Any, cfg: LoadConfig, when: str) -> list[dict[str, Any]]:
    """The reference: the request mix through the in-process analyst handle, one at a time."""
    handle = owner.analyst()
    out = []
    for item in request_plan(cfg, -1 if when == "before" else -2)[: cfg.reference]:
        started = time.perf_counter()
        send(handle, item, cfg.epsilon)
        out.append({"kind": item["kind"], "seconds": time.perf_counter() - started, "when": when})
    return out


def run_load(url: str, tokens: dict[str, str], cfg: LoadConfig) -> tuple[list[dict[str, Any]], float]:
    """Every analyst's plan at once; each request's kind, status and latency, and the wall time."""
    import pcor_sql
    from pcor_sql.errors import PcorError

    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(tokens))

    def analyst(index: int, name: str, token: str) -> None:
        mine = []
        with pcor_sql.connect(url, token, timeout=600) as handle:
            plan = request_plan(cfg, index)
            barrier.wait()
            for item in plan:
                started = time.perf_counter()
                try:
                    send(handle, item, cfg.epsilon)
                    status: Any = 200
                except PcorError as exc:
                    status = getattr(exc, "status_code", "connection")
                except Exception as exc:  # reported, and fails the run's checks
                    status = f"exception {type(exc).__name__}"
                mine.append({"analyst": name, "kind": item["kind"], "notion": item["notion"], "status": status,
                             "seconds": time.perf_counter() - started})
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=analyst, args=(i, n, t), name=n) for i, (n, t) in enumerate(tokens.items())]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records, time.perf_counter() - started


def analyst_checks(url: str, tokens: dict[str, str], records: list[dict[str, Any]]) -> dict[str, Any]:
    """What each analyst can see of themselves, against what they were answered."""
    import pcor_sql

    out = {}
    for name, token in tokens.items():
        with pcor_sql.connect(url, token) as handle:
            me, history = handle.me(), handle.history()
        usage = {u["notion"]: u for u in me["usage"] if u.get("dataset") is None}
        answered = {n: sum(1 for r in records if r["analyst"] == name and r["notion"] == n and r["status"] == 200)
                    for n in usage}
        out[name] = {
            n: {"limit": u["limit"], "spent": u["spent"],
                "history_sum": sum(h["epsilon"] for h in history if h["notion"] == n),
                "answered_responses": answered[n],
                "answered_rows": sum(1 for h in history if h["notion"] == n and h["outcome"] == "answered"),
                "outcomes": sorted({h["outcome"] for h in history if h["notion"] == n})}
            for n, u in usage.items()
        }
    return out


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's checks (see the module docstring): name, what was measured, passed or not."""
    records = result["records"]
    bad_status = [r["status"] for r in records if r["status"] != 200 and not (isinstance(r["status"], int)
                                                                               and 400 <= r["status"] < 500)]
    per = [(a, n, x) for a, notions in result["analysts"].items() for n, x in notions.items()]
    over_quota = [(a, n) for a, n, x in per if x["limit"] is not None and x["spent"] > x["limit"] * (1 + TOLERANCE)]
    mismatch = [(a, n) for a, n, x in per if abs(x["spent"] - x["history_sum"]) > TOLERANCE * max(1.0, x["spent"])]
    unshown = [(a, n) for a, n, x in per if x["answered_responses"] > x["answered_rows"]]
    units = result["units_after"]
    over_limit = [u for u, s in units.items() if s["limit"] is not None and s["spent"] > s["limit"] * (1 + TOLERANCE)]
    return [
        {"check": "no 5xx, no connection error", "measured": f"{len(bad_status)} such responses", "met": not bad_status},
        {"check": "no analyst past their quota", "measured": f"{len(over_quota)} of {len(per)} (analyst, notion)",
         "met": not over_quota},
        {"check": "no unit past its limit", "measured": f"{len(over_limit)} of {len(units)} (unit, notion)",
         "met": not over_limit},
        {"check": "spent = sum of the history, per analyst and notion",
         "measured": f"{len(mismatch)} of {len(per)} differ", "met": not mismatch},
        {"check": "every 200 has an answered history row", "measured": f"{len(unshown)} of {len(per)} short",
         "met": not unshown},
        {"check": "owner's verify_ledger after the run", "measured": f"{len(result['verify'])} differences",
         "met": not result["verify"]},
    ]


def run_service(cfg: LoadConfig, report: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    import datetime as _dt

    import duckdb

    import pcor_sql
    from benchmarks.measure import load_average, machine
    from benchmarks.service_process import served

    result: dict[str, Any] = {
        "started": _dt.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": machine(),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "load": {"start": load_average()},
    }
    wall = time.perf_counter()
    db, tokens, prepared = prepare(cfg, report)
    result.update(prepared)
    report(f"serving {db.name} with --workers {cfg.workers}; {cfg.analysts} analysts × {cfg.requests} requests")
    with served(db, args=["--workers", str(cfg.workers)]) as service:
        records, load_s = run_load(service.url, tokens, cfg)
        report(f"{len(records)} requests in {load_s:.1f} s")
        result["analysts"] = analyst_checks(service.url, tokens, records)
    con = duckdb.connect(str(db))
    try:
        owner = pcor_sql.Owner(con)
        result["verify"] = [str(d) for d in owner.verify_ledger()]
        result["units_after"] = {f"{s.unit} ({s.notion})": {"spent": s.spent, "limit": s.limit}
                                 for s in owner.status(TABLE)}
        # The reference again, now that the load is over (the machine's state may have changed).
        for notion in ("ocdp", "dp", "sp"):
            owner.set_limit(TABLE, owner.spent(TABLE, notion) + 1000.0, notion)
        result["reference"] = result["reference"] + time_reference(owner, cfg, "after")
        report(f"reference again after the load: {cfg.reference} in-process requests")
    finally:
        con.close()
    result.update(records=records, load_s=load_s, wall_s=time.perf_counter() - wall)
    result["load"]["end"] = load_average()
    result["verdicts"] = verdicts(result)
    return result


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0 < q < 1) by linear interpolation between order statistics."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]
