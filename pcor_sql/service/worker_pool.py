"""Where the service's requests run: a fixed set of Sessions, each on its own DuckDB cursor
(DESIGN.md §8 "Concurrency").

One DuckDB connection serves one query at a time, so two requests sharing it would fail each
other ("connection is busy") — after one of them was charged. Here each worker Session reads
through its own cursor of the owner's connection (a cursor is a connection to the same
database: queries on different cursors run in parallel), and every Session shares the owner's
one Ledger, whose charges are serialised by DuckDB's transactions (a conflicting charge is
retried from a fresh snapshot, so the ledger never overspends). A request runs in a worker
thread, blocking code and all; at most `size` run at once (an anyio CapacityLimiter), so a
thread that enters always finds a free Session: a request waits for its turn, it never fails
because another is running. A Spark session is thread-safe: its workers share it.

Each worker Session keeps its own caches (schemas, summaries), so the first request that needs
a summary builds it once per worker.

Search processes (`processes=True`, what `pcor-sql serve` runs on Linux over DuckDB; DESIGN.md
§10): each worker Session also owns a long-lived child process that runs its requests'
searches (`engine.search_processes`), the summaries shared with it through memory-mapped
files (`engine.shared_summary`). The thread keeps the rest of the request and waits on a pipe
while the child searches, so N requests search on N cores and HTTP never waits on a search's
GIL. The children are started by `start_processes` (the service's start) and ended by `close`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
from typing import Any, Callable, TypeVar

import anyio
import anyio.to_thread
import duckdb

from pcor_sql.session import Session

_T = TypeVar("_T")
LOG = logging.getLogger("pcor_sql.service")


def _log_warning(message: str) -> None:
    LOG.warning("%s", message)


class WorkerPool:
    """`size` Sessions over `owner`'s data, lent to one worker thread at a time."""

    def __init__(self, owner: Any, size: int):
        if type(size) is not int or size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self._shared: Any = None
        self._searches: list[Any] = []
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._free: queue.SimpleQueue[Session] = queue.SimpleQueue()
        registry = owner.session.registry
        for _ in range(size):
            con = owner.con
            if isinstance(con, duckdb.DuckDBPyConnection):
                con = con.cursor()
                self._cursors.append(con)
            self._free.put(Session(con, ledger=owner.ledger, warn=_log_warning, registry=registry))
        # One limiter per event loop (an app served by one uvicorn has one; a test client may make several).
        self._limiters: dict[int, anyio.CapacityLimiter] = {}

    async def run(self, work: Callable[[Session], _T]) -> _T:
        """`work(session)` in a worker thread with a Session of its own; waits for a free one."""
        loop = id(asyncio.get_running_loop())
        limiter = self._limiters.get(loop)
        if limiter is None:
            limiter = self._limiters[loop] = anyio.CapacityLimiter(self.size)
        return await anyio.to_thread.run_sync(self._lend, work, limiter=limiter)

    def load(self) -> tuple[int, int]:
        """(requests running, requests waiting for a Session) now, over every event loop."""
        stats = [limiter.statistics() for limiter in list(self._limiters.values())]
        return sum(s.borrowed_tokens for s in stats), sum(s.tasks_waiting for s in stats)

    def _lend(self, work: Callable[[Session], _T]) -> _T:
        session = self._free.get()  # the limiter lets in at most `size` threads: one is free
        try:
            return work(session)
        finally:
            self._free.put(session)

    def sessions(self) -> list[Session]:
        """Every Session, for work done before serving (nothing else holds one then)."""
        held = [self._free.get() for _ in range(self.size)]
        for session in held:
            self._free.put(session)
        return held

    def start_processes(self) -> None:
        """A search process for every Session (started now: fresh interpreters, see `engine.search_processes`)."""
        from pcor_sql.engine.search_processes import SearchProcess
        from pcor_sql.engine.shared_summary import SharedSummaries

        if self._shared is not None:
            return
        # Here first: on a machine that has not compiled the checks yet, this process compiles
        # them once into numba's cache and the children load them, rather than each child
        # compiling everything at once (minutes on a small machine).
        from pcor_sql.service.search_child import warm_kernels

        warm_kernels()
        self._shared = SharedSummaries()
        for session in self.sessions():
            session.searches = SearchProcess(self._shared, entry="pcor_sql.service.search_child")
            session.searches.start()
            self._searches.append(session.searches)

    def share_summaries(self) -> None:
        """Maps every summary a Session holds into its search process (after warming). A child
        that cannot start (its interpreter fails to import the package, say) leaves its worker
        searching in its thread, with a warning in the service's log, rather than no service."""
        for session in self.sessions():
            if session.searches is None:
                continue
            try:
                session.searches.warm(session.cached_summaries())
            except Exception as exc:  # WorkerLost, or an OSError starting the interpreter
                LOG.warning("a search process could not start (%s); this worker searches in its thread", exc)
                session.searches.close(kill=True)
                self._searches.remove(session.searches)
                session.searches = None

    def status(self) -> dict[str, Any]:
        """What the owner's listener shows (GET /v1/owner/workers): requests running and waiting,
        and each search process — its pid, whether it is alive, how many times a child was
        started for it (1 + replacements) and how many records it was handed."""
        running, waiting = self.load()
        searches = [{"pid": p.pid, "alive": p.alive, "started": p.started, "searched": p.searched}
                    for p in self._searches]
        return {"workers": self.size, "searches_in": "processes" if searches else "threads", "running": running,
                "waiting": waiting, "search_processes": searches, "duckdb_threads": self._duckdb_threads()}

    def _duckdb_threads(self) -> int | None:
        """DuckDB's `threads` setting now (None over Spark)."""
        if not self._cursors:
            return None
        from pcor_sql.engine.build_threads import duckdb_threads

        with self._cursors[0].cursor() as cur:  # a cursor of its own: the workers' are in use
            return duckdb_threads(cur)

    def search_pids(self) -> list[int]:
        """The search processes' pids (the tests read them)."""
        return [p.pid for p in self._searches if p.pid is not None]

    def close(self) -> None:
        """Ends the search processes (a search still running is killed: the service stopped it)
        and closes the cursors; Sessions still lent out are not waited for."""
        for process in self._searches:
            process.close(kill=True)
        self._searches.clear()
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        for cursor in self._cursors:
            cursor.close()
        self._cursors.clear()
