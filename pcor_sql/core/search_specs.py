"""The searches as declared mechanisms (OpenDP's habit: each states its privacy map) and the
options each reads, declared once (`core.option_spec`): a new search option is a spec here,
next to the search that reads it, and the search's code in `core.searches` — nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pcor_sql.core.option_spec import Kind, OptionSpec, StrEnum, Who
from pcor_sql.core.randomness import Source
from pcor_sql.core.searches import (
    DEFAULT_EXPLORE_CHECKS, DEFAULT_EXPLORE_SAMPLES, DEFAULT_MAX_ADMISSIBLE, DEFAULT_MAX_DRAWS, DEFAULT_SAMPLES, Oracle,
    SearchResult, bfs, dfs, direct, em_ticks, explore, random_walk, uniform,
)
from pcor_sql.core.start import DEFAULT_DESCENTS
from pcor_sql.errors import InternalError, UserError


class SearchName(StrEnum):
    """The searches, in the order help and tables list them."""

    DIRECT = "direct"
    UNIFORM = "uniform"
    RANDOM_WALK = "random-walk"
    DFS = "dfs"
    BFS = "bfs"
    EXPLORE = "explore"


# ---- the options searches read, each declared once (core.option_spec) ---------------------

# Their bounds (DESIGN.md §8 "Bounded work"): far above any useful value, low enough that no
# loop a search runs is unbounded. A service also caps each request's work (`core.work`).
MAX_SAMPLES = 1_000_000
MAX_DESCENTS = 100_000
MAX_EXPLORE_CHECKS = 100_000_000
MAX_DRAWS_BOUND = 1_000_000_000
#: `direct` and `coe` refuse past 2^40 admissible contexts whatever the option says.
MAX_ENUMERATION = 1 << 40

#: n: read by every search but direct; its default is the search's own (`SearchSpec.default_samples`).
SAMPLES = OptionSpec(
    "samples", Kind.INTEGER, None,
    f"samples n of the search (default: the search's own — {DEFAULT_SAMPLES}; explore: "
    f"{DEFAULT_EXPLORE_SAMPLES:,} valid contexts)", "50", minimum=1, maximum=MAX_SAMPLES, in_result=True,
)
DESCENTS = OptionSpec(
    "descents", Kind.INTEGER, DEFAULT_DESCENTS,
    "bfs: validity-only random descents from the full context that seed the frontier "
    "(free under OCDP; 0 = the paper's Algorithm 5)", "24", minimum=0, maximum=MAX_DESCENTS, searches=(SearchName.BFS,), in_result=True,
)
MAX_CHECKS = OptionSpec(
    "max_checks", Kind.INTEGER, DEFAULT_EXPLORE_CHECKS,
    "explore: the most contexts it verifies (a count, never a time limit: see the search's documentation)",
    "2000", minimum=1, maximum=MAX_EXPLORE_CHECKS, searches=(SearchName.EXPLORE,),
)
MAX_CONTEXTS = OptionSpec(
    "max_contexts", Kind.INTEGER, DEFAULT_MAX_ADMISSIBLE,
    f"refuse to enumerate more admissible contexts than this (direct search, coe). Default {DEFAULT_MAX_ADMISSIBLE:,}",
    "1000", who=Who.OWNER, minimum=1, maximum=MAX_ENUMERATION, sql=None, searches=(SearchName.DIRECT,), nullable=True,
)
MAX_DRAWS = OptionSpec(
    "max_draws", Kind.INTEGER, DEFAULT_MAX_DRAWS,
    "uniform: the most admissible contexts it draws before it stops looking for n valid ones (a count: "
    "the draws read validity only, so the cap is free under OCDP)", "100000", minimum=1,
    maximum=MAX_DRAWS_BOUND, searches=(SearchName.UNIFORM,),
)


@dataclass(frozen=True)
class SearchSpec:
    """A search and its privacy map (OpenDP's habit: the mechanism declares its own cost).

    `worst_case_em_calls(n)` bounds the EM calls a run with n samples makes; the accounting
    (`core.accounting`) multiplies it by the cost of one call under its rule, and a release
    checks the actual count against it. `graph` searches start from a valid context C_V.
    `options` declares the request options the search reads besides ε: their specs generate
    the flags, statement options, allow-lists and hints, and the run reads them by name."""

    name: SearchName
    algorithm: str
    summary: str
    run: Callable[..., SearchResult] = field(repr=False)
    em_calls_per_sample: int = 0
    graph: bool = False
    options: tuple[OptionSpec, ...] = ()
    default_samples: int = DEFAULT_SAMPLES

    def worst_case_em_calls(self, samples: int) -> int:
        return self.em_calls_per_sample * samples + 1


def _run_direct(oracle: Oracle, eps1: float, source: Source, start: int | None, **opts) -> SearchResult:
    limit = opts.get("max_contexts", MAX_CONTEXTS.default)
    return direct(oracle, eps1, source, max_admissible=limit if limit is not None else 1 << 64,
                  progress=opts.get("progress"))


def _run_uniform(oracle: Oracle, eps1: float, source: Source, start: int | None, **opts) -> SearchResult:
    return uniform(oracle, eps1, source, samples=opts.get("samples", DEFAULT_SAMPLES),
                   max_draws=opts.get("max_draws", MAX_DRAWS.default))


def _run_walk(oracle: Oracle, eps1: float, source: Source, start: int, **opts) -> SearchResult:
    return random_walk(oracle, eps1, source, start, samples=opts.get("samples", DEFAULT_SAMPLES))


def _run_dfs(oracle: Oracle, eps1: float, source: Source, start: int, **opts) -> SearchResult:
    return dfs(oracle, eps1, source, start, samples=opts.get("samples", DEFAULT_SAMPLES))


def _run_explore(oracle: Oracle, eps1: float, source: Source, start: int | None, **opts) -> SearchResult:
    return explore(oracle, eps1, source, samples=opts.get("samples", DEFAULT_EXPLORE_SAMPLES),
                   max_checks=opts.get("max_checks", MAX_CHECKS.default))


def _run_bfs(oracle: Oracle, eps1: float, source: Source, start: int, **opts) -> SearchResult:
    return bfs(oracle, eps1, source, start, samples=opts.get("samples", DEFAULT_SAMPLES),
               descents=opts.get("descents", DESCENTS.default))


#: Every search by name, in the order help and tables list them.
SEARCH_SPECS: dict[str, SearchSpec] = {
    s.name: s
    for s in (
        SearchSpec(SearchName.DIRECT, "Alg. 1", "EM over all of COE(D, V)", _run_direct, options=(MAX_CONTEXTS,)),
        SearchSpec(SearchName.UNIFORM, "Alg. 2", "uniform admissible draws until n valid, EM", _run_uniform,
                   options=(SAMPLES, MAX_DRAWS)),
        SearchSpec(SearchName.RANDOM_WALK, "Alg. 3", "validity-only walk, EM over the path", _run_walk, graph=True,
                   options=(SAMPLES,)),
        SearchSpec(SearchName.DFS, "Alg. 4", "EM picks each child; final EM", _run_dfs, em_calls_per_sample=1,
                   graph=True, options=(SAMPLES,)),
        SearchSpec(SearchName.BFS, "Alg. 5", "EM picks each node to expand; final EM", _run_bfs, em_calls_per_sample=1,
                   graph=True, options=(SAMPLES, DESCENTS)),
        SearchSpec(SearchName.EXPLORE, "DESIGN §7", "validity-only descents and climbs to the top of COE; one EM",
                   _run_explore, options=(SAMPLES, MAX_CHECKS), default_samples=DEFAULT_EXPLORE_SAMPLES),
    )
}


def search_option_specs() -> dict[str, OptionSpec]:
    """Every option some search reads, by name, in declaration order (samples first)."""
    out: dict[str, OptionSpec] = {}
    for spec in SEARCH_SPECS.values():
        for option in spec.options:
            out.setdefault(option.name, option)
    return {"samples": SAMPLES, **{k: v for k, v in out.items() if k != "samples"}}


def search_spec(name: str) -> SearchSpec:
    """The declared search `name`, or a UserError listing the known ones."""
    spec = SEARCH_SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise UserError(f"unknown search {name!r}", f"use one of: {', '.join(SEARCH_SPECS)}")
    return spec


def run_search(
    name: str,
    oracle: Oracle,
    eps1: float,
    source: Source,
    *,
    start: int | None,
    progress: Callable[[int, int], None] | None = None,
    **options: int,
) -> SearchResult:
    """Run the declared search `name` with its options by name (each search reads the options it
    declares and ignores the others, so a request passes its search options through unchanged).
    Graph searches need an admissible `start`."""
    spec = search_spec(name)
    if spec.graph and (start is None or not oracle.space.is_admissible(start)):
        raise InternalError("graph search started without an admissible start context")
    if progress is None or name == "direct":  # direct reports its own enumeration
        return spec.run(oracle, eps1, source, start, progress=progress, **options)
    # Every other search ticks once per EM call, out of the most its accounting allows.
    total = spec.worst_case_em_calls(int(options.get("samples") or spec.default_samples))
    progress(0, total)
    with em_ticks(lambda n: progress(min(n, total), total)):
        result = spec.run(oracle, eps1, source, start, progress=progress, **options)
    progress(total, total)
    return result
