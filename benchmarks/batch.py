"""The batch benchmark (DESIGN.md §10 "Seeded batches"): `explain_outliers` of many records with `workers=1, 2, ...`,
each run in a fresh Python process, with its wall time and the peak memory of that process and
its worker processes together, and the CPU seconds of all of them (on a loaded machine the
ratio of times cannot show a speed-up no core is free for; the CPU seconds still show whether
handing searches to workers added work: (CPU at N − CPU at 1) / records is the cost per record).

Memory. A worker forked after the summary is built shares its pages with the owning process, so
the sum of the processes' RSS counts every shared page once per process: it overstates what the
machine holds. PSS (proportional set size, /proc/PID/smaps_rollup) charges a page shared by k
processes 1/k to each, so the sum of PSS is the memory in use. Both are sampled every 250 ms
(the kernel keeps no peak PSS) and the largest sums are reported, beside the owning process's
own VmHWM. Reading smaps_rollup walks a process's page tables: 1.6 ms of kernel CPU for the
owning process at 1M rows, so sampling three processes every 20 ms (as this did before) took
about a fifth of a core, which the workers then lacked — on 2 cores, a tenth of the speed-up.
Every 250 ms it is ~2% of a core; the peak is the summary held through the searches, a plateau
that lasts the batch. The sampler's own CPU seconds are saved (`sampler_cpu_s`).

The table is the scale benchmark's `base` shape (1,200 cells, `benchmarks/scale_tables.py`);
the records are the rows furthest above their cell's mean (`benchmarks.scale.other_records`),
contextual outliers like the planted one. Every release: BFS + LOF, ε = 0.2, n = 50, seeded
(the same outputs for every worker count: the run checks it), on a fresh Session, so the
per-cell summary is built inside the timing, once, before the searches.

    python -m benchmarks batch --help
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any


class MemorySampler:
    """The largest sums of RSS and of PSS over this process and its children, sampled."""

    def __init__(self, every_s: float = 0.25):
        self.every_s, self.peak_rss, self.peak_pss, self.cpu_s = every_s, 0, 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        self.sample()  # the start: a batch shorter than a period still has a sample of its own
        while not self._stop.wait(self.every_s):
            self.sample()
        self.cpu_s = time.thread_time()

    def sample(self) -> None:
        rss = pss = 0
        for pid in [os.getpid(), *_children()]:
            fields = _rollup(pid)
            rss += fields.get("Rss", 0)
            pss += fields.get("Pss", 0)
        self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)


def _children() -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                out.extend(int(p) for p in fh.read().split())
    except OSError:
        pass
    return out


def _rollup(pid: int) -> dict[str, int]:
    """Rss and Pss of `pid` in bytes (empty when it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                if name in ("Rss", "Pss"):
                    out[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return out


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the workers, joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(path: str, records: int, workers: int, seed: int) -> dict[str, Any]:
    """One batch of `records` releases with `workers` processes on a fresh Session (in this
    process: run it in a fresh one, `main`)."""
    import pcor_sql
    from benchmarks.measure import peak_rss_bytes
    from benchmarks.scale import other_records
    from benchmarks.scale_measure import connect_table, load_now, warm_imports
    from benchmarks.scale_tables import TABLE

    warnings.simplefilter("ignore")  # the seeded run's PrivacyWarning
    warm_imports()
    con = connect_table(path)
    ids = other_records(con, records)
    query = f"SELECT v FROM {TABLE} WHERE id IN ({', '.join(map(str, ids))})"
    session = pcor_sql.Session(con, allow_seeded=True)
    load = load_now()
    with MemorySampler() as memory:
        cpu, started = _cpu_s(), time.perf_counter()
        results = pcor_sql.explain_outliers(None, query, session=session, search="bfs", verifier="lof", epsilon=0.2,
                                            samples=50, seed=seed, workers=workers, max_records=records)
        wall, cpu = time.perf_counter() - started, _cpu_s() - cpu
    request = pcor_sql.outlier_request(con, f"SELECT v FROM {TABLE} WHERE id = {ids[0]}", verifier="lof")
    summary = session.prepare(request).summary  # cached: no rebuild
    out = {
        "rows": int(con.execute(f"SELECT count(*) FROM {TABLE}").fetchall()[0][0]),
        "records": len(results), "workers": workers, "wall_s": wall, "cpu_s": cpu, "load": load,
        "summary_build_s": summary.build_seconds,
        "released": sum(1 for r in results if r.released),
        "outputs": [r.predicate if r.released else r.reason for r in results],
        "peak_rss_sum_bytes": memory.peak_rss, "peak_pss_sum_bytes": memory.peak_pss,
        "owner_vmhwm_bytes": peak_rss_bytes(), "sampler_cpu_s": memory.cpu_s,
    }
    con.close()
    return out


def run_batch(rows: list[int], records: list[int], workers: list[int], seed: int, workdir: Path,
              report: Any = lambda _m: None) -> dict[str, Any]:
    """Every (rows, records, workers) case, each in its own process, workers in the given order
    right after each other so that each ratio compares runs under the same load."""
    from benchmarks.measure import load_average, machine
    from benchmarks.scale_tables import ensure_table

    result: dict[str, Any] = {"machine": machine(), "load": {"start": load_average()}, "cases": []}
    for n_rows in rows:
        path = ensure_table(workdir, "base", n_rows, report)["path"]
        for n in records:
            for w in workers:
                report(f"{n_rows:,} rows, {n} records, workers={w}")
                result["cases"].append(_child(path, n, w, seed, workdir))
    result["load"]["end"] = load_average()
    return result


def _child(path: str, records: int, workers: int, seed: int, workdir: Path) -> dict[str, Any]:
    import benchmarks
    import pcor_sql

    out = workdir / f"batch-{records}-{workers}.json"
    roots = dict.fromkeys(str(Path(m.__file__).resolve().parents[1]) for m in (benchmarks, pcor_sql))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*roots, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    args = [sys.executable, "-m", "benchmarks.batch", path, "--records", str(records), "--workers", str(workers),
            "--seed", str(seed), "--out", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=6 * 3600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"records": records, "workers": workers, "error": tail[0]}
    return json.loads(out.read_text())


def table(result: dict[str, Any]) -> list[str]:
    """The cases as Markdown rows, each ratio against workers=1 of the same rows and records."""
    lines = ["| rows | records | workers | batch (s) | vs 1 worker | CPU (s) | summary build (s) | released | "
             "peak PSS sum | peak RSS sum | load |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    base: dict[tuple[int, int], dict[str, Any]] = {}
    for case in result["cases"]:
        if "error" in case:
            lines.append(f"| | {case['records']} | {case['workers']} | error: {case['error']} | | | | | | | |")
            continue
        key = (case["rows"], case["records"])
        if case["workers"] == 1:
            base[key] = case
        one = base.get(key)
        ratio = f"{one['wall_s'] / case['wall_s']:.2f}×" if one else "—"
        same = "" if one is None or one["outputs"] == case["outputs"] else " (OUTPUTS DIFFER)"
        cpu = f"{case['cpu_s']:.2f}" if "cpu_s" in case else "—"
        lines.append(f"| {case['rows']:,} | {case['records']} | {case['workers']} | {case['wall_s']:.2f} | {ratio}{same} "
                     f"| {cpu} | {case['summary_build_s']:.2f} | {case['released']} | {_mib(case['peak_pss_sum_bytes'])} "
                     f"| {_mib(case['peak_rss_sum_bytes'])} | {case['load']} |")
    return lines


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    """The child: one case, written as JSON to --out."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch")
    parser.add_argument("path")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    Path(args.out).write_text(json.dumps(measure(args.path, args.records, args.workers, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
