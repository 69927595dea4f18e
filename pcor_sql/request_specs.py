"""The request-wide options of each job, declared once (`core.option_spec.OptionSpec`).

A search's own options (samples, descents, max_checks, max_contexts, max_draws) are declared
by the search in `core.searches`; `explain_specs()` lists both. The requests, the statements'
`WITH (...)` lists, the CLI flags, the analyst's allow-list and the error hints all read these.
"""

from __future__ import annotations

from pcor_sql.anomaly.mechanisms import NORMS, PRIVACY_MODES
from pcor_sql.core.accounting import ACCOUNTINGS
# parse_choice: the one spelling rule of a fixed-value option, also for the CLI's own flags (`--format`).
from pcor_sql.core.option_spec import Kind, OptionSpec, StrEnum, Who, one_of, parse_choice  # noqa: F401
from pcor_sql.core.search_specs import SEARCH_SPECS, search_option_specs
from pcor_sql.core.verifiers.builtins import builtin_list
from pcor_sql.core.choices import Utility


UTILITIES = Utility.names()

# The bounds of the request-wide numbers (DESIGN.md §8 "Bounded work"). ε beyond 1,000 is e^1000
# times any likelihood ratio: no privacy left to buy. β and k count records (a table of 10^15
# rows is beyond any engine's reach); a radius is a distance in the metric's own units, bounded
# so that r and every coordinate ± r stay finite doubles. A seed is a 64-bit word.
MAX_EPSILON = 1_000.0
MAX_BETA = 1e15
MAX_RADIUS = 1e300
MAX_SEED = 2**64 - 1
#: Utilities for which adding a row never lowers the utility (so `tight` accounting holds).
MONOTONE_UTILITIES = frozenset(UTILITIES)


class Job(StrEnum):
    """What a request asks for: a release (EXPLAIN OUTLIER) or an anomaly answer (IDENTIFY ANOMALY)."""

    EXPLAIN = "explain"
    IDENTIFY = "identify"


BY = OptionSpec("by", Kind.STRUCTURED, None, "context attributes (default: the ENUM / declared-domain columns)",
                "a, b", sql="BY")
DOMAINS = OptionSpec("domains", Kind.STRUCTURED, None, "declared domains: attribute → values",
                     "a IN ('x', 'y')", who=Who.OWNER, sql="DOMAIN", cli="--domain")
BINS = OptionSpec("bins", Kind.STRUCTURED, None,
                  "ordinal attributes: attribute → bin edges, e.g. {'age': [18, 25, 35, 45, 55, 65, 81]} "
                  "(or 'auto:5': quantile bins from the data, with a privacy warning)",
                  "age BINS (18, 25, 35, 45, 55, 65, 81)", who=Who.OWNER, sql="DOMAIN", cli="--bins")
VERIFIER = OptionSpec("verifier", Kind.STRUCTURED, "lof", f"outlier test: {builtin_list()}, with options",
                      "lof(k=20)", sql="USING")
EPSILON_RELEASE = OptionSpec("epsilon", Kind.NUMBER, 0.2, "total privacy cost ε of each release (> 0)", "0.2",
                             minimum=0.0, minimum_inclusive=False, maximum=MAX_EPSILON)
SEARCH = OptionSpec("search", Kind.STRING, "bfs", one_of(tuple(SEARCH_SPECS)), "'bfs'",
                    choices=tuple(SEARCH_SPECS))
UTILITY = OptionSpec("utility", Kind.STRING, "population", "utility of a context: population or overlap",
                     "'population'", choices=UTILITIES)
START = OptionSpec("start", Kind.STRING, None, "starting context (default: found by a validity-only search)",
                   "'job_title IN (''Nurse'') AND year = 2019'")
ACCOUNTING = OptionSpec("accounting", Kind.STRING, "tight",
                        "tight (monotone utility) or paper (the paper's 2ε1 rules)", "'tight'", choices=ACCOUNTINGS)
SEED = OptionSpec("seed", Kind.INTEGER, None, "reproducible randomness; labelled not for real releases", "7",
                  who=Who.OWNER, minimum=0, maximum=MAX_SEED)
DATASET = OptionSpec("dataset", Kind.STRING, None, "budget ledger name to charge", "'salaries'", who=Who.OWNER)
OWNER_VIEW = OptionSpec("owner_view", Kind.BOOLEAN, False, "also return the owner's private diagnostics", "TRUE",
                        who=Who.OWNER)

BETA = OptionSpec("beta", Kind.NUMBER, None, "β: an anomaly has at most β records within the radius, itself included", "5",
                  minimum=1.0, maximum=MAX_BETA)
RADIUS = OptionSpec("radius", Kind.NUMBER, None, "r: the ball radius", "1000", minimum=0.0, maximum=MAX_RADIUS)
EPSILON_ANSWER = OptionSpec("epsilon", Kind.NUMBER, None, "privacy cost ε of each answer (> 0)", "0.5", minimum=0.0,
                            minimum_inclusive=False, maximum=MAX_EPSILON)
PRIVACY = OptionSpec("privacy", Kind.STRING, "sp", "sp: (ε, k)-sensitive privacy; dp: ε-differential privacy",
                     "'sp'", choices=PRIVACY_MODES)
K = OptionSpec("k", Kind.INTEGER, 1, "k of (ε, k)-sensitive privacy, 1 ≤ k ≤ β + 1", "1", minimum=1, maximum=MAX_BETA + 1)
NORM = OptionSpec("norm", Kind.STRING, "l2", "l1, l2 or linf, for several columns", "'l2'", choices=NORMS)


def explain_specs() -> dict[str, OptionSpec]:
    """Every option of a release, request-wide ones first, then the searches' own."""
    searches = search_option_specs()
    ordered = (BY, DOMAINS, BINS, VERIFIER, EPSILON_RELEASE, SEARCH, searches["samples"], UTILITY, START, ACCOUNTING, SEED,
               DATASET, OWNER_VIEW, *searches.values())
    return {s.name: s for s in ordered}


def identify_specs() -> dict[str, OptionSpec]:
    """Every option of an anomaly answer."""
    return {s.name: s for s in (BETA, RADIUS, EPSILON_ANSWER, PRIVACY, K, NORM, SEED, DATASET, OWNER_VIEW)}


def specs_for(job: Job) -> dict[str, OptionSpec]:
    return explain_specs() if job is Job.EXPLAIN else identify_specs()


def analyst_options(job: Job) -> frozenset[str]:
    """The options an analyst may set on `job` (generated: who = ANALYST)."""
    return frozenset(name for name, spec in specs_for(job).items() if spec.who is Who.ANALYST)


def owner_options(job: Job) -> frozenset[str]:
    """The options only the owner may set on `job`."""
    return frozenset(name for name, spec in specs_for(job).items() if spec.who is Who.OWNER)


def statement_specs(job: Job) -> tuple[OptionSpec, ...]:
    """The `WITH (...)` options of `job`'s statement."""
    return tuple(s for s in specs_for(job).values() if s.sql == "with")
