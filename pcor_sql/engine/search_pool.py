"""A batch's searches in worker processes that share its per-cell summary (DESIGN.md §10).

Why fork, and why a pool per batch. A search reads only the `OutlierRun` (summary, verifier,
records): numpy buffers that nothing writes once the summary is built. A child forked after
the build sees those pages copy-on-write, so N workers hold one summary, not N (measured with
`python -m benchmarks batch`: peak RSS of the parent and its workers together). Nothing is
pickled per record but its index going out and its `RecordRelease` coming back. Shared memory
or a memory-mapped file would let long-lived workers outlive a batch, at the price of
rebuilding every summary object from raw buffers in each worker; a batch builds its summary
once and then runs many searches, so a pool forked for the batch pays a few milliseconds per
worker and nothing per record. The first record runs in the owning process before the fork, so
the numba kernels are loaded (or compiled, once, with the progress line saying so) there and
every worker inherits them loaded.

What stays in the owning process: the ledger (the pipeline reserved before `release_all` is
called and records each outcome after it returns), every read of rows, and every search that
may call back into DuckDB, Spark or the caller's Python — a `PythonVerifier`, a `SqlVerifier`
(`needs_sql`: a query per check) or any verifier class an owner registered — and any batch off
Linux: those run one after another as before (`can_fork`). The built-in verifiers (LOF, Grubbs,
histogram, z-score) check contexts on the summary alone, with compiled kernels.

Coins: record i draws from `core.randomness.record_source(seed, i)`, in any process, so a
seeded batch gives the same outputs for any number of workers. Work: each worker meters its
search with the request's cap (`core.work`) and reports what it used; the owner adds the counts
up in the records' order, so a cap stops the request exactly as when one process ran it. A
stop (the service stopping) or Ctrl-C ends the workers (they ignore SIGINT themselves) and the
request is interrupted. A worker that dies (kill -9, out of memory) loses the record it held: that
record is a `WorkerLost` failure (the batch says it was not answered), a new worker is forked
in its place, and the other records go on.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterator

from pcor_sql.core import work
from pcor_sql.core.randomness import record_source
from pcor_sql.core.verifiers.builtins import BUILTINS
from pcor_sql.errors import InternalError, UserError, option_hint, option_name, register_spelling

if TYPE_CHECKING:
    from pcor_sql.engine.record_search import OutlierRun

#: Verifiers whose checks run on the summary alone (compiled kernels, numpy): safe in a worker.
#: The built-ins exactly (`core.verifiers.builtins`): a subclass or a user class may call back.
SUMMARY_ONLY_VERIFIERS = BUILTINS

register_spelling("workers", "--workers", None)
#: More worker processes than this is a typo, not a machine.
MAX_WORKERS = 1024

#: How often (seconds) the owner looks at the stop event while workers search.
POLL_S = 0.1


class WorkerLost(InternalError):
    """The worker process running a record's search ended before answering (killed, out of memory)."""


def check_workers(value: Any) -> int:
    """`workers` as given by the caller: a whole number from 1 to MAX_WORKERS, else one line."""
    if type(value) is not int or not 1 <= value <= MAX_WORKERS:
        raise UserError(f"{option_name('workers')} must be a whole number from 1 to {MAX_WORKERS:,}, got {value!r}",
                        f"pass the number of processes to search in, e.g. {option_hint('workers', str(os.cpu_count() or 2))} "
                        "(this machine's cores)")
    return value


def can_fork(prepared: OutlierRun) -> bool:
    """Whether `prepared`'s searches may run in forked workers: built-in verifiers only (no SQL,
    no caller's Python), on Linux (macOS has fork, but its system libraries are not safe in a
    forked child of a threaded process; Windows has none)."""
    return type(prepared.verifier) in SUMMARY_ONLY_VERIFIERS and sys.platform.startswith("linux")


def release_all(prepared: OutlierRun, seed: int | None, indices: list[int], workers: int,
                on_done: Callable[[], None]) -> dict[int, Any]:
    """{i: RecordRelease, or the exception its search raised} for each record index in
    `indices`, searched by up to `workers` forked processes. `on_done()` is called as each
    record finishes (progress)."""
    meter = work.current()
    cap = meter.cap if meter is not None else None
    stop = meter.stop if meter is not None else None
    pool = _Pool(prepared, seed, cap, work.partition(), min(workers, len(indices)))
    results: dict[int, Any] = {}
    used: dict[int, int] = {}
    charged_upto = 0  # the owner's meter has counted the work of indices[:charged_upto]
    pending = list(indices)
    try:
        while pending or pool.busy:
            pool.dispatch(pending)
            for i, outcome, spent in pool.collect(POLL_S):
                results[i], used[i] = outcome, spent
                on_done()
            if stop is not None and stop.is_set():
                raise work.Stopping()
            while charged_upto < len(indices) and indices[charged_upto] in used:
                if meter is not None:
                    meter.spend(used[indices[charged_upto]])  # a cap or stop raises here, in order
                charged_upto += 1
            for i in pool.replace_dead():
                results[i] = WorkerLost("the worker process searching this record ended before answering")
                used[i] = 0
                on_done()
    finally:
        pool.close()
    return results


class _Pool:
    """Forked workers, one record at a time each, over pipes; see the module docstring."""

    def __init__(self, prepared: OutlierRun, seed: int | None, cap: int | None, partition: Hashable, size: int):
        self.task = (prepared, seed, cap, partition)
        self.context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []
        for _ in range(max(1, size)):
            self.workers.append(self._start())

    def _start(self) -> "_Worker":
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(theirs, *self.task), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, ours)

    @property
    def busy(self) -> bool:
        return any(w.record is not None for w in self.workers)

    def dispatch(self, pending: list[int]) -> None:
        for w in self.workers:
            if w.record is None and pending:
                w.record = pending.pop(0)
                try:
                    w.conn.send(w.record)
                except OSError:  # it died between tasks: `replace_dead` reports the record
                    pass

    def collect(self, timeout: float) -> list[tuple[int, Any, int]]:
        by_conn = {w.conn: w for w in self.workers if w.record is not None}
        out = []
        for conn in multiprocessing.connection.wait(list(by_conn), timeout):
            w = by_conn[conn]
            try:
                i, payload, spent = conn.recv()
            except (EOFError, OSError):  # died: `replace_dead` reports its record
                continue
            out.append((i, _unpickled(payload), spent))
            w.record = None
        return out

    def replace_dead(self) -> list[int]:
        """The records of workers that ended; each such worker is replaced by a fresh fork."""
        lost = []
        for n, w in enumerate(self.workers):
            if not w.process.is_alive():
                if w.record is not None:
                    lost.append(w.record)
                w.conn.close()
                w.process.join()
                self.workers[n] = self._start()
        return lost

    def close(self) -> None:
        """Ends every worker: an idle one is told to stop; a busy one (Ctrl-C, a stop, a cap) is
        terminated, its search abandoned."""
        for w in self.workers:
            try:
                if w.record is None:
                    w.conn.send(None)
                else:
                    w.process.terminate()
            except OSError:
                pass
        for w in self.workers:
            w.process.join(5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()


class _Worker:
    __slots__ = ("process", "conn", "record")

    def __init__(self, process: Any, conn: Any):
        self.process, self.conn, self.record = process, conn, None


def received(conn: multiprocessing.connection.Connection) -> Iterator[Any]:
    """What a worker's owner sends it, one message at a time, until the owner says stop (None)
    or its end of the pipe is gone: the loop of every search worker, pooled or kept."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        yield message


def _serve(conn: Any, prepared: OutlierRun, seed: int | None, cap: int | None, partition: Hashable) -> None:
    """A worker's loop: record indices in, (index, pickled outcome, work used) out, until told
    to stop or its owner is gone. Ctrl-C is the owner's to handle: it ends the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_owner()
    for i in received(conn):
        outcome, used = search_one(prepared, i, i, seed, cap, partition)
        conn.send((i, _pickled(outcome), used))
    os._exit(0)  # no atexit handlers, no flushing of buffers the owner also holds


def search_one(run: OutlierRun, at: int, i: int, seed: int | None, cap: int | None, partition: Hashable) -> tuple[Any, int]:
    """(the RecordRelease of `run`'s record `at`, ready to pickle — or the exception its search
    raised — and the work it used), searched with record i's coins under `cap`, in the asker's
    cache `partition`: what a worker process does with one record."""
    meter = work.WorkMeter(cap)
    try:
        with work.metered(meter, partition):
            return _portable(run.release(at, record_source(seed, i))), meter.used
    except Exception as exc:
        return exc, meter.used


def _die_with_owner() -> None:
    """Linux's PR_SET_PDEATHSIG: SIGKILL this worker when the thread that forked it ends (the
    owner killed or ended by SIGTERM, which runs no Python cleanup), so that no search goes on
    for nobody. Where prctl cannot be called, the worker still ends at its next read of the pipe."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the owner ended before prctl took hold
        os._exit(0)


def _portable(release: Any) -> Any:
    """A RecordRelease that pickles: the owner view's certificate is read here, where its
    evaluator lives, and travels as a value."""
    owner = getattr(release, "owner", None)
    if owner is None or owner.read_certificate is None:
        return release
    import dataclasses

    fixed = dataclasses.replace(owner, read_certificate=functools.partial(_given, owner.certificate))
    return dataclasses.replace(release, owner=fixed)


def _given(value: Any) -> Any:
    return value


def _pickled(outcome: Any) -> bytes:
    try:
        return pickle.dumps(outcome)
    except Exception as exc:  # an exception that does not pickle: its class and text
        return pickle.dumps(InternalError(f"{type(outcome).__name__}: {outcome}") if isinstance(outcome, BaseException)
                            else InternalError(f"a search's result could not be sent back ({exc})"))


def _unpickled(payload: bytes) -> Any:
    try:
        return pickle.loads(payload)
    except Exception as exc:
        return InternalError(f"a worker's answer could not be read ({exc})")
