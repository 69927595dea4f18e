"""`python -m benchmarks service --workers 1,2`: how the service scales with its workers (DESIGN.md §10 "Using every core").

One DuckDB file (the `people` table of `service_load`, `rows` rows, LOF-friendly planted
outliers ids 0–15) and `clients` analysts with quotas that never run out. For each setting
of `--workers` (and each `--searches` mode asked for), alternating, `repeats` times: start
`pcor-sql serve --workers W` (its search processes load their compiled kernels before it
answers), send a warm-up burst (the timed burst's requests, not timed: each worker's search
process meets the burst's keys once, as in a service already serving them), then `requests` LOF explain
requests (one planted key each, ε = 0.1, BFS with `samples` per step: 50 is light, the search a
third of a request; 500 makes the search most of it) from `clients` threads at once, and stop it. Reported
per setting: answered per second (the median run), p50/p95 latency over every timed request,
and the ratio of answered per second to the first setting's. The reference, measured in the
same run: the same explain through the in-process analyst handle, one at a time.
"""

from __future__ import annotations

import itertools
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.service_load import ATTRIBUTES, PLANTED, RELEASABLE, TABLE, generation_sql, percentile

EPSILON = 0.1
VERIFIER = "lof"


def prepare(rows: int, clients: int, workdir: Path, report: Callable[[str], None]) -> tuple[Path, list[str]]:
    import duckdb

    import pcor_sql

    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / f"scaling-{rows}.duckdb"
    for stale in (db, Path(f"{db}.wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    try:
        for statement in generation_sql(rows):
            con.execute(statement)
        owner = pcor_sql.Owner(con, warn=lambda m: None)
        owner.register(TABLE, TABLE, key="id", metric="salary", by=[a for a, _ in ATTRIBUTES],
                       releasable=list(RELEASABLE))
        tokens = [owner.add_analyst(f"client{i}", quota=1e6) for i in range(clients)]
    finally:
        con.close()
    report(f"generated {rows:,} rows in {db}")
    return db, tokens


def reference(db: Path, count: int, samples: int = 50) -> list[float]:
    """The same explain in-process (Owner.analyst()), one at a time, after one untimed."""
    import duckdb

    import pcor_sql

    con = duckdb.connect(str(db))
    try:
        handle = pcor_sql.Owner(con, warn=lambda m: None).analyst()
        out = []
        for j in range(count + 1):
            started = time.perf_counter()
            handle.explain_outliers(TABLE, [j % PLANTED], epsilon=EPSILON, verifier=VERIFIER, samples=samples)
            if j:
                out.append(time.perf_counter() - started)
        return out
    finally:
        con.close()


def _ask(url: str, token: str, offset: int, count: int, samples: int, ready: Callable[[], Any]
         ) -> tuple[list[float], int, float]:
    """One analyst: connect, wait for the others (`ready`), then `count` explains back to back.
    Returns the latencies, how many were answered, and the CPU seconds of this process spent
    meanwhile (the whole process: with threads, every client's)."""
    import pcor_sql
    from pcor_sql.errors import PcorError

    latencies, answered = [], 0
    with pcor_sql.connect(url, token, timeout=600) as handle:
        ready()
        cpu = time.process_time()
        for j in range(count):
            started = time.perf_counter()
            try:
                handle.explain_outliers(TABLE, [(offset + j) % PLANTED], epsilon=EPSILON, verifier=VERIFIER,
                                        samples=samples)
                answered += 1
            except PcorError:
                pass
            latencies.append(time.perf_counter() - started)
        return latencies, answered, time.process_time() - cpu


def _ask_http(url: str, token: str, offset: int, count: int, samples: int, ready: Callable[[], Any]
              ) -> tuple[list[float], int, float]:
    """`_ask` with the standard library's `http.client` on one kept-alive connection instead of
    the analyst client (httpx): the same request bodies, a third of the client's CPU, so less of
    the cores the service shares with its load generator goes to the generator."""
    import http.client
    import json
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    con = http.client.HTTPConnection(where.hostname, where.port, timeout=600)
    con.connect()
    con.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies, answered = [], 0
    try:
        ready()
        cpu = time.process_time()
        for j in range(count):
            started = time.perf_counter()
            body = {"dataset": TABLE, "keys": [(offset + j) % PLANTED], "epsilon": EPSILON, "verifier": VERIFIER,
                    "samples": samples}
            con.request("POST", "/v1/explain", body=json.dumps(body), headers=headers)
            response = con.getresponse()
            payload = json.loads(response.read())
            answered += response.status == 200 and "results" in payload
            latencies.append(time.perf_counter() - started)
        return latencies, answered, time.process_time() - cpu
    finally:
        con.close()


def _client_process(url: str, token: str, offset: int, count: int, samples: int, barrier: Any, out: Any) -> None:
    out.put(_ask(url, token, offset, count, samples, lambda: barrier.wait(timeout=120)))


def burst(url: str, tokens: list[str], requests: int, samples: int = 50, clients_as: str = "threads"
          ) -> tuple[list[float], int, float, float]:
    """`requests` explains from len(tokens) analysts at once, each a thread of this process, a
    process of its own, or a thread on `http.client` (`clients_as`: threads, processes, http):
    latencies, answered, wall seconds, and the clients' CPU
    seconds. The clock starts when every client is connected: making an httpx client (its TLS
    context) costs ~20 ms of CPU, eight of them ~10% of a light burst's wall time, and no request."""
    per = [requests // len(tokens) + (1 if i < requests % len(tokens) else 0) for i in range(len(tokens))]
    if clients_as == "processes":
        import multiprocessing

        # spawn: a fork of this process would copy its DuckDB threads' state; an analyst is a fresh interpreter.
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(len(tokens) + 1), ctx.Queue()
        procs = [ctx.Process(target=_client_process, args=(url, t, i, per[i], samples, barrier, out))
                 for i, t in enumerate(tokens)]
        for p in procs:
            p.start()
        barrier.wait(timeout=120)
        started = time.perf_counter()
        results = [out.get(timeout=600) for _ in procs]
        wall = time.perf_counter() - started
        for p in procs:
            p.join(timeout=60)
        return ([x for r in results for x in r[0]], sum(r[1] for r in results), wall, sum(r[2] for r in results))
    found: list[tuple[list[float], int, float]] = []
    barrier = threading.Barrier(len(tokens) + 1)
    ask = _ask_http if clients_as == "http" else _ask
    threads = [threading.Thread(target=lambda i=i, t=t: found.append(ask(url, t, i, per[i], samples, barrier.wait)))
               for i, t in enumerate(tokens)]
    for t in threads:
        t.start()
    barrier.wait(timeout=120)
    started, cpu = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    return [x for r in found for x in r[0]], sum(r[1] for r in found), time.perf_counter() - started, \
        time.process_time() - cpu


def cpu_split(server: int) -> dict[str, float]:
    """CPU seconds so far of the service's process and of its search processes (its children).
    Linux (/proc); zeros elsewhere. A search process replaced during a run would be missed (none is)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def seconds(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rpartition(")")[2].split()
            return (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, ValueError, IndexError):
            return 0.0

    children: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{server}/task"):
            with open(f"/proc/{server}/task/{tid}/children", encoding="ascii") as fh:
                children.extend(int(p) for p in fh.read().split())
    except OSError:
        pass
    return {"server": seconds(server), "searches": sum(seconds(c) for c in children)}


def run_scaling(rows: int, settings: list[int], modes: list[str], clients: int, requests: int, repeats: int,
                workdir: Path, report: Callable[[str], None], samples: int = 50,
                clients_as: str = "threads", duckdb_threads: Sequence[str] = ("auto",), in_flight: int = 1
                ) -> dict[str, Any]:
    from benchmarks.measure import load_average, machine
    from benchmarks.service_process import served

    import datetime as _dt

    wall = time.perf_counter()
    db, tokens = prepare(rows, clients, workdir, report)
    result: dict[str, Any] = {"started": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                              "machine": machine(), "rows": rows, "clients": clients, "requests": requests,
                              "repeats": repeats, "settings": settings, "modes": modes, "samples": samples,
                              "clients_as": clients_as, "duckdb_threads": list(duckdb_threads), "in_flight": in_flight,
                              "runs": []}
    # Each client's token on `in_flight` senders at once: one analyst's concurrent requests.
    senders = [t for t in tokens for _ in range(in_flight)]
    result["reference"] = reference(db, 8, samples)
    for rep in range(repeats):
        for mode, threads, workers in itertools.product(modes, duckdb_threads, settings):
            load = (load_average() or [float("nan")])[0]
            args = ["--workers", str(workers), "--searches", mode, "--duckdb-threads", threads]
            with served(db, args=args) as service:
                # The warm-up, not timed: the timed burst's own requests (its senders, its keys), so
                # every worker and its search process has run requests in flight together and has
                # searched each key the burst asks about, as in a service that has been serving them.
                # With 2 * W requests from one sender (before), a search process met most of the
                # burst's keys first inside the clock, and with W processes that first meeting was
                # paid W times: 2 workers' first burst was the slowest of a run. Its figures are kept.
                cold = burst(service.url, senders, requests, samples, clients_as)
                before = cpu_split(service.process.pid)
                latencies, answered, wall, clients_cpu = burst(service.url, senders, requests, samples, clients_as)
                cpu = {k: v - before[k] for k, v in cpu_split(service.process.pid).items()}
                cpu["clients"] = clients_cpu
            result["runs"].append({"mode": mode, "workers": workers, "duckdb_threads": threads, "repeat": rep,
                                   "latencies": latencies, "answered": answered, "wall_s": wall, "load": load,
                                   "cpu_s": cpu, "warm_up": {"answered": cold[1], "wall_s": cold[2]}})
            report(f"{mode} --workers {workers} --duckdb-threads {threads}: {answered} answered in {wall:.2f} s"
                   f" (load {load:.1f})")
    result["reference"] += reference(db, 8, samples)
    result["wall_s"] = time.perf_counter() - wall
    return result


def served_threads(asked: str, workers: int) -> str:
    """`--duckdb-threads` as asked, and what auto comes to here (serve: DuckDB's threads, every
    core, divided among the workers)."""
    return f"auto ({max(1, (os.cpu_count() or 1) // workers)})" if asked == "auto" else asked


def scaling_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    from benchmarks.tables import seconds

    ref = statistics.median(result["reference"])
    rows, base = [], None
    asked = result.get("duckdb_threads")
    # Results saved before a list was asked for: one setting, or none (DuckDB's own).
    settings = [str(asked or "as set")] if not isinstance(asked, list) else asked
    for mode, threads, workers in itertools.product(result["modes"], settings, result["settings"]):
        runs = [r for r in result["runs"] if r["mode"] == mode and r["workers"] == workers
                and str(r.get("duckdb_threads", settings[0])) == threads]
        rate = statistics.median(r["answered"] / r["wall_s"] for r in runs)
        xs = sorted(x for r in runs for x in r["latencies"])
        p50, p95 = percentile(xs, 0.5), percentile(xs, 0.95)
        base = rate if base is None else base
        loads = [r["load"] for r in runs]
        answered = sum(r["answered"] for r in runs) or 1
        cpu = {k: sum(r.get("cpu_s", {}).get(k, 0.0) for r in runs) * 1000 / answered
               for k in ("server", "searches", "clients")}
        rows.append((mode, str(workers), served_threads(threads, workers), f"{rate:.2f}", f"{rate / base:.2f}×",
                     seconds(p50), seconds(p95), f"{p50 / ref:.1f}×",
                     " + ".join(f"{cpu[k]:.1f}" for k in cpu) + f" = {sum(cpu.values()):.1f}",
                     f"{min(loads):.1f}–{max(loads):.1f}"))
    return rows


def scaling_table(result: dict[str, Any]) -> Any:
    from benchmarks.tables import make_table, seconds

    ref = statistics.median(result["reference"])
    return make_table(
        f"Answered per second by --workers, {result['requests']} LOF explain requests (samples = "
        f"{result.get('samples', 50)}) from {result['clients']} clients ({result.get('clients_as', 'threads')}"
        f"{', %d in flight each' % result['in_flight'] if result.get('in_flight', 1) > 1 else ''}) at "
        f"once on {result['rows']:,} rows",
        ("searches", "--workers", "--duckdb-threads", "answered / s (median run)", "vs the first row", "p50", "p95",
         "p50 / in-process",
         "CPU ms / request: server + searches + clients", "load (1 min)"),
        scaling_rows(result), (
            f"Each setting ran {result['repeats']} times, settings alternating; a run starts `pcor-sql serve`, sends "
            "an untimed warm-up burst (the timed burst's own requests: every worker and its search process has met "
            "the burst's keys once), then the timed burst.",
            f"In-process reference: the same explain through Owner.analyst(), one at a time: median {seconds(ref)} "
            f"({len(result['reference'])} requests, half before and half after the service runs).",
            "searches: processes — each worker's searches in a process of its own (the default over DuckDB on "
            "Linux); threads — in the workers' threads (`pcor-sql serve --searches threads`).",
            "CPU per answered request over the timed bursts: the service's process, its search processes, and "
            "the benchmark's clients (threads of one process, or a process each: --clients-as), which share the "
            "machine's cores with the service. On C cores, W workers answer at most C / (that sum) per second.",
            *warm_up_note(result),
        ))


def warm_up_note(result: dict[str, Any]) -> list[str]:
    """The untimed warm-up bursts' answered per second (median run) by --workers, so what the
    clock leaves out stays in sight; none for results saved before the warm-up was a burst."""
    rates = {}
    for workers in result["settings"]:
        runs = [r["warm_up"] for r in result["runs"] if r["workers"] == workers and r.get("warm_up", {}).get("wall_s")]
        if runs:
            rates[workers] = statistics.median(r["answered"] / r["wall_s"] for r in runs)
    if not rates:
        return []
    return ["Warm-up bursts (untimed, each the timed burst's requests on a service just started), answered / s, "
            "median run: " + ", ".join(f"--workers {w}: {x:.2f}" for w, x in rates.items()) + "."]
