"""`python -m benchmarks ledger-services`: what sharing a PostgreSQL ledger costs (DESIGN.md §11).

Measured in one run, on one machine (so every ratio is against a reference of the same run):

- answered requests per second of `clients` analysts (threads of this process, each with its
  own token and kept-alive connection) sending `requests` light explain requests each (one
  releasable key, ε = 0.01, no limit reached) to
  1. one `pcor-sql serve` on the embedded ledger (the data file's own) — the reference;
  2. one `pcor-sql serve --ledger postgresql://…` on a copy of that file;
  3. two such services, each on its own copy, the clients split between them;
- the reservation's latency (`Ledger.reserve` of one item, its outcome recorded after, untimed),
  p50 and p99 over `reservations` in a row, on the embedded store (a DuckDB ledger file) and on
  PostgreSQL;
- the content fingerprint's time on `fingerprint_rows` rows (`engine.content_fingerprint`),
  what each service pays per dataset at start on a shared ledger.

Every service, the clients and PostgreSQL share this machine's cores: on a machine of 2 cores,
two services cannot answer more than one — the figure then says what the second costs, not what
a second host would add.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import httpx

from benchmarks.service_process import ServedProcess
from benchmarks.shared_ledger import DATASET, copies, make_data, register, serve_all

EPSILON = 0.01


@dataclass(frozen=True)
class Throughput:
    setting: str
    answered: int
    other: dict[int, int]
    seconds: float

    @property
    def per_second(self) -> float:
        return self.answered / self.seconds if self.seconds > 0 else 0.0


def load(services: Sequence[ServedProcess], tokens: dict[str, str], requests: int, setting: str) -> Throughput:
    """Each analyst (a thread) sends one untimed warm-up request, then, once all are ready,
    `requests` timed ones to its service (analysts dealt round the services)."""
    names = sorted(tokens)
    ready = threading.Barrier(len(names) + 1)
    codes: list[list[int]] = [[] for _ in names]

    def analyst(i: int) -> None:
        url = services[i % len(services)].url
        with httpx.Client(timeout=300, headers={"Authorization": f"Bearer {tokens[names[i]]}"}) as client:
            body = {"dataset": DATASET, "keys": [i % 24], "epsilon": EPSILON}
            client.post(url + "/v1/explain", json=body)
            ready.wait()
            for j in range(requests):
                body["keys"] = [(i + j) % 24]
                codes[i].append(client.post(url + "/v1/explain", json=body).status_code)

    threads = [threading.Thread(target=analyst, args=(i,), daemon=True) for i in range(len(names))]
    for t in threads:
        t.start()
    ready.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    flat = [c for cs in codes for c in cs]
    other: dict[int, int] = {}
    for code in flat:
        if code != 200:
            other[code] = other.get(code, 0) + 1
    return Throughput(setting, flat.count(200), other, seconds)


def reservation_latency(ledger: Any, count: int) -> tuple[float, float]:
    """(p50, p99) in milliseconds of `count` one-item reservations in a row on `ledger`."""
    from pcor_sql.core.accounting import OcdpCost
    from pcor_sql.ledger.charge_rules import ChargeItem
    from pcor_sql.ledger.records import new_release_id

    took = []
    for i in range(count):
        item = ChargeItem(new_release_id(), OcdpCost(EPSILON), "pcor/bfs/tight", f"id = {i}")
        started = time.perf_counter()
        reservation = ledger.reserve("main.bench", [item])
        took.append((time.perf_counter() - started) * 1000)
        reservation.answered()
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(0.99 * len(took)))]


def fingerprint_seconds(rows: int) -> float:
    import duckdb

    from pcor_sql.engine.content_fingerprint import content_fingerprint

    con = duckdb.connect()
    try:
        con.execute(f"CREATE TABLE big AS SELECT i AS id, (i % 7)::VARCHAR AS dept, i % 3 AS year, i * 0.5 AS pay"
                    f" FROM range({rows}) s(i)")
        started = time.perf_counter()
        content_fingerprint(con, "big")
        return time.perf_counter() - started
    finally:
        con.close()


def run(workdir: Path, urls: Any, *, rows: int, clients: int, requests: int, workers: int, reservations: int,
        fingerprint_rows: int, say: Any = print) -> dict[str, Any]:
    """The whole measurement (see the module docstring); `urls()` gives a fresh PostgreSQL database's URL."""
    import duckdb

    from pcor_sql.ledger.postgres_store import PostgresStore
    from pcor_sql.ledger.store import Ledger

    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"throughput": [], "reservation_ms": {}}
    embedded, shared = workdir / "embedded.duckdb", workdir / "shared.duckdb"
    for path in workdir.glob("*.duckdb*"):
        path.unlink()
    for path in (embedded, shared):
        make_data(path, rows)
    url = urls()
    settings = [("one service, embedded ledger", [embedded], register(embedded, None, analysts=clients, limit=None)),
                ("one service, PostgreSQL ledger", None, register(shared, url, analysts=clients, limit=None))]
    hosts = copies(shared, 2)
    settings[1] = (settings[1][0], hosts[:1], settings[1][2])
    settings.append(("two services, one PostgreSQL ledger", hosts, settings[1][2]))
    for name, files, tokens in settings:
        say(f"{name}: starting {len(files)} service(s)")
        services = serve_all(files, None if files[0] == embedded else url, workers=workers)
        try:
            found = load(services, tokens, requests, name)
        finally:
            for service in services:
                service.stop()
        say(f"{name}: {found.answered} answered in {found.seconds:.1f} s = {found.per_second:.1f}/s"
            + (f" (other statuses: {found.other})" if found.other else ""))
        out["throughput"].append(found)

    con = duckdb.connect(str(workdir / "reserve.duckdb"))
    try:
        local = Ledger(con)
        out["reservation_ms"]["embedded (DuckDB)"] = reservation_latency(local, reservations)
    finally:
        con.close()
    remote = Ledger(store=PostgresStore(urls()))
    try:
        out["reservation_ms"]["PostgreSQL"] = reservation_latency(remote, reservations)
    finally:
        remote.close()
    if fingerprint_rows:
        out["fingerprint_s"] = (fingerprint_rows, fingerprint_seconds(fingerprint_rows))
    return out


def report(found: dict[str, Any]) -> list[str]:
    """The figures and their ratios as lines of text."""
    rows = found["throughput"]
    reference = rows[0].per_second
    lines = ["answered/s (light explain, one key):"]
    for r in rows:
        ratio = r.per_second / reference if reference else float("nan")
        lines.append(f"  {r.setting:<38} {r.per_second:8.1f}/s   ×{ratio:.2f} of the embedded ledger's")
    if len(rows) == 3 and rows[1].per_second:
        lines.append(f"  two services / one (both on PostgreSQL): ×{rows[2].per_second / rows[1].per_second:.2f}")
    lines.append("reservation (one item, in-process) latency:")
    stores = found["reservation_ms"]
    for store, (p50, p99) in stores.items():
        lines.append(f"  {store:<20} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")
    if len(stores) == 2:
        (a50, a99), (b50, b99) = stores.values()
        lines.append(f"  PostgreSQL / embedded: p50 ×{b50 / a50:.2f}, p99 ×{b99 / a99:.2f}")
    if "fingerprint_s" in found:
        n, seconds = found["fingerprint_s"]
        lines.append(f"content fingerprint of {n:,} rows: {seconds:.2f} s")
    return lines
