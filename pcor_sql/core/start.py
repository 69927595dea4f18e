"""Finding a starting context C_V by a deterministic search that reads validity only.

Why it is free under OCDP (DESIGN.md §2, §7). The search is a deterministic procedure whose
next question depends only on the answers to its earlier questions: which context to check
next is fixed by the lattice (V's cell, the space's neighbour order, the full context) and by
the verdicts already read; it stops on counts and verdicts. By induction on the number of
checks, two datasets D, D' with COE(D, V) = COE(D', V) — OCDP neighbours — receive the same
answers to the same questions, so the search returns the same context after the same checks:
the start is a function of COE(D, V) alone and costs no privacy budget. No population, utility
or clock is read (a time limit would let the data's check costs steer it).
"""

from __future__ import annotations

from collections import deque

# Re-exported for callers that import it from here (benchmarks.profiles): one descent for the
# package, which on an ordinal attribute removes only a bin at an end of the run (removing any
# selected value, as a copy here once did, cuts a gap into the run: an inadmissible context).
from pcor_sql.core.exploration import ValidityOracle, random_descents
from pcor_sql.core.space import ContextSpace

__all__ = ["DEFAULT_DESCENTS", "DEFAULT_MAX_CHECKS", "DEFAULT_NEAR_CHECKS", "DEFAULT_START_CHECKS", "ValidityOracle",
           "find_start", "random_descents"]

#: Distinct contexts the whole search may check before it gives up (no valid context found).
DEFAULT_MAX_CHECKS = 20_000
#: Contexts checked near the record first: V's cell and the contexts a few values above it.
DEFAULT_NEAR_CHECKS = 64
#: The most contexts the whole search checks when it met a valid one near the record.
DEFAULT_START_CHECKS = 300
DEFAULT_DESCENTS = 24


class _Checker:
    """Validity asked once per context and counted; `ask` returns None once `cap` are asked."""

    __slots__ = ("oracle", "cap", "verdicts")

    def __init__(self, oracle: ValidityOracle, cap: int):
        self.oracle, self.cap = oracle, cap
        self.verdicts: dict[int, bool] = {}

    @property
    def checks(self) -> int:
        return len(self.verdicts)

    def ask(self, mask: int) -> bool | None:
        verdict = self.verdicts.get(mask)
        if verdict is None:
            if len(self.verdicts) >= self.cap:
                return None
            verdict = self.verdicts[mask] = bool(self.oracle.is_valid(mask))
        return verdict


def find_start(
    oracle: ValidityOracle,
    max_checks: int = DEFAULT_MAX_CHECKS,
    near_checks: int = DEFAULT_NEAR_CHECKS,
    start_checks: int = DEFAULT_START_CHECKS,
) -> tuple[int | None, int]:
    """(a valid context or None, distinct contexts checked).

    1. Near the record: a breadth-first sweep up from V's own cell (the smallest admissible
       context, where a contextual outlier usually shows) — the cell, then the contexts one
       value larger in the space's neighbour order, and so on — for at most `near_checks`.
    2. A breadth-first sweep down from the full context, neighbours in the space's order, until
       `start_checks` contexts in all are checked. The valid context it meets first is among
       the largest, which is where the utilities point, so the private search starts close to
       its target instead of many EM-guided steps away: it is the start when there is one;
       else step 1's.
    3. If neither met a valid context, both sweeps go on in lockstep (one context each in
       turn) until one does or `max_checks` contexts are checked (every admissible context,
       each once, on a small lattice).

    Whenever the sweep from the top meets a valid context within the checks step 2 allows, the
    start is the one the earlier search returned (tests/core/test_start.py keeps it) (a top-down sweep of up to 2,000
    checks, then a lockstep with a sweep up from V's cell): the same sweep in the same order.
    When it does not, the start is the record's near context — on the scale tables V's own
    cell, as before, but after 300 checks instead of 2,001 (BENCHMARKS.md, scale). No search with fewer checks
    returns the old start on every COE: if it leaves out one context of the old sweep's first
    2,000 while all of them are invalid, the COE that makes that context valid as well answers
    every question it asked the same way, so it returns the same start, while the old search
    returns that context (an adversary argument; verifiers are pluggable, so any COE occurs).
    """
    space = oracle.space
    ask = _Checker(oracle, max_checks)
    # Each sweep keeps its own queue and its own record of the contexts it queued, so that the
    # sweep from the top visits exactly what it would alone; a context both reach is checked once.
    up, down = _Sweep(space, space.v_mask), _Sweep(space, space.full)
    near = up.run(ask, min(near_checks, max_checks))
    top = down.run(ask, min(start_checks, max_checks))
    found = top if top is not None else near
    if found is None:
        found = _lockstep(ask, (up, down))
    return found, ask.checks


class _Sweep:
    """A breadth-first sweep from one context over the space's neighbours.

    Neighbours are queued lazily: a context found invalid queues itself with an iterator over
    its neighbour flips (`ContextSpace.neighbour_flips`), and the next context to check is
    drawn from the oldest such iterator, skipping what the sweep met before. That is the
    eager sweep's order exactly — the neighbours of the contexts expanded earlier are all
    drawn, and so marked met, before any of a later one's — while a sweep that stops after a
    few thousand checks on a space of thousands of values builds a few thousand neighbours,
    not checks × free bits of them (25 million on a 5,000-value attribute: `python -m benchmarks scale
    --cases wide5000`)."""

    __slots__ = ("space", "queue", "seen", "found", "next")

    def __init__(self, space: ContextSpace, origin: int):
        self.space, self.queue, self.seen = space, deque(), {origin}
        self.found = origin
        self.next: int | None = origin  # the next context to check; None: the sweep is done

    def _draw(self) -> int | None:
        """The next context in breadth-first order not met before (now marked met), or None."""
        queue, seen = self.queue, self.seen
        while queue:
            mask, flips = queue[0]
            for flip in flips:
                nb = mask ^ flip
                if nb not in seen:
                    seen.add(nb)
                    return nb
            queue.popleft()
        return None

    def step(self, ask: _Checker) -> bool | None:
        """Check the next context: True if it is valid (then it is `found`), None at the cap."""
        mask = self.next
        verdict = ask.ask(mask)
        if verdict is None:
            return None
        self.found = mask
        if not verdict:
            self.queue.append((mask, iter(self.space.neighbour_flips(mask))))
        self.next = self._draw()
        return verdict

    def run(self, ask: _Checker, limit: int) -> int | None:
        """Until a valid context is met (returned) or `limit` contexts in all are checked."""
        while self.next is not None and ask.checks < limit:
            if self.step(ask):
                return self.found
        return None


def _lockstep(ask: _Checker, sweeps: tuple[_Sweep, ...]) -> int | None:
    """The sweeps take turns, one context each, until one meets a valid context or the cap."""
    while any(s.next is not None for s in sweeps):
        for s in sweeps:
            if s.next is None:
                continue
            verdict = s.step(ask)
            if verdict is None:
                return None
            if verdict:
                return s.found
    return None
