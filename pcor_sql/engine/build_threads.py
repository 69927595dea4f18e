"""How many threads the per-cell summary build uses, and blocks of work run in them (DESIGN.md
§10 "Building the summary": it uses every core; `python -m benchmarks summary-threads` measures it).

The build follows the connection's DuckDB `threads` setting, so an owner who limits DuckDB
(`SET threads = 2`) limits the build too, and DuckDB's default (every core) uses every core.
The work runs in Python threads over compiled kernels that release the GIL (`core.run_kernels`)
and numpy/Arrow calls that do: no numba threading layer, so a build may run in any thread
(the service's) and a process forked after it (the search pool's workers) inherits no
thread pool.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence, TypeVar

import duckdb
import numpy as np

T = TypeVar("T")


def duckdb_threads(con: duckdb.DuckDBPyConnection | None) -> int:
    """The connection's `threads` setting (1 without a connection or a readable setting)."""
    if con is None:
        return 1
    try:
        return max(1, int(con.execute("SELECT system.main.current_setting('threads')").fetchall()[0][0]))
    except (duckdb.Error, TypeError, ValueError, IndexError):
        return 1


def in_threads(fn: Callable[[Any], T], jobs: Sequence[Any], threads: int) -> list[T]:
    """[fn(job) for job in jobs], in up to `threads` threads; results in the jobs' order."""
    workers = min(threads, len(jobs))
    if workers <= 1:
        return [fn(job) for job in jobs]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, jobs))


def even_blocks(cumulative: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Up to `parts` contiguous, non-empty ranges [a, b) of items 0..n − 1 with about equal
    weight, where `cumulative` (n + 1 entries, from 0) is the running total of the weights."""
    n = len(cumulative) - 1
    if n <= 0:
        return []
    edges = np.searchsorted(cumulative, np.linspace(0, cumulative[-1], max(1, parts) + 1)).tolist()
    edges[0], edges[-1] = 0, n
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


class ServingThreads:
    """DuckDB's `threads` while a service serves: `serving` (few: a light request's statements
    read a few rows each, and a pool woken for each costs more CPU than it saves once the
    service's workers keep every core busy: `python -m benchmarks service --duckdb-threads`),
    raised to `building` while any summary is built (`building()`, around `Session.summary`),
    so a summary rebuilt while serving still uses every core (DESIGN.md §10). The setting is
    global to the database: builds are counted, and the first raises it, the last lowers it."""

    def __init__(self, con: duckdb.DuckDBPyConnection, serving: int, building: int):
        self.serving, self.building_threads = serving, max(serving, building)
        self._con = con
        self._lock = threading.Lock()
        self._builds = 0
        self._set(serving)

    def _set(self, threads: int) -> None:
        with self._con.cursor() as cur:  # a cursor of its own: the caller's may be in use
            cur.execute(f"SET threads = {int(threads)}")

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        with self._lock:
            self._builds += 1
            if self._builds == 1 and self.building_threads > self.serving:
                self._set(self.building_threads)
        try:
            yield
        finally:
            with self._lock:
                self._builds -= 1
                if self._builds == 0 and self.building_threads > self.serving:
                    self._set(self.serving)
