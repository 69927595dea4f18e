"""Errors as the CLI reports them: one line on stderr, `error: <problem> — <fix>`.

Exit codes: 2 for bad input (`UserError`, DuckDB's errors about a user's own statement, and
usage errors), 1 for internal errors and anything unexpected. A traceback is printed only
with the global `--debug` option (or PCOR_SQL_DEBUG=1).
"""

from __future__ import annotations

import sys
import traceback

from pcor_sql.cli.console import one_line, write_error

USER_EXIT = 2
INTERNAL_EXIT = 1


class StatementError(Exception):
    """DuckDB refused an ordinary statement the user gave the `sql` runner: bad input."""


def report(exc: BaseException, *, debug: bool) -> int:
    """Write `exc` as one error line (a traceback first with `debug`); return the exit code."""
    from pcor_sql.errors import InternalError, UserError

    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if isinstance(exc, UserError):
        write_error(str(exc))
        return USER_EXIT
    if isinstance(exc, StatementError):
        write_error(f"{exc} — fix the statement")
        return USER_EXIT
    if isinstance(exc, InternalError):
        write_error(str(exc))
        return INTERNAL_EXIT
    hint = "" if debug else "; rerun with --debug for the traceback"
    message = one_line(str(exc)) or "(no message)"
    write_error(
        f"unexpected {type(exc).__name__}: {message} — this is probably a bug in pcor-sql; please report it{hint}"
    )
    return INTERNAL_EXIT
