"""The closed sets of names that change behaviour, as enums (they still compare, print and
serialise as their text, so outputs and ledgers keep their strings)."""

from __future__ import annotations

from pcor_sql.core.option_spec import StrEnum


class Utility(StrEnum):
    """A context's utility (sensitivity 1; both monotone: adding a row never lowers either)."""

    POPULATION, OVERLAP = "population", "overlap"


class Privacy(StrEnum):
    """The notion of an anomaly answer: (ε, k)-sensitive privacy or ε-differential privacy."""

    SP, DP = "sp", "dp"


class Notion(StrEnum):
    """The ledger's privacy notions, never added together (DESIGN.md §6)."""

    OCDP, DP, SP = "ocdp", "dp", "sp"


class Engine(StrEnum):
    """Where rows are read: embedded DuckDB, or Spark (`pcor_sql.backends`)."""

    DUCKDB, SPARK = "duckdb", "spark"
