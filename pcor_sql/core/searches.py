"""The five private searches of the PCOR paper (Algorithms 1–5) and `explore` (DESIGN.md §7),
over admissible contexts only.

Each search reads the data only through an `Oracle`: `is_valid(mask)` (V is an outlier in the
context — a validity-only question, free under OCDP because it is a function of COE(D, V)) and
`utility(mask)` (only ever used inside an exponential-mechanism call, each counted in the
trace). Costs, with ε1 per EM call (2ε1 in the paper's general accounting):

- direct (Alg. 1): one EM over COE(D, V)                       → ε1
- uniform (Alg. 2): uniform admissible draws until n valid; EM  → ε1
- random-walk (Alg. 3): validity-only walk of n samples; EM     → ε1
- dfs (Alg. 4): EM picks each child to push (≤ n), final EM     → (n+1)ε1
- bfs (Alg. 5): EM picks each node to expand (≤ n), final EM    → (n+1)ε1
- explore (DESIGN.md §7): validity-only exploration; one EM      → ε1

Proof sketch for dfs/bfs: the output is a post-processing of the sequence of EM outcomes;
every step's candidate set is determined by earlier outcomes and COE alone (equal on OCDP
neighbours), so by adaptive sequential composition the sequence is (calls·ε1)-DP, calls ≤ n+1.
For uniform, random-walk and explore the sample is drawn from a law that depends on COE alone,
so the single EM over it costs ε1 for every fixed sample, hence for the mixture.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from pcor_sql.core import neighbour_rows
from pcor_sql.core.exploration import collect, random_descents
from pcor_sql.core.frontier import Frontier
from pcor_sql.core.mechanism import EMCall, exponential_mechanism
from pcor_sql.core.randomness import Source
from pcor_sql.core.space import ContextSpace
from pcor_sql.core.start import DEFAULT_DESCENTS
from pcor_sql.core.work import spend
from pcor_sql.errors import InternalError, NoValidContext, UserError, option_hint, option_name

DEFAULT_SAMPLES = 50
DEFAULT_MAX_DRAWS = 100_000
#: explore's own n (valid contexts collected) and its cap on distinct contexts checked.
DEFAULT_EXPLORE_SAMPLES = 10_000
DEFAULT_EXPLORE_CHECKS = 4_000
#: The most admissible contexts `direct` (and the owner's COE) will enumerate unless told otherwise.
DEFAULT_MAX_ADMISSIBLE = 1 << 23


class Oracle(Protocol):
    space: ContextSpace

    def is_valid(self, mask: int) -> bool: ...

    def utility(self, mask: int) -> float: ...

    def coe(
        self, max_admissible: int, progress: Callable[[int, int], None] | None = None
    ) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class Trace:
    """What a search did: for tests and the owner view (never released)."""

    visited: list[int] = field(default_factory=list)
    em_calls: list[EMCall] = field(default_factory=list)
    validity_checks: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def n_em_calls(self) -> int:
        return len(self.em_calls)


@dataclass(frozen=True)
class SearchResult:
    mask: int
    trace: Trace


def _em(
    oracle: Oracle,
    candidates: Sequence[int],
    eps1: float,
    source: Source,
    trace: Trace,
    step: str,
    utilities: Sequence[float] | None = None,
) -> int:
    if utilities is None:
        utilities = [oracle.utility(c) for c in candidates]
    trace.em_calls.append(EMCall(step, len(candidates)))
    chosen = candidates[exponential_mechanism(utilities, eps1, source)]
    tick = getattr(_em_ticks, "tick", None)
    if tick is not None:
        tick(len(trace.em_calls))
    return chosen


#: Per thread (a service's workers search side by side): who hears each EM call of a search.
_em_ticks = threading.local()


@contextmanager
def em_ticks(tick: Callable[[int], None]) -> Iterator[None]:
    """Within the block, `tick(n)` after this thread's searches make their n-th EM call: the
    search's progress, counted in the EM calls its accounting bounds (a search's coins and
    outputs are the same with or without it)."""
    previous = getattr(_em_ticks, "tick", None)
    _em_ticks.tick = tick
    try:
        yield
    finally:
        _em_ticks.tick = previous


def _valid(oracle: Oracle, mask: int, trace: Trace) -> bool:
    trace.validity_checks += 1
    return oracle.is_valid(mask)


def _valid_many(oracle: Oracle, masks: list[int], trace: Trace) -> list[bool]:
    """`_valid` of each of `masks`, in order: through the oracle's `valid_many` where it has one
    (one compiled call for the contexts it has not answered: `Evaluator.valid_many`), the same
    answers as one `is_valid` after the other."""
    trace.validity_checks += len(masks)
    many = getattr(oracle, "valid_many", None)
    if many is None or not masks:
        return [oracle.is_valid(m) for m in masks]
    return many(masks)


def direct(
    oracle: Oracle,
    eps1: float,
    source: Source,
    *,
    max_admissible: int,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Algorithm 1: enumerate every admissible context, EM over COE(D, V). Cost ε1 (tight)."""
    trace = Trace()
    masks, utilities = oracle.coe(max_admissible, progress)
    trace.validity_checks = oracle.space.n_admissible
    if len(masks) == 0:
        raise NoValidContext(
            "the record is an outlier in no context over these attributes",
            f"try another verifier, other attributes ({option_name('by')}) or looser verifier options",
        )
    trace.em_calls.append(EMCall("final", len(masks)))
    pick = exponential_mechanism(utilities, eps1, source)
    trace.visited = [int(m) for m in masks] if len(masks) <= 10_000 else []
    return SearchResult(int(masks[pick]), trace)


def uniform(oracle: Oracle, eps1: float, source: Source, *, samples: int = DEFAULT_SAMPLES,
            max_draws: int = DEFAULT_MAX_DRAWS) -> SearchResult:
    """Algorithm 2: draw admissible contexts uniformly (each free bit w.p. 1/2, each ordinal
    attribute's run uniformly: `ContextSpace.random_admissible`) until `samples`
    distinct valid ones are found or `max_draws` draws are spent, then one EM. Cost ε1."""
    space = oracle.space
    trace = Trace()
    key = space.key  # bytes past 60 bits (`ContextSpace.key`)
    found: dict[int | bytes, int] = {}
    draws = 0
    batched = getattr(oracle, "valid_many", None) is not None and not space.ordinal
    chunk = _FIRST_CHUNK
    while len(found) < samples and draws < max_draws:
        if batched:
            draws, chunk = _uniform_chunk(oracle, source, trace, found, samples, draws, min(chunk, max_draws - draws))
            continue
        draws += 1
        spend()  # a draw that repeats a found context asks nothing, yet is work (`core.work`)
        mask = space.random_admissible(source)
        k = key(mask)
        if k not in found and _valid(oracle, mask, trace):
            found[k] = mask
    if len(found) < samples:
        trace.notes.append(f"uniform sampling ran out of draws: {len(found)} of {samples} valid contexts in {draws} draws")
    if not found:
        raise NoValidContext(
            f"uniform sampling found no valid context in {draws} draws",
            f"use {option_hint('search', 'bfs')} (it walks from a valid start) or raise "
            f"{option_hint('max_draws', str(max_draws * 10))}",
        )
    return _final_em(oracle, list(found.values()), eps1, source, trace)


_FIRST_CHUNK, _MOST_CHUNK = 64, 4096  # uniform's draws per batch: doubling, so few are drawn past the last used


def _uniform_chunk(oracle: Oracle, source: Source, trace: Trace, found: dict[int | bytes, int], samples: int,
                   draws: int, count: int) -> tuple[int, int]:
    """`count` of uniform's draws at once (`ContextSpace.random_admissible_many`), their new
    contexts checked in one batch (`Oracle.valid_many`), then taken in order exactly as the loop
    takes one draw at a time — up to the draw that completes `samples` — so `found`, the trace
    and the draws counted are the loop's. The coins of the draws past that one are given back:
    a seeded generator's state is restored and only the draws used are drawn again, so the coins
    after the search (the final EM's) are the ones the loop leaves; the secure source has no
    state and its unused coins are simply not used. The batch may check a few contexts the loop
    would not have drawn: validity only, free under OCDP, and each is work (`core.work`).
    (draws so far, the next batch's size.)"""
    space, key = oracle.space, oracle.space.key
    saved = getattr(getattr(source, "bit_generator", None), "state", None)
    masks = space.random_admissible_many(source, count)
    keys = [key(m) for m in masks]
    ask = {k: m for k, m in zip(keys, masks) if k not in found}
    # The keys are at hand: `valid_keyed` (`Evaluator`) answers as `valid_many` without making them again.
    keyed = getattr(oracle, "valid_keyed", None)
    answers = (keyed(list(ask.values()), list(ask)) if keyed is not None else
               oracle.valid_many(list(ask.values()))) if ask else []  # type: ignore[attr-defined]
    verdicts = dict(zip(ask, answers))
    used = 0
    for mask, k in zip(masks, keys):
        used += 1
        spend()  # a draw that repeats a found context asks nothing, yet is work (`core.work`)
        if k not in found:
            trace.validity_checks += 1
            if verdicts[k]:
                found[k] = mask
                if len(found) >= samples:
                    break
    if used < count and saved is not None:
        source.bit_generator.state = saved  # type: ignore[union-attr]
        space.random_admissible_many(source, used)
    return draws + used, min(2 * count, _MOST_CHUNK, max(1, (1 << 24) // max(space.t, 1)))


def random_walk(oracle: Oracle, eps1: float, source: Source, start: int, *, samples: int = DEFAULT_SAMPLES) -> SearchResult:
    """Algorithm 3: from C_V, try uniformly random untried neighbours; move to the first valid
    one and record it (a multiset C_M); stop at `samples` or when stuck; one EM over C_M.
    Cost ε1: the walk reads validity only."""
    trace = Trace()
    path = [start]
    current = start
    untried = oracle.space.neighbours(current)
    while len(path) < samples and untried:
        nxt = untried.pop(int(source.integers(0, len(untried))))
        if _valid(oracle, nxt, trace):
            path.append(nxt)
            current = nxt
            untried = oracle.space.neighbours(current)
    if len(path) < samples:
        trace.notes.append(f"random walk stuck after {len(path)} of {samples} samples")
    return _final_em(oracle, path, eps1, source, trace)


def dfs(oracle: Oracle, eps1: float, source: Source, start: int, *, samples: int = DEFAULT_SAMPLES) -> SearchResult:
    """Algorithm 4: EM over the valid unvisited children of the stack top picks the child to
    push; a top without such children is popped; stop when `samples` contexts are visited;
    final EM over the visited set. Cost ≤ (n+1)ε1."""
    trace = Trace()
    key = oracle.space.key  # bytes past 60 bits (`ContextSpace.key`)
    visited: dict[int | bytes, int] = {}
    stack = [start]
    while len(visited) < samples and stack:
        top = stack[-1]
        visited[key(top)] = top
        fresh = [c for c in oracle.space.neighbours(top) if key(c) not in visited]
        children = [c for c, ok in zip(fresh, _valid_many(oracle, fresh, trace)) if ok]
        if not children:
            stack.pop()
        else:
            stack.append(_em(oracle, children, eps1, source, trace, "push"))
    return _final(oracle, "dfs", dict.fromkeys(visited.values()), samples, eps1, source, trace)


def bfs(
    oracle: Oracle,
    eps1: float,
    source: Source,
    start: int,
    *,
    samples: int = DEFAULT_SAMPLES,
    descents: int = 0,
) -> SearchResult:
    """Algorithm 5: the frontier C_M starts as {C_V}; EM over C_M picks the node to expand, its
    valid unvisited neighbours join C_M; stop when `samples` nodes are visited; final EM over
    the visited set. Cost ≤ (n+1)ε1.

    With `descents` > 0, C_M also starts with the valid contexts found by that many
    validity-only random descents from the full context (`exploration.random_descents`). Their law
    depends on COE(D, V) only, so the cost is unchanged: for each fixed starting frontier the
    run is (n+1)ε1-OCDP, and so is the mixture. `descents=0` is the paper's algorithm."""
    trace = Trace()
    key = oracle.space.key  # contexts are keyed by `ContextSpace.key` (bytes past 60 bits)
    visited: dict[int | bytes, int] = {}
    starts = [start]
    if descents:
        starts += random_descents(oracle, source, descents)
    # The frontier C_M, with each member's utility read once when it joins (joining order keeps
    # the candidate order, hence seeded runs, deterministic: `core.frontier`).
    frontier = Frontier()
    # A wide space's neighbours are built as word rows with their keys (`core.neighbour_rows`);
    # a narrower one's one by one, asked with their keys where the oracle takes them.
    keyed_valid = getattr(oracle, "valid_keyed", None)
    by_rows = keyed_valid is not None and neighbour_rows.pays(oracle.space)
    keyed = getattr(oracle, "utilities_keyed", None)
    utilities_of = ((lambda ck: keyed([c for c, _ in ck], [k for _, k in ck])) if keyed is not None
                    else (lambda ck: [oracle.utility(c) for c, _ in ck]))
    for c in starts:  # a repeated start keeps its first place
        frontier.add(key(c), c, oracle.utility(c))
    while len(visited) < samples and frontier:
        members, utilities = frontier.members()
        node = _em(oracle, members, eps1, source, trace, "expand", utilities)
        k = key(node)
        frontier.remove(k)
        visited[k] = node
        # The neighbours not met yet, asked in one batch (`_valid_many`), in the order they were
        # asked one by one (a neighbour joins the frontier only from this loop, at most once).
        if by_rows:
            fresh, verdicts = neighbour_rows.fresh_neighbours(oracle, node, visited, frontier)
            trace.validity_checks += len(fresh)
        else:
            fresh = [(c, kc) for c in oracle.space.neighbours(node) if (kc := key(c)) not in visited and kc not in frontier]
            if keyed_valid is not None and fresh:
                trace.validity_checks += len(fresh)
                verdicts = keyed_valid([c for c, _ in fresh], [k for _, k in fresh])
            else:
                verdicts = _valid_many(oracle, [c for c, _ in fresh], trace)
        joined = [ck for ck, ok in zip(fresh, verdicts) if ok]
        frontier.add_many([k for _, k in joined], [c for c, _ in joined], utilities_of(joined))
    return _final(oracle, "bfs", dict.fromkeys(visited.values()), samples, eps1, source, trace)


def _final_em(oracle: Oracle, sample: list[int], eps1: float, source: Source, trace: Trace) -> SearchResult:
    """The final EM of every search but `direct`, over what it sampled or visited (`sample`,
    kept as the trace's visited list): each search's cost counts this call."""
    trace.visited = sample
    return SearchResult(_em(oracle, sample, eps1, source, trace, "final"), trace)


def _final(oracle: Oracle, search: str, visited: dict[int, None], samples: int, eps1: float, source: Source,
           trace: Trace) -> SearchResult:
    """The final EM over the visited set, noting when the walk ran out of contexts first."""
    if len(visited) < samples:
        trace.notes.append(f"{search} exhausted the reachable valid contexts after {len(visited)} of {samples} samples")
    return _final_em(oracle, list(visited), eps1, source, trace)


def explore(oracle: Oracle, eps1: float, source: Source, *, samples: int = DEFAULT_EXPLORE_SAMPLES,
            max_checks: int = DEFAULT_EXPLORE_CHECKS) -> SearchResult:
    """Beyond the paper (DESIGN.md §7): explore the lattice by validity alone — random descents
    from the full context, climbs back up to the largest valid contexts around them, the whole
    lattice largest first when it fits the budget (`core.exploration.collect`) — collecting up
    to `samples` valid contexts while checking at most `max_checks` distinct contexts, then
    spend the whole budget on one EM over what was collected. Cost: ε1 (tight, monotone utility) or 2ε1 (paper); so the
    request's ε buys ε1 = ε or ε/2.

    Proof sketch. Let S be the collected set. `collect` reads only validity answers and coins
    drawn from `source` independently of the data, and stops on counts (valid contexts found,
    contexts checked) and validity answers (descents meeting known tops), functions of its own
    path: S is a random variable whose law is
    a function of COE(D, V) and the coins alone — the same law on OCDP neighbours D, D'
    (they share COE(·, V)). For each fixed s, EM_ε1 over s with a utility of sensitivity 1
    gives Pr[c | D, s] ≤ e^{ε1}·Pr[c | D', s] for a monotone utility (e^{2ε1} in general;
    `mechanism`). Mixing over the common law of S: Pr[c | D] = Σ_s Pr[S = s]·Pr[c | D, s]
    ≤ e^{ε1}·Σ_s Pr[S = s]·Pr[c | D', s] = e^{ε1}·Pr[c | D']. When the budget covers every
    admissible context and `samples` ≥ |COE(D, V)|, S = COE(D, V) and the output law is
    exactly `direct`'s.

    No wall-clock cap, on purpose: a time limit would make S depend on how long each check
    takes, and that depends on the data (population sizes, how far LOF's window has to grow,
    caches), not on COE alone — a timing channel into the released context that the proof
    above does not cover. The count `max_checks` bounds the time instead: at most that many
    verifications, each bounded by the verifier's cost on the largest population.
    OCDP protects nothing that COE itself reveals, and where neighbours' COEs differ the
    argument above does not apply: then one changed verdict on the exploration's path can
    change what it collects — whether the best context is among the candidates — and with the
    whole ε on the final EM the release can differ far more than `direct`'s (BENCHMARKS.md,
    §6.7 for explore, reduced salaries table: e^60 and more where direct stays within
    e^(ΔD·ε) for small ΔD; BFS, path-dependent too but with ε1 = ε/51, reaches e^2–e^7).
    DESIGN.md §7."""
    trace = Trace()
    found = collect(oracle, source, samples=samples, max_checks=max_checks)
    trace.validity_checks = len(found.checked)
    if found.stopped == "max_checks":
        trace.notes.append(f"explore checked its cap of {max_checks:,} contexts; {len(found.valid):,} valid collected")
    if not found.valid:
        raise NoValidContext(
            f"the record is an outlier in none of the {len(found.checked):,} contexts explored",
            "try another verifier or options, other attributes (--by), or raise max_checks",
        )
    return _final_em(oracle, list(found.valid), eps1, source, trace)
