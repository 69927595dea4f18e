"""What the service's admissions read, kept per analyst, so that a request which waits for a
worker is admitted without reading the ledger again (DESIGN.md §8: refusals that need no data
come back before the request waits; the reservation alone decides).

One rule makes keeping these answers safe: **the memory only admits; a refusal always comes
from a fresh read.** An admission is advice — passing it reserves nothing, and the worker's
reservation checks everything again, atomically. So an answer kept too long can only let a
request wait for a worker that then refuses it (a refusal that comes later, never a wrong
one), while nothing kept can refuse a request that a fresh read would admit.

What is kept (each per analyst: DESIGN.md §8 "No cross-analyst channels" — a hit shows in time):

- the registered dataset a request names (`dataset`);
- the dataset's frozen set of releasable keys (`releasable`), when it has at most
  `KEYS_SIZE`: a request whose keys are all in it is admitted; one with a key outside it reads
  the set afresh (the owner may have re-registered the dataset);
- the state a limit and quota check read (`check`) — each unit's and quota row's spent ε,
  raised at every later check by all the ε this process charged since that read
  (`charged_now`: every `Ledger.reserve` adds its items' ε once it commits). The raise covers
  every charge of this process on any unit, so the kept state never spends less than the
  ledger holds, as long as this process is the ledger's only writer — which DuckDB's lock on
  the file makes it while the service runs. Refunds and raised limits only make a kept
  refusal wrong, and a kept refusal is never given: the check reads afresh. On a ledger that
  several services share (DESIGN.md §11) the others' charges are not counted, so a kept state
  may admit a request a fresh read would refuse: the reservation then refuses it (429, nothing
  charged) — later, never wrongly. Another process's analyst changes empty it (`clear`).

Timing: the raise counts every analyst's charges, so when an admission reads afresh (a few
milliseconds more) depends on how much anyone charged since — data independent, and only on a
request that waits in line, which shows the others' load more plainly than that.

The memory holds at most `SIZE` answers of each kind; past that it starts empty again.

`kept_only()`: while it is on (in this context), every read the memory or the ledger would make
raises `NotKept` instead — so an admission can be tried where no statement may run (the
service's event loop, saving a thread's round trip) and run where reads may when it needs one.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, TypeVar

from pcor_sql.errors import UserError

_T = TypeVar("_T")

#: How many answers of one kind the memory keeps (datasets, (analyst, dataset) key sets, checks).
SIZE = 4096
#: The most releasable keys it keeps for one analyst and dataset (a larger set is asked key by key).
KEYS_SIZE = 65536

_charged_lock = threading.Lock()
_charged = [0.0]


_kept_only: contextvars.ContextVar[bool] = contextvars.ContextVar("pcor_sql_kept_only", default=False)


class NotKept(BaseException):
    """A read was needed while `kept_only()` is on. A BaseException: no `except Exception` on the
    way (one that turns failures into one-line errors) takes it for the request's fault."""


@contextlib.contextmanager
def kept_only() -> Iterator[None]:
    """Within it, `refuse_reads()` (called before every read of the memory and of the ledger)
    raises `NotKept`."""
    token = _kept_only.set(True)
    try:
        yield
    finally:
        _kept_only.reset(token)


def refuse_reads() -> None:
    """Raise `NotKept` within `kept_only()`; nothing otherwise."""
    if _kept_only.get():
        raise NotKept()


def note_charged(epsilon: float) -> None:
    """Called by `Ledger.reserve` once its transaction committed: `epsilon` more charged in this process."""
    with _charged_lock:
        _charged[0] += epsilon


def charged_now() -> float:
    """All the ε this process has charged so far (only ever grows)."""
    with _charged_lock:
        return _charged[0]


class AdmissionMemory:
    """The service's kept admission answers (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._datasets: dict[tuple[str, str], Any] = {}
        self._keys: dict[tuple[str, str], frozenset[str]] = {}
        self._checks: dict[tuple[str, Hashable], tuple[Any, float]] = {}

    def dataset(self, analyst: str, name: str, read: Callable[[], _T]) -> _T:
        """The registered dataset `name` as `read()` found it for `analyst` (kept when found;
        `read` refuses a name that is not there, and that is never kept)."""
        with self._lock:
            kept = self._datasets.get((analyst, name))
        if kept is not None:
            return kept
        refuse_reads()
        found = read()
        if found is not None:
            self._keep(self._datasets, (analyst, name), found)
        return found

    def releasable(self, analyst: str, name: str, texts: Iterable[str],
                   read: Callable[[], frozenset[str] | None]) -> bool:
        """Whether every key (as its frozen text) is in dataset `name`'s releasable set: True at
        once when the kept set holds them all, else decided on the set `read()` returns now
        (None: none declared), which is kept."""
        wanted = set(texts)
        with self._lock:
            known = self._keys.get((analyst, name))
        if known is not None and wanted <= known:
            return True
        refuse_reads()
        found = read()
        if found is not None and len(found) <= KEYS_SIZE:
            self._keep(self._keys, (analyst, name), found)
        return found is not None and wanted <= found

    def check(self, analyst: str, what: Hashable, read: Callable[[], _T], judge: Callable[[_T, float], None]) -> None:
        """Admit by `judge(state, raised)` on the state kept for (`analyst`, `what`), its spent ε
        raised by what this process charged since it was read; if that refuses (or nothing is
        kept), judge a fresh `read()` (raised 0) and keep it. `judge` raises to refuse."""
        with self._lock:
            kept = self._checks.get((analyst, what))
        if kept is not None:
            state, at = kept
            try:
                judge(state, charged_now() - at)
                return
            except UserError:  # any refusal (BudgetExceeded above all): never from memory, read afresh
                pass
        refuse_reads()
        at = charged_now()  # before the read: a charge committed meanwhile is counted twice, never missed
        state = read()
        self._keep(self._checks, (analyst, what), (state, at))
        judge(state, 0.0)

    def forget(self, analyst: str) -> None:
        """Drop everything kept for `analyst`."""
        with self._lock:
            for table in (self._datasets, self._keys, self._checks):
                for key in [k for k in table if k[0] == analyst]:
                    del table[key]

    def clear(self) -> None:
        """Drop everything kept (another process sharing the ledger changed its analysts:
        `service.ledger_watch`)."""
        with self._lock:
            for table in (self._datasets, self._keys, self._checks):
                table.clear()

    def _keep(self, table: dict, key: tuple, value: Any) -> None:
        with self._lock:
            if len(table) >= SIZE and key not in table:
                table.clear()
            table[key] = value
