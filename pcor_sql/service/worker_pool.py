"""Where the service's requests run: a fixed set of Sessions, each on its own DuckDB cursor
(DESIGN.md §8 "Concurrency").

One DuckDB connection serves one query at a time, so two requests sharing it would fail each
other ("connection is busy") — after one of them was charged. Here each worker Session reads
through its own cursor of the owner's connection (a cursor is a connection to the same
database: queries on different cursors run in parallel), and every Session shares the owner's
one Ledger, whose charges are serialised by DuckDB's transactions (a conflicting charge is
retried from a fresh snapshot, so the ledger never overspends). Each Session has a thread of its
own, which takes requests from the line, blocking code and all: a request waits for its turn, it
never fails because another is running.

The line is one line per asker (an analyst's name), served in turn: a free thread takes the
oldest request of the next asker that has one waiting, then that asker goes to the back. So one
analyst's concurrent requests use every free worker (nobody else waiting, nothing is held back),
and a request of another analyst waits for no more than the first running request to end, however
many one analyst sent before it (DESIGN.md §8: only waiting in line, no channel between analysts;
each request's work is capped, so that wait is bounded). Within one asker, first come, first served. A thread that finishes a request
takes the next waiting one at once, without a round through the event loop (which, busy with
other requests' HTTP or waiting for the interpreter, would leave that core idle between two
requests: `python -m benchmarks service`). A request cancelled while it waits never runs; one
cancelled while it runs is waited for (it is charged and recorded) and then ends cancelled. A
Spark session is thread-safe: its workers share it.

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
import collections
import contextvars
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import anyio
import duckdb

from pcor_sql.core.work import Stopping
from pcor_sql.session import Session

if TYPE_CHECKING:
    from pcor_sql.owner import Owner

_T = TypeVar("_T")
LOG = logging.getLogger("pcor_sql.service")


def _log_warning(message: str) -> None:
    LOG.warning("%s", message)


def _answer(job: _Job, outcome: tuple[bool, Any]) -> None:
    try:
        job.loop.call_soon_threadsafe(_settle, job.future, outcome)
    except RuntimeError:  # the loop closed meanwhile: nobody waits for the answer
        pass


def _settle(future: "asyncio.Future[Any]", outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    if outcome[0]:
        future.set_result(outcome[1])
    else:
        future.set_exception(outcome[1])


class _Job:
    """One request in the line: the work, where its answer goes, and whether a thread took it."""

    __slots__ = ("work", "context", "loop", "future", "state", "asker")

    def __init__(self, work: Callable[[Session], Any], loop: asyncio.AbstractEventLoop, asker: str):
        self.work, self.context, self.loop, self.asker = work, contextvars.copy_context(), loop, asker
        self.future: asyncio.Future[Any] = loop.create_future()
        self.state = "waiting"  # then "running", or "dropped" (cancelled while waiting)


class WorkerPool:
    """`size` Sessions over `owner`'s data, each used by one thread of its own."""

    def __init__(self, owner: Owner, size: int):
        if type(size) is not int or size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self._shared: Any = None
        self._searches: list[Any] = []
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._sessions: list[Session] = []
        registry = owner.session.registry
        for _ in range(size):
            con = owner.con
            if isinstance(con, duckdb.DuckDBPyConnection):
                con = con.cursor()
                self._cursors.append(con)
            self._sessions.append(Session(con, ledger=owner.ledger, warn=_log_warning, registry=registry))
        #: Each asker's waiting requests, oldest first, and the askers with one waiting, in turn.
        self._lines: dict[str, collections.deque[_Job]] = {}
        self._turns: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._running = self._waiting = 0
        self._threads: list[threading.Thread] = []
        self._closed = False

    async def run(self, work: Callable[[Session], _T], asker: str = "") -> _T:
        """`work(session)` in a worker thread with a Session of its own; waits for a free one, in
        `asker`'s line (askers are served in turn)."""
        job = _Job(work, asyncio.get_running_loop(), asker)
        with self._lock:
            if self._closed:
                raise Stopping()  # the service stopped: a 503, as for an interrupted request
            if not self._threads:
                self._threads = [threading.Thread(target=self._serve, args=(s,), name=f"pcor-worker-{i}", daemon=True)
                                 for i, s in enumerate(self._sessions)]
                for thread in self._threads:
                    thread.start()
            self._waiting += 1
            line = self._lines.get(asker)
            if line is None:
                line = self._lines[asker] = collections.deque()
                self._turns.append(asker)
            line.append(job)
            self._ready.notify()
        try:
            return await asyncio.shield(job.future)  # cancelling the request never cancels the work itself
        except BaseException:
            # The request was cancelled, not the work: a job no thread took never runs; one that
            # runs is charged and recorded, and the request ends cancelled once it has.
            if not job.future.done() and not self._drop(job):
                with anyio.CancelScope(shield=True):
                    await asyncio.wait([job.future])
            raise

    def _drop(self, job: _Job) -> bool:
        """Take `job` out of the line if no thread took it yet (True: it will never run)."""
        with self._lock:
            if job.state != "waiting":
                return False
            job.state = "dropped"
            self._waiting -= 1
            line = self._lines.get(job.asker)
            if line is not None and job in line:
                line.remove(job)
                if not line:
                    del self._lines[job.asker]
                    self._turns.remove(job.asker)
            return True

    def load(self) -> tuple[int, int]:
        """(requests running, requests waiting for a Session) now."""
        with self._lock:
            return self._running, self._waiting

    def _next(self) -> _Job | None:
        """The oldest request of the asker whose turn it is (waiting for one); None once closed."""
        with self._ready:
            while not self._turns or self._closed:
                if self._closed:
                    return None  # what still waits is ended by `close`, never run
                self._ready.wait()
            asker = self._turns.popleft()
            line = self._lines[asker]
            job = line.popleft()
            if line:
                self._turns.append(asker)  # their next request waits for the others' turns
            else:
                del self._lines[asker]
            job.state = "running"
            self._waiting -= 1
            self._running += 1
            return job

    def _serve(self, session: Session) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                outcome: tuple[bool, Any] = (True, job.context.run(job.work, session))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                outcome = (False, exc)
            with self._lock:
                self._running -= 1
            _answer(job, outcome)

    def sessions(self) -> list[Session]:
        """Every Session, for work done before serving (nothing else holds one then)."""
        return list(self._sessions)

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
        with self._ready:
            self._closed = True
            self._threads = []
            waiting = [job for line in self._lines.values() for job in line]
            self._ready.notify_all()  # idle threads end; busy ones end after their request
        for job in waiting:  # requests still in line never run: each ends as interrupted by the stop
            if self._drop(job):
                _answer(job, (False, Stopping()))
        for cursor in self._cursors:
            cursor.close()
        self._cursors.clear()
