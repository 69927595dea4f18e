"""Group commit for the embedded store's write transactions (DESIGN.md §11 "Two stores, one
contract"): the transactions that queue on the store's write lock while another holds it are run
by the next holder in ONE DuckDB transaction, with one COMMIT.

Why: this process's write transactions already take turns (the write lock, `duckdb_store`), so
running the queued ones back to back in one transaction changes no outcome — each body reads
what the bodies before it wrote, as it would after their COMMITs — and saves every COMMIT but
one (each a write of DuckDB's log) and the lock's hand-overs between them.

What keeps it the same as one transaction each:
- DuckDB has no savepoints, and a Python exception in a body leaves that body's writes in the
  transaction (a failed statement aborts all of it). So if any body of a group raises, anything,
  the group is rolled back and every body runs again alone, in its own transaction exactly as
  without grouping; each caller gets its own result or exception. A COMMIT that fails is the same.
- The chains' heads: a group's bodies see each other's heads in order (`GroupHeads`, over the
  process's `HeadMemory`); a rolled back group clears the memory, as a failed transaction does.
- Each body's `committed` callback runs once, after the group's COMMIT succeeded, in order.
- Bounded: a group is its holder's transaction and what has queued by the time each of its
  bodies ends, at most `GROUP_SIZE`; nobody waits for a group to fill.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import duckdb

from pcor_sql.errors import InternalError
from pcor_sql.ledger.admission_memory import refuse_reads
from pcor_sql.ledger.duckdb_chain_memory import Head, HeadMemory, Pair, Written
from pcor_sql.ledger.transactions import rollback_quietly

_T = TypeVar("_T")

#: The most transactions one COMMIT carries: the service's in-flight requests are a few per
#: worker, and a longer group only delays its first caller's answer.
GROUP_SIZE = 8

#: A grouped body: (cursor, the heads it reads) -> its result.
Body = Callable[[Any, HeadMemory], Any]


class GroupHeads(HeadMemory):
    """The heads a group's next body reads: those its earlier bodies set, over the process's
    memory. A body that rewrote a chain (or failed) hides the process's memory for the rest of
    the group: they read the heads from the table."""

    def __init__(self, base: HeadMemory):
        super().__init__()
        self._base = base
        self._hidden = False

    def get(self, pair: Pair) -> Head | None:
        with self._lock:
            if pair in self._heads:
                return self._heads[pair]
            if self._hidden:
                return None
        return self._base.get(pair)

    def clear(self) -> None:
        with self._lock:
            self._heads.clear()
            self._hidden = True


class _Queued(Generic[_T]):
    """One caller's transaction waiting for the write lock, and what came of it."""

    def __init__(self, body: Body, committed: Callable[[bool], None], written: Callable[[], Written]):
        self.body = body
        self.committed = committed
        self.written = written
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def settle(self, run: Callable[[], Any]) -> None:
        try:
            self.result = run()
        except BaseException as exc:  # noqa: BLE001 - handed to its caller's thread (`outcome`)
            self.error = exc
        self.done = True

    def outcome(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None  # no reference cycle through the traceback
            raise error
        return self.result


class GroupCommit:
    """Runs write transactions under `lock` (the store's write lock), grouping the queued ones.
    `cursor()`: a fresh cursor of the store; `alone(body, committed)`: one transaction as the
    store runs it without grouping (under the lock, retried on conflicts), `body(cur)`."""

    def __init__(self, lock: threading.RLock, heads: HeadMemory, cursor: Callable[[], Any],
                 alone: Callable[[Callable[[Any], Any], Callable[[bool], None]], Any], size: int = GROUP_SIZE):
        self._lock = lock
        self._heads = heads
        self._cursor = cursor
        self._alone = alone
        self._size = size
        self._queue: deque[_Queued] = deque()
        self._queue_lock = threading.Lock()
        self._inside = threading.local()
        #: How many COMMITs carried how many transactions (lab only: the tests and benchmarks read it).
        self.sizes: dict[int, int] = {}

    def run(self, body: Body, committed: Callable[[bool], None], written: Callable[[], Written]) -> Any:
        """`body` in a transaction of its own or in a group; its result or its exception."""
        if getattr(self._inside, "active", False):  # a transaction started inside a body: as before
            return self._alone(lambda cur: body(cur, self._heads), committed)
        refuse_reads()  # in the caller's context: a body may run in another thread
        mine: _Queued = _Queued(body, committed, written)
        with self._queue_lock:
            self._queue.append(mine)
        with self._lock:
            if not mine.done:
                group = self._take(mine)
                self._inside.active = True
                try:
                    self._run_group(group)
                finally:
                    self._inside.active = False
                    for item in group:  # never leave a caller without an answer
                        if not item.done:
                            item.error, item.done = InternalError("a grouped ledger transaction was not run"), True
        return mine.outcome()

    def _take(self, mine: _Queued) -> list[_Queued]:
        with self._queue_lock:
            self._queue.remove(mine)
        group = [mine]
        self._more(group)
        return group

    def _more(self, group: list[_Queued]) -> None:
        """Add to `group` what has queued meanwhile, up to its size; never waits for more."""
        with self._queue_lock:
            while self._queue and len(group) < self._size:
                group.append(self._queue.popleft())

    def _run_group(self, group: list[_Queued]) -> None:
        if self._size == 1:
            return self._run_alone(group[0])
        results: list[Any] = []
        cur, stopped, raised = None, None, None
        try:
            cur = self._cursor()
            heads = GroupHeads(self._heads)
            cur.execute("BEGIN TRANSACTION")
            # What queues while a body runs joins before the COMMIT: with two writers (the
            # service's two workers) one always waits while the other runs, never two, so a
            # group taken only at the start would always be one transaction.
            while len(results) < len(group):
                item = group[len(results)]
                try:
                    results.append(item.body(cur, heads))
                except BaseException as exc:
                    if not isinstance(exc, Exception):  # an interrupt: its caller gets it, not a rerun
                        stopped = item
                        item.error, item.done = exc, True
                    raised = exc
                    raise
                heads.committed(item.written(), True)
                self._more(group)
            cur.execute("COMMIT")
        except BaseException:  # noqa: BLE001 - any failure: the group is rolled back, each body runs alone
            if cur is not None:
                rollback_quietly(cur)
            self._heads.clear()
            results = []
        finally:
            if cur is not None:
                cur.close()
        if not results and len(group) == 1 and stopped is None and isinstance(raised, Exception) \
                and not isinstance(raised, duckdb.Error):
            # A group of one whose own body raised (a refusal, a rule): rolled back, it is already
            # what running it alone gives — running it again would repeat its reads for nothing.
            # A database error still goes alone, for the store's retry on conflicts and its words.
            group[0].error, group[0].done = raised, True
            return
        if not results:  # rolled back: each alone, exactly as without grouping
            for item in group:
                if item is not stopped:
                    self._run_alone(item)
            return
        self.sizes[len(group)] = self.sizes.get(len(group), 0) + 1
        for item, result in zip(group, results):
            item.settle(lambda item=item, result=result: (item.committed(True), result)[1])

    def _run_alone(self, item: _Queued) -> None:
        self.sizes[1] = self.sizes.get(1, 0) + 1
        item.settle(lambda: self._alone(lambda cur: item.body(cur, self._heads), item.committed))
