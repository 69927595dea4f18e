"""Options several commands share, and turning their text into the library's arguments."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
import functools
import inspect
import re
import typing
from typing import Annotated, Any, Callable, List, Optional

import typer

from pcor_sql import Engine
from pcor_sql.errors import UserError
from pcor_sql.request_specs import VERIFIER, Job, parse_choice, specs_for


def _choices(name: str, *values: str, doc: str = "") -> type[Enum]:
    """A `--format`-style choice set: members named as their values (the flag's words)."""
    kind = Enum(name, {v: v for v in values}, type=str)  # type: ignore[misc]
    kind.__doc__ = doc or f"{name}: {', '.join(values)}"
    return kind


def choice(kind: type[Enum], flag: str, **option: Any) -> Any:
    """A `typer.Option` taking one of `kind`'s values under the spelling rule of every
    fixed-value option (`core.option_spec.parse_choice`: any ASCII case, nothing else folded —
    click's own case-insensitive choice would casefold 'ſ' into 's'); a bad value is one
    `error:` line naming the accepted ones."""
    values = tuple(str(member.value) for member in kind)  # type: ignore[attr-defined]

    def parse(text: Any) -> Any:
        return kind(parse_choice(flag, text, values))

    return typer.Option(flag, parser=parse, metavar="[" + "|".join(values) + "]", **option)


ExplainFormat = _choices("ExplainFormat", "table", "json", "sql")
#: explain-outlier: json is one document (a list), jsonl one object per line.
ReleaseFormat = _choices("ReleaseFormat", "table", "json", "jsonl", "csv", "sql")
CoeFormat = _choices("CoeFormat", "table", "json", "jsonl", "csv")
DataFormat = _choices("DataFormat", "table", "json")
ListFormat = _choices("ListFormat", "table", "json", "jsonl")
RowsFormat = _choices("RowsFormat", "table", "json", "jsonl", "csv")


class ExportFormat(str, Enum):
    parquet = "parquet"
    duckdb = "duckdb"


Db = Annotated[
    Optional[Path],
    typer.Option(
        "--db", metavar="PATH",
        help="DuckDB database file to use (must exist; a read-only file refuses releases). "
        "Default: an in-memory database with the bundled datasets loaded.",
    ),
]
EngineOption = Annotated[
    Engine,
    choice(
        Engine, "--engine",
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
        "--ledger", metavar="PATH|URL",
        help="Budget ledger file when the data is not a --db file (made if missing; ':memory:' "
        "keeps it in memory, with a warning), or a PostgreSQL ledger postgresql://… (also with --db: "
        "a file whose units live there). Default: $PCOR_SQL_LEDGER, else the per-user "
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
Domain = Annotated[
    Optional[List[str]],
    typer.Option(
        "--domain", metavar="ATTR=V1|V2",
        help="Declare an attribute's domain, e.g. 'job_title=Nurse|Professor' (repeatable; "
        "quote values holding | ; = in single quotes). Undeclared non-ENUM attributes take the "
        "values present in the data, with a warning.",
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


# ---- options generated from their specs (request_specs, core.searches) -------------------

#: How the CLI takes a structured option (its own parser turns the text into the value).
_STRUCTURED = {
    "by": (Optional[str], "A,B,C", "Context attributes, comma-separated (quote odd names: '\"job, title\"'). "
           "Default: the ENUM / declared-domain columns."),
    "domains": (Optional[List[str]], "ATTR=V1|V2", "Declare an attribute's domain, e.g. 'job_title=Nurse|Professor' "
                "(repeatable; quote values holding | ; = in single quotes). Undeclared non-ENUM attributes take the "
                "values present in the data, with a warning."),
    "bins": (Optional[List[str]], "ATTR=E1,E2,...", "Bin a numeric or date attribute into ranges, e.g. "
             "age=18,25,35,45,55,65,81 (bins [18, 25), ..., the last closed; -inf/inf allowed at the ends; repeatable). "
             "age=auto:5 takes quantiles of the data (a privacy warning says what leaks)."),
    # The built-ins' names come from their declaration, through the option's spec.
    "verifier": (Optional[str], "SPEC", f"{VERIFIER.help[:1].upper()}{VERIFIER.help[1:]}, e.g. "
                 f"'lof(k=10, threshold=2)'. Default {VERIFIER.default}."),
    "start": (Optional[str], "PREDICATE", "Starting context, e.g. \"job_title IN ('Nurse') AND year = '2019'\" "
              "(omitted attributes: whole domain). Default: found by a validity-only search."),
}
_TYPES = {"number": float, "integer": int, "string": str}


def help_sentence(spec: Any) -> str:
    """A spec's help as the start of a sentence: its first word capitalised only when that word
    is prose — never a symbol (β, r, k), a value the option takes (sp, tight, l1) or the first
    of a list of values ("direct, uniform, ..."), which keep their own spelling."""
    text = str(spec.help)
    word = re.match(r"[^\s,:;(]*", text).group(0)
    follows = text[len(word):len(word) + 1]
    choices = {str(c).lower() for c in (getattr(spec, "choices", None) or ())}
    prose = len(word) > 1 and word.isascii() and word.isalpha() and word.islower() and follows == " " \
        and word not in choices
    return text[:1].upper() + text[1:] if prose else text


def _parameter(spec: Any) -> inspect.Parameter:
    if spec.name in _STRUCTURED:
        annotation, metavar, text = _STRUCTURED[spec.name]
        option = typer.Option(spec.cli, metavar=metavar, help=text, show_default=False)
        return inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                 annotation=Annotated[annotation, option])
    text = help_sentence(spec)
    if spec.kind == "boolean":
        return inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=False,
                                 annotation=Annotated[bool, typer.Option(spec.cli, help=text + ".")])
    if spec.default is not None and "default" not in spec.help.lower():
        text += f" (default: {spec.default})"
    option = typer.Option(spec.cli, help=text + ".", show_default=False)
    return inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[Optional[_TYPES[str(spec.kind)]], option])


def spec_options(job: Job, only: tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command one option per spec of `job` that has a CLI flag (or those named in
    `only`), generated from the spec; the command receives the ones the user set as `options`."""
    specs = [s for s in specs_for(job).values() if s.cli and (only is None or s.name in only)]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        # Resolved here: the command's annotations are strings in its own module's namespace.
        hints = typing.get_type_hints(command, include_extras=True)
        own = [p.replace(annotation=hints.get(p.name, p.annotation),
                         kind=inspect.Parameter.KEYWORD_ONLY if p.default is not inspect.Parameter.empty else p.kind)
               for p in signature.parameters.values() if p.name != "options"]
        positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            options = {}
            for spec in specs:
                value = kwargs.pop(spec.name)
                if value is not None and value is not False:
                    options[spec.name] = value
            return command(*args, options=options, **kwargs)

        parameters = [*positional, *[_parameter(s) for s in specs], *keyword]
        wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


MaxRecords = Annotated[
    int,
    typer.Option("--max-records", metavar="N", help="Refuse, before any charge, a selector picking more than N rows "
                 "(each row is a release of ε: say how many you mean to pay for)."),
]

Workers = Annotated[
    int,
    typer.Option("--workers", metavar="N", help="Search the records of a batch in N processes that share the data's "
                 "summary (e.g. this machine's cores; 1: this process). Seeded outputs are the same for any N."),
]


def outlier_options(options: dict[str, Any], *, verifier_option: list[str] | None = None,
                    search_option: list[str] | None = None) -> dict[str, Any]:
    """The generated flags a command was given, as `outlier_request` options (flags left unset
    are left out, so the request's own defaults apply). `--search-option NAME=VALUE` sets any
    request option by name."""
    options = dict(options)
    options.update(named_values(search_option, "--search-option"))  # it wins over a flag's default
    if options.get("domains"):
        options["domains"] = domains(options["domains"])
    if options.get("bins"):
        options["bins"] = bins_option(options["bins"])
    options["verifier"], options["verifier_options"] = verifier_args(options.get("verifier") or "lof", verifier_option)
    for name in ("max_contexts",):
        if name in options:
            options[name] = positive_count(options[name], "--max-contexts")
    return options


BinsFlag = Annotated[Optional[List[str]], typer.Option("--bins", metavar="ATTR=E1,E2,...", help=_STRUCTURED["bins"][2])]


def bins_option(texts: list[str] | None) -> dict | None:
    """`--bins` flags as a request's `bins` (None when not given)."""
    from pcor_sql.frontend.compact import parse_bins_declarations

    return parse_bins_declarations(texts) if texts else None


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
