"""Long-lived search processes for a service (DESIGN.md §10; measured by
`python -m benchmarks service --workers 1,2` and `python -m benchmarks handoff`).

The service's worker threads each own a Session; with processes on, each also owns one
`SearchProcess`: a child process that runs the searches of the requests its thread serves. The
thread still does everything else — authentication, admission, the reservation, every read of
rows (the record, the summary, through its own DuckDB cursor), the outcome in the ledger and
the response — and waits on a pipe while the child searches, holding no GIL: the search loop
(Python) no longer shares one interpreter with the other requests and with HTTP.

What crosses per record: the summary's `SummaryFile` (a path and a layout: the arrays are
mapped, never pickled, `engine.shared_summary`), the verifier, the request, the record and
the start selection (a few hundred bytes pickled), and back the pickled `RecordRelease`.
The child keeps the summaries it mapped (the last `KEPT`), with their lazily built parts
(probes, samples, membership tables) and their verdict caches — keyed, as in one process, by
who asked (`core.work.partition`), so no analyst's requests warm another's.

Which searches run here: those of the built-in verifiers on a summary with sorted runs or
moments (`accepts`). A Python or SQL verifier (it calls back into the caller or DuckDB), and
a Spark summary (values come through per-cell windows, a query each), run in the thread as
before. Coins: record i draws from `record_source(seed, i)`, here as in one process, so a
seeded request gives the same release either way. Work: the child meters with what is left
of the request's cap and reports what it used; the thread's meter adds it up (a cap raises
there, in order). A stop (SIGTERM) or the thread's caller giving up: the thread kills its
child (the search is abandoned, the request interrupted) and forks a fresh one. A child that
dies (kill -9, out of memory) loses its record — `WorkerLost`, reported as not answered —
and is replaced.

Starting: each child is a fresh interpreter (`python -c`, this package on its path) talking
over a socket pair — never a fork of the service. A fork would copy a process whose other
threads (DuckDB's, Arrow's, the request threads) may hold locks mid-operation, and a child
that then imports a library or loads a compiled kernel can deadlock or crash (seen here: a
segfault loading numba's BLAS bindings in such a child). Nor multiprocessing's spawn or fork
server: their children import the caller's `__main__` again, which re-runs an owner's script
that serves `app(owner)` without a main guard. A child costs an interpreter start (about a
second, at the service's start, all children at once) and loads its kernels from numba's
cache on its first search (the benchmark's warm-up round pays it; the same for every analyst
and key). A child ends when its socket closes (its owner ended or closed it) and, should the
owner die while the child searches, within a second (it watches its parent's pid).
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

from pcor_sql.core import work
from pcor_sql.core.verifiers.capabilities import capabilities_of
from pcor_sql.engine.record_search import OutlierRun
from pcor_sql.engine.search_pool import POLL_S, WorkerLost, _pickled, _unpickled, can_fork, received, search_one
from pcor_sql.engine.shared_summary import SharedSummaries, SummaryFile, attach

#: Summaries a child keeps mapped (with what its searches built on them); the oldest goes first.
KEPT = 8


def accepts(prepared: OutlierRun) -> bool:
    """Whether `prepared`'s searches may run in a search process (module doc)."""
    return can_fork(prepared) and prepared.summary.windows is None


class SearchProcess:
    """One child process and the pipe to it; used by one thread at a time (its Session's)."""

    def __init__(self, shared: SharedSummaries, entry: str = __name__):
        """`entry`: the module whose `main(fd, owner)` the child runs (this one's, or a caller's
        that warms up first: `service.search_child`)."""
        self.shared = shared
        self.entry = entry
        self._process: Any = None
        self._conn: Any = None
        self.started = 0  # children started so far (tests and the owner's status read it)
        self.searched = 0  # records handed to a child
        self._closed = False

    def start(self) -> None:
        if self._closed:
            raise work.Stopping()  # the service closed its search processes: it is stopping
        if self._process is None:
            self._fork()

    def _fork(self) -> None:
        ours, theirs = socket.socketpair()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join([package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        code = f"from {self.entry} import main; main({theirs.fileno()}, {os.getpid()})"
        try:
            process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], close_fds=True,
                                       stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": path})
        finally:
            theirs.close()
        self._process, self._conn = process, multiprocessing.connection.Connection(ours.detach())
        self.started += 1

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def warm(self, summaries: list[Any]) -> None:
        """Waits until the child is up, then maps `summaries` in it (service start), so no
        request pays for either; WorkerLost if the child cannot start."""
        self.start()
        self._ask(("ping", None), None)
        for summary in summaries:
            self._ask(("attach", self.shared.share(summary)), None)

    def verdict_groups(self, summary: Any) -> list[tuple]:
        """The verdict groups (partition, cell, value, verifier) the child holds for `summary`."""
        groups, _ = self._ask(("groups", self.shared.share(summary)), None)
        return groups

    def release_all(self, prepared: OutlierRun, seed: int | None, indices: list[int],
                    on_done: Callable[[], None]) -> dict[int, Any]:
        """{i: RecordRelease, or the exception its search raised}, searched one after another
        in the child; `on_done()` after each (progress)."""
        self.start()
        if capabilities_of(prepared.verifier).needs_values:
            prepared.summary.runs()  # loaded here (a query on the thread's cursor), then shared
        shared = self.shared.share(prepared.summary)
        meter = work.current()
        results: dict[int, Any] = {}
        for i in indices:
            left = None if meter is None or meter.cap is None else max(1, meter.cap - meter.used)
            task = ("search", shared, prepared.verifier, prepared.request, prepared.records[i],
                    prepared.start_selection, seed, i, left, work.partition())
            self.searched += 1
            try:
                outcome, used = self._ask(task, meter)
            except WorkerLost as lost:
                outcome, used = lost, 0
            results[i] = outcome
            if meter is not None:
                meter.spend(used)  # a cap or a stop raises here
            on_done()
        return results

    def _ask(self, task: tuple, meter: Any) -> tuple[Any, int]:
        """Sends `task`, waits for the answer while watching the request's stop event."""
        self.start()
        stop = None if meter is None else meter.stop
        conn, process = self._conn, self._process
        try:
            conn.send(task)
            while not conn.poll(POLL_S):
                if stop is not None and stop.is_set():
                    self._replace()
                    raise work.Stopping()
                if process.poll() is not None:
                    break
            payload, used = conn.recv()
        except (EOFError, OSError, AttributeError):
            if self._closed:
                raise work.Stopping() from None
            self._replace()
            raise WorkerLost("the search process running this record ended before answering") from None
        return _unpickled(payload), used

    def _replace(self) -> None:
        self._end(kill=True)
        if not self._closed:
            self._fork()

    def _end(self, *, kill: bool) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is None:
            return
        try:
            if kill:
                process.kill()
            else:
                conn.send(None)
        except OSError:
            pass
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        conn.close()

    def close(self, *, kill: bool = False) -> None:
        """Ends the child: told to stop when idle; `kill`: at once (the service is stopping)."""
        self._closed = True
        self._end(kill=kill)


def main(fd: int, owner: int, before: Callable[[], None] | None = None) -> None:
    """A child's entry point (`python -c`): serve the socket `fd` for the process `owner`,
    after `before()` (a caller's warm-up) if given."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the owner's: it ends the children
    threading.Thread(target=_watch, args=(owner,), daemon=True, name="owner watch").start()
    conn = multiprocessing.connection.Connection(fd)
    if before is not None:
        before()
    _serve(conn)


def _watch(owner: int) -> None:
    """Ends this child within a second of its owner's end (a search in progress would not read
    the socket until it finished)."""
    while os.getppid() == owner:
        time.sleep(1.0)
    os._exit(0)


def _serve(conn: Any) -> None:
    """The child's loop: tasks in, (pickled outcome, work used) out, until told to stop or its
    owner is gone."""
    kept: OrderedDict[str, Any] = OrderedDict()
    for task in received(conn):
        used = 0
        outcome: Any = None
        try:
            if task[0] != "ping":  # a ping only says the child is up (and warmed)
                summary = _mapped(kept, task[1])
            if task[0] == "groups":  # what the child's verdict caches hold (the tests ask)
                outcome = list(summary.verdicts._groups)
            elif task[0] == "search":
                _, _, verifier, request, record, start, seed, i, cap, partition = task
                run = OutlierRun(None, request, summary, verifier, (record,), start)
                outcome, used = search_one(run, 0, i, seed, cap, partition)
        except Exception as exc:
            outcome = exc
        try:
            conn.send((_pickled(outcome), used))
        except (OSError, ValueError):
            break
    os._exit(0)


def _mapped(kept: OrderedDict[str, Any], shared: SummaryFile) -> Any:
    summary = kept.get(shared.path)
    if summary is None:
        summary = kept[shared.path] = attach(shared)
        while len(kept) > KEPT:
            kept.popitem(last=False)
    else:
        kept.move_to_end(shared.path)
    return summary
