"""Bounded work per request (DESIGN.md §8 "Bounded work") and who a cache may serve (§8 "No
cross-analyst channels").

A `WorkMeter` counts what a search does — each validity question, each candidate an EM call
scores, each uniform draw — and stops the request when it reaches its cap, or at once when the
service is stopping. The pipeline installs one per request (`metered`); the oracle and the
searches `spend` on whichever is current, so no search signature changes and a request with no
meter (the owner's Python, the CLI) runs as before.

Why the cap is safe under OCDP. A validity question is a function of COE(D, V); a search's
sequence of questions and EM candidate sets is a function of COE(D, V), its coins, and the
outcomes of its earlier (paid) EM calls. So the count reached at every step — hence whether and
where the cap stops the search — is a post-processing of what the release already pays for:
on OCDP neighbours (which share COE) the stopping time has the same law given the same EM
outcomes, and the stop itself adds no privacy cost. The count is never a time: a wall-clock
deadline would depend on the data beyond COE (a check's cost follows its population), so no
outcome is decided by one. Cache hits count like misses, for the same reason.

A stopped request ends with the pipeline's generic post-reservation failure (`WorkCapReached`
is an internal error: the analyst hears only "could not be answered"; the history says
`work-cap`). A service that is stopping raises `Stopping`, a KeyboardInterrupt, so the pipeline
records the request as interrupted.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Hashable, Iterator

from pcor_sql.errors import InternalError


class WorkCapReached(InternalError):
    """A request's search reached its work cap (after the reservation: a generic failure)."""


class Stopping(KeyboardInterrupt):
    """The service is stopping: the request in flight is interrupted, recorded as such."""


class WorkMeter:
    """Counts a request's work against `cap` (None: no cap); `stop`, when set, interrupts it."""

    __slots__ = ("cap", "used", "stop")

    def __init__(self, cap: int | None = None, stop: threading.Event | None = None):
        if cap is not None and (type(cap) is not int or cap < 1):
            raise ValueError("a work cap is a whole number ≥ 1")
        self.cap, self.used, self.stop = cap, 0, stop

    def spend(self, units: int = 1) -> None:
        self.used += units
        if self.stop is not None and self.stop.is_set():
            raise Stopping()
        if self.cap is not None and self.used > self.cap:
            raise WorkCapReached(f"the request reached its work cap of {self.cap:,} (validity checks + EM candidates)")


_METER: contextvars.ContextVar[WorkMeter | None] = contextvars.ContextVar("pcor_sql_work_meter", default=None)
#: Whose caches a request may read and fill (see `partition`).
_PARTITION: contextvars.ContextVar[Hashable] = contextvars.ContextVar("pcor_sql_cache_partition", default="owner")


def spend(units: int = 1) -> None:
    """Count `units` of work on the current request's meter, if it has one."""
    meter = _METER.get()
    if meter is not None:
        meter.spend(units)


def current() -> WorkMeter | None:
    """The current request's meter (a search handed to another process takes its cap along)."""
    return _METER.get()


def partition() -> Hashable:
    """The cache partition of the current request: a key-specific cache (verdicts, start
    searches, utilities) that one analyst's request filled must not speed up another's — the
    time would tell which keys someone else asked about — so every such cache is keyed by this
    too. The owner has a partition of their own ("owner"); an analyst's is ("analyst", name)."""
    return _PARTITION.get()


@contextlib.contextmanager
def metered(meter: WorkMeter | None, cache_partition: Hashable = "owner") -> Iterator[None]:
    """Run the block with `meter` counting its work and `cache_partition` naming its caches."""
    token_meter = _METER.set(meter)
    token_partition = _PARTITION.set(cache_partition)
    try:
        yield
    finally:
        _METER.reset(token_meter)
        _PARTITION.reset(token_partition)
