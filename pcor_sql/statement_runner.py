"""Run SQL text on a DuckDB connection: pcor-sql's statements, and ordinary SQL unchanged.

    import duckdb, pcor_sql
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    [e] = pcor_sql.sql(con, "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 "
                            "USING grubbs WITH (epsilon = 0.2, seed = 7)")
    pcor_sql.sql(con, "SELECT count(*) FROM salaries").fetchall()

- `EXPLAIN OUTLIER ...` returns a list of `Explanation`s (one per selected record): the
  statement becomes an `OutlierRequest` run by a `Session`; each release is charged to the
  budget ledger before it is returned.
- `IDENTIFY ANOMALY ...` returns a list of answers (one per selected record), as an
  `AnomalyRequest`; each is charged likewise.
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
from typing import TYPE_CHECKING, Any, Callable, Iterator

import duckdb

from pcor_sql.core.option_spec import StrEnum
from pcor_sql.errors import SQL, InternalError, UserError, caller

if TYPE_CHECKING:  # imported late at run time: a statement's Session is made only when one runs
    from pcor_sql.frontend.statement_parser import ExplainOutlier, IdentifyAnomaly, Passthrough
    from pcor_sql.session import Session

Warn = Callable[[str], None]
Progress = Callable[[int, int], None]

class StatementKind(StrEnum):
    """What a statement of a script was: a release, anomaly answers, or ordinary SQL."""

    EXPLAIN = "explain"
    IDENTIFY = "identify"
    ORDINARY = "sql"


EXPLAIN, IDENTIFY, ORDINARY = StatementKind.EXPLAIN, StatementKind.IDENTIFY, StatementKind.ORDINARY


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
    statement: ExplainOutlier | IdentifyAnomaly | Passthrough | None = None


def sql(con: duckdb.DuckDBPyConnection | None, text: str, *, session: Session | None = None, warn: Warn | None = None,
        progress: Progress | None = None, **defaults: Any) -> Any:
    """Run one statement or a script and return the last statement's result (None for a text
    holding no statement). `defaults` are request options (e.g. `seed`, `owner_view`,
    `max_contexts`) for pcor-sql statements that do not set them in WITH (...); a seed makes
    releases reproducible and labels them not for real use. `session` runs the statements
    on that Session (its verifier registry, ledger and cached summaries); without it each
    statement gets a fresh Session on `con`, so it sees the data as the script left it."""
    result = None
    for step in run_script(con, text, session=session, warn=warn, progress=progress, **defaults):
        result = step.value
    return result


def run_script(con: duckdb.DuckDBPyConnection | None, text: str, *, session: Session | None = None, warn: Warn | None = None,
               progress: Progress | None = None, **defaults: Any) -> Iterator[StatementResult]:
    """Run the statements of `text` one by one, yielding each one's result before the next
    runs. In a script an error names the statement (its number and line) and stops the script;
    the statements before it have run (and their releases have been charged). DuckDB's own
    errors are raised unchanged for a lone ordinary statement (it is DuckDB's statement) and
    as a UserError naming the statement in a script."""
    from pcor_sql.session import session_for
    from pcor_sql.backends.spark_session import is_spark_session
    from pcor_sql.sqltext.connection import require_connection

    defaults = {name: value for name, value in defaults.items() if value is not None}
    if session is not None:
        con = session_for(con, session, warn).con
    if is_spark_session(con):
        raise UserError(
            f"SQL statements run on a DuckDB connection, not on a {type(con).__name__}",
            "on Spark call pcor_sql.explain_outlier(spark, query, ...), identify_anomaly(...) or coe(...)",
        )
    require_connection(con, "pcor_sql.sql")
    from pcor_sql.frontend.statement_parser import parse_statement
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
            with caller(SQL):  # hints name the statement's clauses: BY a, b; WITH (epsilon = 0.2)
                kind, value = _run(con, statement, session or session_for(con, None, warn), defaults, progress)
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
    con: duckdb.DuckDBPyConnection, statement: ExplainOutlier | IdentifyAnomaly | Passthrough, session: Session, defaults: dict[str, Any], progress: Progress | None
) -> tuple[str, Any]:
    """A statement's kind and result: ours as requests on `session`, anything else DuckDB's."""
    from pcor_sql.frontend.request_builders import anomaly_from_select, outlier_from_select
    from pcor_sql.frontend.statement_parser import ExplainOutlier, IdentifyAnomaly, Passthrough
    from pcor_sql.sqltext.connection import objects_in_scope

    if isinstance(statement, Passthrough):
        return ORDINARY, con.sql(statement.sql)
    options: dict[str, Any] = {**defaults, **statement.options()}
    if isinstance(statement, ExplainOutlier):
        if statement.by is not None:
            options["by"] = list(statement.by)
        if statement.domains is not None:
            options["domains"] = dict(statement.domains)
        if statement.verifier is not None:
            options["verifier"] = statement.verifier
        with objects_in_scope(con, statement.query.original, session.warn):
            return EXPLAIN, session.explain(outlier_from_select(con, statement.query, options), progress=progress)
    if isinstance(statement, IdentifyAnomaly):
        options.pop("max_contexts", None)  # a release option; anomaly answers enumerate nothing
        with objects_in_scope(con, statement.query.original, session.warn):
            return IDENTIFY, session.identify(anomaly_from_select(con, statement.query, options), progress=progress)
    raise InternalError(f"parse_statement returned {type(statement).__name__}")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def ends_statement(text: str) -> bool:
    """True when `text` ends with a `;` that is code (not inside a string or comment): where an
    interactive prompt stops reading."""
    from pcor_sql.sqltext.tokens import significant, tokenize

    try:
        tokens = significant(tokenize(text))
    except UserError:  # an unterminated string or comment: keep reading
        return False
    return bool(tokens) and tokens[-1].is_punct(";")
