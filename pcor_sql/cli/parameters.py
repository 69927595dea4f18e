"""Options several commands share, and turning their text into the library's arguments."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer

from pcor_sql.core.searches import DEFAULT_MAX_ADMISSIBLE
from pcor_sql.errors import UserError


class ExplainFormat(str, Enum):
    table = "table"
    json = "json"
    sql = "sql"


class CoeFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class DataFormat(str, Enum):
    table = "table"
    json = "json"


class ExportFormat(str, Enum):
    parquet = "parquet"
    duckdb = "duckdb"


class EngineName(str, Enum):
    duckdb = "duckdb"
    spark = "spark"


Db = Annotated[
    Optional[Path],
    typer.Option(
        "--db", metavar="PATH",
        help="DuckDB database file to use (must exist; a read-only file refuses releases). "
        "Default: an in-memory database with the bundled datasets loaded.",
    ),
]
Engine = Annotated[
    EngineName,
    typer.Option(
        "--engine",
        help="Where the rows are read: duckdb (embedded) or spark (the relation names Spark tables or "
        "paths such as parquet.`/data/t`; only summaries and windows leave the cluster; the budget "
        "ledger is --ledger, $PCOR_SQL_LEDGER or the per-user file). Spark needs pip install 'pcor-sql[spark]' and Java.",
    ),
]
SparkMaster = Annotated[
    str, typer.Option("--spark-master", metavar="URL", help="Spark master for --engine spark, e.g. spark://host:7077.")
]
Ledger = Annotated[
    Optional[str],
    typer.Option(
        "--ledger", metavar="PATH",
        help="Budget ledger file when the data is not a --db file (made if missing; ':memory:' "
        "keeps it in memory, with a warning). Default: $PCOR_SQL_LEDGER, else the per-user "
        "ledger ~/.local/share/pcor-sql/ledger.duckdb.",
    ),
]
AllowSeeded = Annotated[
    bool,
    typer.Option(
        "--allow-seeded",
        help="Allow --seed with a persistent ledger (owner's testing only: a seeded output is a "
        "deterministic function of the data, recorded as not private).",
    ),
]
Notion = Annotated[
    str,
    typer.Option("--notion", help="Privacy notion: ocdp (PCOR releases), dp or sp (anomaly answers), or all."),
]
By = Annotated[
    Optional[str],
    typer.Option(
        "--by", metavar="A,B,C",
        help="Context attributes, comma-separated (quote odd names: '\"job, title\"'). "
        "Default: the ENUM / declared-domain columns.",
    ),
]
Domain = Annotated[
    Optional[List[str]],
    typer.Option(
        "--domain", metavar="ATTR=V1|V2",
        help="Declare an attribute's domain, e.g. 'job_title=Nurse|Professor' (repeatable; "
        "quote values holding | ; = in single quotes). Undeclared non-ENUM attributes take the "
        "values present in the data, with a warning.",
    ),
]
Verifier = Annotated[
    str,
    typer.Option(
        "--verifier", metavar="SPEC",
        help="Outlier test: grubbs, histogram, lof or zscore, with options, e.g. 'lof(k=10, threshold=2)'.",
    ),
]
SearchOption = Annotated[
    Optional[List[str]],
    typer.Option(
        "--search-option", metavar="NAME=VALUE",
        help="Any release option by name, e.g. descents=0 (repeatable; values as in WITH (...)).",
    ),
]
VerifierOption = Annotated[
    Optional[List[str]],
    typer.Option("--verifier-option", metavar="NAME=VALUE", help="One verifier option, e.g. k=10 (repeatable)."),
]
Utility = Annotated[str, typer.Option("--utility", help="Utility of a context: population or overlap.")]
Start = Annotated[
    Optional[str],
    typer.Option(
        "--start", metavar="PREDICATE",
        help="Starting context, e.g. \"job_title IN ('Nurse') AND year = '2019'\" (omitted attributes: whole domain). "
        "Default: found by a validity-only search.",
    ),
]
MaxContexts = Annotated[
    Optional[int],
    typer.Option(
        "--max-contexts", metavar="N",
        help=f"Refuse to enumerate more admissible contexts than N (direct search, coe). Default {DEFAULT_MAX_ADMISSIBLE:,}.",
    ),
]
Seed = Annotated[
    Optional[int],
    typer.Option(
        "--seed", help="Reproducible randomness for tests and benchmarks; output is labelled not for real releases."
    ),
]
OwnerView = Annotated[
    bool,
    typer.Option("--owner-view", help="Also show the owner's private diagnostics, marked NOT FOR RELEASE."),
]
Dataset = Annotated[
    Optional[str],
    typer.Option("--dataset", help="Label the release with a registered dataset's name (charges still go to "
                 "the tables and files the query reads)."),
]


def outlier_options(
    *,
    domain: list[str] | None,
    verifier: str,
    verifier_option: list[str] | None,
    max_contexts: int | None,
    search_option: list[str] | None = None,
    **flags: Any,
) -> dict[str, Any]:
    """The flags a command was given, as `outlier_request` options (flags left unset are left
    out, so the request's own defaults apply). `--search-option NAME=VALUE` sets any request
    option by name, so a search's new option needs no flag of its own."""
    options = {name: value for name, value in flags.items() if value is not None}
    options.update(named_values(search_option, "--search-option"))  # it wins over a flag's default
    if domain:
        options["domains"] = domains(domain)
    options["verifier"], options["verifier_options"] = verifier_args(verifier, verifier_option)
    if max_contexts is not None:
        options["max_contexts"] = positive_count(max_contexts, "--max-contexts")
    return options


def domains(texts: list[str] | None) -> dict[str, list[str]] | None:
    from pcor_sql.frontend.compact import parse_domain_declarations

    return parse_domain_declarations(texts) if texts else None


def verifier_args(spec: str, extra: list[str] | None) -> tuple[str, dict[str, Any]]:
    """`--verifier 'lof(k=10)'` plus `--verifier-option threshold=2` → ("lof", {k: 10, threshold: 2})."""
    from pcor_sql.frontend.option_lists import parse_verifier_spec

    name, options = parse_verifier_spec(spec)
    for key, value in named_values(extra, "--verifier-option").items():
        if key in options:
            raise UserError(f"verifier option {key} is given twice", "give each option once")
        options[key] = value
    return name, options


def named_values(items: list[str] | None, flag: str) -> dict[str, Any]:
    """Repeated `NAME=VALUE` flags, each value a literal as in `WITH (...)` (number, 'text',
    TRUE/FALSE) → {name: value}."""
    from pcor_sql.frontend.option_lists import parse_verifier_spec

    out: dict[str, Any] = {}
    for item in items or []:
        if not isinstance(item, str) or "=" not in item:
            raise UserError(f"{flag} {item!r} is not NAME=VALUE", f"write e.g. {flag} name=10")
        _, parsed = parse_verifier_spec(f"option({item})")
        if len(parsed) != 1:
            raise UserError(f"{flag} {item!r} must set exactly one option", "repeat the flag for each option")
        key, value = next(iter(parsed.items()))
        if key in out:
            raise UserError(f"{flag} {key} is given twice", "give each option once")
        out[key] = value
    return out


def positive_count(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        raise UserError(f"{flag} must be at least 1, got {value}", f"pass e.g. {flag} 1000")
    return value
