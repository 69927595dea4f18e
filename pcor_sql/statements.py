"""Run SQL text on a DuckDB connection: pcor-sql's statements, and ordinary SQL unchanged.

    import duckdb, pcor_sql
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    [e] = pcor_sql.sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 "
                            "USING grubbs WITH (epsilon = 0.2, seed = 7)")
    pcor_sql.sql(con, "SELECT count(*) FROM salaries").fetchall()

- `EXPLAIN OUTLIER ...` returns a list of `Explanation`s (one per selected record) from
  `pcor_sql.api.explain_outliers`; each is charged to the budget ledger before it is returned.
- `IDENTIFY ANOMALY ...` returns a list of answers (one per selected record) from
  `pcor_sql.api.identify_anomaly`; each is charged likewise.
- Anything else goes to DuckDB unchanged and returns what `con.sql` returns (a relation;
  DuckDB runs non-SELECT statements at once, a SELECT relation when it is read).

A script (statements separated by `;`) runs in order, stopping at the first error; `sql`
returns the last statement's result, `run_script` yields every statement's result as soon as
it is computed, so a caller can show it before the next statement runs (and read a SELECT's
relation before a later statement changes its table). A statement's own `WITH (...)` options
win over the defaults given here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import duckdb

from pcor_sql.errors import InternalError, UserError

Warn = Callable[[str], None]
Progress = Callable[[int, int], None]

EXPLAIN = "explain"
IDENTIFY = "identify"
ORDINARY = "sql"


@dataclass(frozen=True)
class StatementResult:
    """One statement of a script and what it returned.

    `kind` is "explain" (value: list of Explanation), "identify" (value: list of answers) or
    "sql" (value: what DuckDB's `con.sql` returned: a relation, or None). `index` counts the
    script's statements from 1; `line` is the line the statement starts on; `statement` is the
    parsed statement (`ExplainOutlier`, `IdentifyAnomaly` or `Passthrough`)."""

    index: int
    line: int
    text: str
    kind: str
    value: Any
    statement: Any = None


def sql(
    con: duckdb.DuckDBPyConnection,
    text: str,
    *,
    warn: Warn | None = None,
    seed: int | None = None,
    owner_view: bool = False,
    max_contexts: int | None = None,
    progress: Progress | None = None,
) -> Any:
    """Run one statement or a script and return the last statement's result (None for a text
    holding no statement). `seed` and `owner_view` apply to pcor-sql statements that do not set
    them in WITH (...); a seed makes releases reproducible and labels them not for real use.
    `max_contexts` bounds the `direct` search's enumeration (None: the library's default)."""
    result = None
    for step in run_script(
        con, text, warn=warn, seed=seed, owner_view=owner_view, max_contexts=max_contexts, progress=progress
    ):
        result = step.value
    return result


def run_script(
    con: duckdb.DuckDBPyConnection,
    text: str,
    *,
    warn: Warn | None = None,
    seed: int | None = None,
    owner_view: bool = False,
    max_contexts: int | None = None,
    progress: Progress | None = None,
) -> Iterator[StatementResult]:
    """Run the statements of `text` one by one, yielding each one's result before the next
    runs. In a script an error names the statement (its number and line) and stops the script;
    the statements before it have run (and their releases have been charged). DuckDB's own
    errors are raised unchanged for a lone ordinary statement (it is DuckDB's statement) and
    as a UserError naming the statement in a script."""
    from pcor_sql.frontend.statements import parse_statement
    from pcor_sql.sqltext.tokens import split_statements

    if not isinstance(text, str):
        raise UserError(f"expected SQL text, got {type(text).__name__}", "pass the statements as a string")
    parts = split_statements(text)
    # A lone statement goes to DuckDB exactly as written (trailing ';' and comments included).
    pieces = [text] if len(parts) == 1 else parts
    position = 0
    for index, piece in enumerate(pieces, start=1):
        # split_statements returns stripped substrings of `text`, in order.
        found = max(text.find(parts[index - 1], position), position)
        line = text.count("\n", 0, found) + 1
        position = found + len(parts[index - 1])
        where = "" if len(pieces) == 1 else f"statement {index} (line {line}): "
        try:
            statement = parse_statement(con, piece)
            kind, value = _run(
                con, statement, warn=warn, seed=seed, owner_view=owner_view,
                max_contexts=max_contexts, progress=progress,
            )
        except UserError as exc:
            if not where:
                raise
            raise type(exc)(where + exc.problem, exc.fix) from None
        except duckdb.Error as exc:
            if not where:
                raise
            raise UserError(where + _first_line(exc), "fix that statement; the ones before it have run") from None
        yield StatementResult(index, line, piece, kind, value, statement)


def _run(
    con: duckdb.DuckDBPyConnection,
    statement: Any,
    *,
    warn: Warn | None,
    seed: int | None,
    owner_view: bool,
    max_contexts: int | None,
    progress: Progress | None,
) -> tuple[str, Any]:
    from pcor_sql.frontend.statements import ExplainOutlier, IdentifyAnomaly, Passthrough

    if isinstance(statement, Passthrough):
        return ORDINARY, con.sql(statement.sql)
    defaults = {"seed": seed, "owner_view": owner_view}
    if isinstance(statement, ExplainOutlier):
        return EXPLAIN, explain_statement(con, statement, defaults, warn, max_contexts, progress)
    if isinstance(statement, IdentifyAnomaly):
        return IDENTIFY, identify_statement(con, statement, defaults, warn)
    raise InternalError(f"parse_statement returned {type(statement).__name__}")


def explain_statement(
    con: duckdb.DuckDBPyConnection,
    statement: Any,
    defaults: dict[str, Any],
    warn: Warn | None = None,
    max_contexts: int | None = None,
    progress: Progress | None = None,
) -> list[Any]:
    """An `ExplainOutlier` statement through `pcor_sql.api.explain_outliers`."""
    from pcor_sql import api

    kwargs: dict[str, Any] = {**defaults, **statement.options()}
    if statement.by is not None:
        kwargs["by"] = list(statement.by)
    if statement.verifier is not None:
        kwargs["verifier"] = statement.verifier.name
        kwargs["verifier_options"] = statement.verifier.options_dict()
    if max_contexts is not None:
        kwargs["max_contexts"] = max_contexts
    return list(api.explain_outliers(con, statement.query.original, warn=warn, progress=progress, **kwargs))


def identify_statement(
    con: duckdb.DuckDBPyConnection, statement: Any, defaults: dict[str, Any], warn: Warn | None = None
) -> list[Any]:
    """An `IdentifyAnomaly` statement through `pcor_sql.api.identify_anomaly`."""
    kwargs: dict[str, Any] = {**defaults, **statement.options()}
    return list(identify_anomaly_function()(con, statement.query.original, warn=warn, **kwargs))


def identify_anomaly_function() -> Callable[..., Any]:
    """`pcor_sql.api.identify_anomaly`, or an InternalError saying this build lacks it."""
    from pcor_sql import api

    function = getattr(api, "identify_anomaly", None)
    if function is None:
        raise InternalError("IDENTIFY ANOMALY needs pcor_sql.api.identify_anomaly, which this build does not have")
    return function


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
