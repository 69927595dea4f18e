"""`pcor-sql sql`: run a file or stdin of statements, or an interactive prompt on a terminal."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, Union

import typer

from pcor_sql.cli import parameters as o
from pcor_sql.cli.charged_output import check_stdout, show_charged
from pcor_sql.cli.console import ProgressBar, make_warn, write_error
from pcor_sql.cli.database import open_owner
from pcor_sql.request_specs import Job
from pcor_sql.cli.error_report import StatementError
from pcor_sql.cli.render import print_answers, print_explanations, print_relation
from pcor_sql.errors import UserError

if TYPE_CHECKING:  # for type checkers only: `pcor-sql --help` and the remote commands never load DuckDB
    import duckdb

    from pcor_sql.session import Session

#: What statements run on: the owner's Session, or a bare DuckDB connection (plain SQL only).
Target = Union["Session", "duckdb.DuckDBPyConnection"]

PROMPT = "pcor-sql> "
CONTINUATION = "     ...> "
QUIT = (".quit", ".exit")


@o.spec_options(Job.EXPLAIN, only=("seed", "owner_view", "max_contexts"))
def sql(
    file: Annotated[
        Optional[Path],
        typer.Argument(
            help="Script to run ('-' or nothing: stdin; on a terminal, an interactive prompt).", show_default=False
        ),
    ] = None,
    db: o.Db = None,
    ledger: o.Ledger = None,
    allow_seeded: o.AllowSeeded = False,
    fmt: Annotated[
        o.ExplainFormat,
        o.choice(o.ExplainFormat, "--format",
            help="table or json (JSON Lines: explanations, answers and query rows); sql prints explanation queries.",
        ),
    ] = o.ExplainFormat.table,
    options: dict[str, Any] | None = None,
) -> None:
    """Run SQL statements — EXPLAIN OUTLIER and IDENTIFY ANOMALY included — and print their results.

    \b
    Example:
        echo "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 USING grubbs WITH (epsilon = 0.2);" | pcor-sql sql

    Statements run in order; the first error stops the script (the statements before it have
    run, and their releases are charged). Ordinary SQL goes to DuckDB unchanged.
    """
    options = dict(options or {})
    settings = dict(seed=options.get("seed"), owner_view=options.get("owner_view", False),
                    max_contexts=o.positive_count(options.get("max_contexts"), "--max-contexts"))
    interactive = file is None and sys.stdin.isatty()
    check_stdout()  # before any statement is charged: a closed stdout would lose its releases
    text = None if interactive else _read_script(file)
    with open_owner(db, ledger, reads=text, allow_seeded=allow_seeded) as owner:
        con = owner.session
        if interactive:
            try:  # line editing and history for input(), where the platform has it
                importlib.import_module("readline")
            except ImportError:
                pass
            repl(con, fmt.value, settings, read=input)
        else:
            run_text(con, text, fmt.value, settings)


def _read_script(file: Path | None) -> str:
    if file is None or str(file) == "-":
        return sys.stdin.read()
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"script file {str(file)!r} does not exist", "check the path, or pipe the script to stdin") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read script file {str(file)!r}: {exc}", "give a readable UTF-8 text file") from None


def run_text(target: Target, text: str, fmt: str, settings: dict[str, Any]) -> int:
    """Run every statement of `text` on `target` (a Session, or a connection), printing each
    result before the next statement runs. Returns the number of statements run."""
    import duckdb

    from pcor_sql.session import Session
    from pcor_sql.statement_runner import EXPLAIN, IDENTIFY, run_script

    session, con = (target, None) if isinstance(target, Session) else (None, target)
    count = 0
    with ProgressBar("running") as bar:
        steps = run_script(con, text, session=session, warn=None if session else make_warn(),
                           progress=bar.callback, **settings)
        while True:
            try:
                step = next(steps)
            except StopIteration:
                break
            except duckdb.Error as exc:  # DuckDB refused the user's own (lone) statement
                raise StatementError(_first_line(exc)) from None
            bar.stop()
            count += 1
            # A script's results are a stream of statements: its json stays one object a line.
            lines = "jsonl" if fmt == "json" else fmt
            if step.kind == EXPLAIN:
                show_charged(step.value, lambda: print_explanations(step.value, lines))
            elif step.kind == IDENTIFY:
                own = getattr(step.statement, "owner_view", None)
                shown = bool(settings.get("owner_view") if own is None else own)
                show_charged(step.value, lambda: print_answers(step.value, lines, shown))
            else:
                print_relation(_fetched(step), "json" if fmt == "json" else "table")
    return count


def _fetched(step: Any) -> tuple[list[str], list[tuple]] | None:
    """(columns, rows) of an ordinary statement's relation, read now: DuckDB runs a SELECT when
    it is read, so its errors (a failed cast, say) surface here."""
    import duckdb  # here, not at the top: the command line imports this module for `remote` too

    if step.value is None:
        return None
    try:
        return list(step.value.columns), step.value.fetchall()
    except duckdb.Error as exc:
        raise StatementError(f"statement {step.index} (line {step.line}): {_first_line(exc)}") from None


def statement_complete(text: str) -> bool:
    """True when `text` ends with a `;` that is code (not inside a string or comment)."""
    from pcor_sql.statement_runner import ends_statement

    return ends_statement(text)


def repl(
    con: Target,
    fmt: str,
    settings: dict[str, Any],
    *,
    read: Callable[[str], str],
) -> None:
    """Read statements until `;`, run them, print results; `.quit` or end of input ends it.
    An error is reported and the prompt continues."""
    from pcor_sql.cli.error_report import report

    buffer: list[str] = []
    while True:
        try:
            line = read(CONTINUATION if buffer else PROMPT)
        except EOFError:
            return
        except KeyboardInterrupt:
            buffer = []
            sys.stdout.write("\n")
            continue
        if not buffer and line.strip().lower() in QUIT:
            return
        buffer.append(line)
        text = "\n".join(buffer)
        if not text.strip():
            buffer = []
            continue
        if not statement_complete(text):
            continue
        buffer = []
        try:
            run_text(con, text, fmt, settings)
        except KeyboardInterrupt:
            write_error("interrupted")
        except Exception as exc:  # reported in one line; the session goes on
            report(exc, debug=False)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
