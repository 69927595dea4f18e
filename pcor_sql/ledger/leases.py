"""Reservations carry a lease (DESIGN.md §11 "Dead hosts"): a reservation whose process died is
marked interrupted by whoever looks next — any service, or the owner's command — and never left
'running'; no pid or host name decides it.

The lease is the reserving process's: one row per holder (host, pid, start token — the names
its history rows already carry, `process_identity`), expiring `seconds` after its last renewal
by the store's clock (PostgreSQL's for a shared ledger, so no host's clock decides either).
- Before a reservation, a process whose lease was last renewed more than `seconds / 2` ago
  renews it first (one single-statement transaction, and one look, below, unless the ledger's
  opening looked less than `seconds / 3` ago); the first reservation of a process is such a one. A reservation is therefore made under a lease with at least half
  its length to run.
- While any of its reservations is waiting for its outcome, a thread renews the lease every
  `seconds / 3` and looks. When none is at its next turn, the thread ends: an idle process
  renews nothing.
- A look counts the lapsed leases (one small read); if there are any, one transaction marks every
  row still 'running' whose holder holds no unexpired lease 'interrupted' (reason 'lease
  lapsed'), still charged — whatever the work showed before it died was paid for — links the
  change into the rows' chains, and removes the lapsed leases. Opening a ledger looks too
  (`consistency.check_on_open`), so the owner's commands mark them.
- A process that closes its ledger with nothing running removes its lease.
So a process killed mid-request has its rows interrupted within `seconds` (plus a look) of its
last renewal, by any process that then reserves, renews or opens the ledger. A process that
only stalled past its lease finds its rows interrupted when it writes their outcome: the first
outcome wins (`outcomes`), and the charge stays — never refunded, never uncharged.

Why one rule is safe on both stores: a row still 'running' has a live lease exactly while its
process renews it; nothing else keeps one, and a lease never shortens a charge.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Callable

from pcor_sql.errors import InternalError, UserError
from pcor_sql.ledger import history_chain_steps
from pcor_sql.ledger.history_chain import CHANGE
from pcor_sql.ledger.process_identity import current_process
from pcor_sql.ledger.transactions import LedgerAccess, utc_now

#: The lease's length in seconds when neither `Ledger(lease_seconds=...)` nor this variable says.
DEFAULT_SECONDS = 30.0
ENV = "PCOR_SQL_LEASE_SECONDS"


def lease_seconds(given: float | None = None) -> float:
    """The lease's length: `given`, else $PCOR_SQL_LEASE_SECONDS, else DEFAULT_SECONDS."""
    if given is None:
        text = os.environ.get(ENV)
        if text is None:
            return DEFAULT_SECONDS
        try:
            given = float(text)
        except ValueError:
            raise UserError(f"{ENV}={text!r} is not a number of seconds", f"set {ENV} to a number > 0, such as 30")
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not (math.isfinite(given) and given > 0):
        raise UserError(f"a lease of {given!r} seconds cannot be kept", f"give a number of seconds > 0 ({ENV})")
    return float(given)


def holder() -> tuple[str, int, str]:
    """This process as a lease's holder (its history rows' host, pid and start token)."""
    me = current_process()
    return (me.host, me.pid, me.token)


def sweep(ops: Any) -> list[str]:
    """Mark the rows of lapsed leases interrupted and chain the change (in the caller's
    transaction); the release ids changed."""
    changed = ops.interrupt_unleased(utc_now())
    history_chain_steps.record(ops, changed, CHANGE)
    return changed


def look(access: LedgerAccess) -> list[str]:
    """One look: a small read, and only when a lease lapsed, the sweep's transaction."""
    if not access.read(lambda ops: ops.lapsed_leases()):
        return []
    return access.transaction(sweep)


class LeaseKeeper:
    """The lease of this process on one ledger: `before_reserve` / `ended` around each
    reservation, `close` with the ledger (see the module docstring). `on_error(exc)` hears of a
    renewal that failed (the lease then lapses unless a later renewal succeeds)."""

    def __init__(self, access: LedgerAccess, seconds: float, on_error: Callable[[BaseException], None] | None = None):
        self._access = access
        self.seconds = seconds
        self._on_error = on_error
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._renewing = threading.Lock()
        self._running = 0
        self._renewed = -math.inf  # monotonic time of the last renewal that committed
        self._looked = -math.inf  # ... and of the last look (an opening's included: `looked`)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()

    def _forked(self) -> None:
        # A forked child holds no thread of its parent's and is another holder: start afresh.
        if self._pid != os.getpid():
            self._pid, self._thread, self._running, self._renewed = os.getpid(), None, 0, -math.inf

    def renew(self, older_than: float = 0.0) -> None:
        """Renew the lease, then look — unless another thread of this process renewed it less
        than `older_than` seconds ago (one renewal at a time in this process)."""
        with self._renewing:
            if time.monotonic() - self._renewed < older_than:
                return
            mine = holder()
            started = time.monotonic()
            self._access.transaction(lambda ops: ops.renew_lease(mine, self.seconds), single=True)
            self._renewed = started
            if started - self._looked >= self.seconds / 3:  # an opening just looked: not again
                look(self._access)
                self._looked = started

    def looked(self) -> None:
        """The ledger's opening has just looked (`consistency.check_on_open`)."""
        self._looked = time.monotonic()

    def before_reserve(self) -> None:
        """A reservation is about to be made: count it as running, keep the renewing thread
        going, and renew first unless the lease has at least half its length to run."""
        with self._lock:
            if self._closed:
                raise InternalError("the ledger's lease was closed")
            self._forked()
            self._running += 1
            # No wake-up for a thread already keeping the lease: its next turn is set by the last
            # renewal, not by how many reservations run (a wake per reservation cost the holder of
            # the ledger's write lock a switch of the interpreter each time).
            if self._thread is None:
                self._thread = threading.Thread(target=self._keep, name="pcor-ledger-lease", daemon=True)
                self._thread.start()
        if time.monotonic() - self._renewed > self.seconds / 2:
            try:
                self.renew(self.seconds / 2)
            except BaseException:
                self.ended()
                raise

    def ended(self) -> None:
        """A reservation counted by `before_reserve` has its outcome (or was refused)."""
        with self._lock:
            # The thread ends at its next turn if nothing runs then: requests one after another
            # keep one thread rather than starting one each.
            self._running = max(0, self._running - 1)

    def _keep(self) -> None:
        period = self.seconds / 3
        while True:
            with self._lock:
                if self._closed or self._running == 0:  # an idle process keeps no thread (nor lease)
                    self._thread = None
                    return
                self._wake.wait(timeout=max(0.0, self._renewed + period - time.monotonic()))
                if self._closed:
                    self._thread = None
                    return
                due = self._running > 0 and time.monotonic() - self._renewed >= period
            if due:
                try:
                    self.renew(period)
                except BaseException as exc:  # the ledger unreachable: the lease lapses, as it should
                    if self._on_error is not None:
                        self._on_error(exc)
                    time.sleep(period)

    def close(self) -> None:
        """Stop renewing; with nothing running, remove this process's lease (best effort: a
        lease left behind lapses and is removed by the next look)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
            idle = self._running == 0 and self._renewed > -math.inf and self._pid == os.getpid()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if idle:
            mine = holder()
            try:
                self._access.transaction(lambda ops: ops.end_lease(mine), single=True)
            except Exception:  # noqa: BLE001 - closing must not fail for a lease that lapses anyway
                pass
