"""Revocation everywhere at once (DESIGN.md §11): a service sharing its ledger with others
watches the ledger's identity generation, so that a token revoked or rotated by any process —
another service's owner listener, or the owner's command going straight to PostgreSQL —
stops here within one second.

Why a watch, and why it is enough. A request's token is first looked up in the identities this
service kept (`analyst_identity.IdentityMemory`, answered on the event loop without a ledger
read), and its admission may come from the kept answers of `ledger.admission_memory`. Both are
invalidated by `analysts.identity_changes()` moving (and `AdmissionMemory.clear`), which every
change made in this process does at once. A change made by another process moves only the
ledger's generation (`LedgerOps.identity_generation`, raised in the transaction that revokes):
this thread reads it every `INTERVAL` seconds and, when it moved, invalidates both memories. A
request after that reads the analysts afresh and gets the 401. So a revoked token is refused
from at most INTERVAL plus one read after the revocation committed — under one second — and a
request that reads the ledger (no kept identity) sees the revocation at once; a reservation
always does (it reads the analyst's row in its own transaction).

While the generation cannot be read (the ledger unreachable), every poll invalidates the
memories: nothing kept vouches for a token the ledger cannot confirm.

A store kept by one process (the embedded DuckDB store: its file lock) has no generation
(None), and no watch runs: its own changes already invalidate the memories.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pcor_sql.ledger.store import Ledger

#: Seconds between two reads of the generation (one small read each).
INTERVAL = 0.2
_UNREAD = object()


class IdentityWatch:
    """A daemon thread reading `ledger`'s identity generation every `interval` seconds and
    calling `on_change()` whenever it moved (or could not be read)."""

    def __init__(self, ledger: Ledger, on_change: Callable[[], None], *, interval: float = INTERVAL):
        self.ledger = ledger
        self.on_change = on_change
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: object = _UNREAD

    def _read(self) -> object:
        try:
            return self.ledger.read(lambda ops: ops.identity_generation(), None)
        except Exception:  # unreachable, or failing: nothing kept may vouch for a token now
            return _UNREAD

    def start(self) -> bool:
        """Start watching; False (and no thread) when the store has no generation."""
        first = self._read()
        if first is None:
            return False
        self._last = first
        self._thread = threading.Thread(target=self._loop, daemon=True, name="pcor-identity-watch")
        self._thread.start()
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = self._read()
            if now is _UNREAD or now != self._last:
                self.on_change()
            self._last = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
