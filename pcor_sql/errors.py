"""Error and warning types. User errors say what is wrong and how to fix it; internal ones say
"probably a bug"; a PrivacyWarning says that an output or a ledger protects less than it seems."""

from __future__ import annotations

import contextvars
import warnings
from contextlib import contextmanager
from typing import Callable, Iterator

# The errors an analyst's client raises too are defined once, in the light client (client/, which
# imports nothing of pcor_sql), so `except pcor_sql.UserError` catches what `pcor_sql.connect` raises.
from pcor_sql_client.errors import BudgetExceeded, PcorError, Refused, RequestFailed, UserError  # noqa: F401


class NoValidContext(UserError):
    """The record is an outlier in no context the search could reach."""


class NoRecord(UserError):
    """The record selector picks no row."""


class AnalystRefused(Refused):
    """A refusal about the analyst themselves (unknown, revoked, a dataset they may not use): it
    names nothing of the data, the units or anyone else's spending, so an analyst may read it as
    it is — every other refusal of a charge is said to an analyst in generic words (`pipeline`)."""


class LedgerUnreachable(UserError):
    """A ledger store lost (or could not make) its connection to its database server (DESIGN.md
    §11 "Faults"): whether its last write committed is unknown. An analyst's request that meets
    it gets the generic refusal (`pipeline.failed`: nothing about the ledger is shown); what a
    reservation committed stays charged, and ends as interrupted."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a charged job, after its outcome was recorded: `message` says whether the
    cost stays charged (an analyst's) or was given back (an owner's)."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class PrivacyWarning(UserWarning):
    """An output or a ledger protects less than it may seem to: domains derived from the data
    (their values are released as they are), a seeded run (a deterministic function of the
    data, not private), a ledger kept in memory (forgotten when the process ends)."""


def warn_privacy(message: str, warn: Callable[[str], None] | None = None, *, stacklevel: int = 3) -> None:
    """Send a privacy warning to `warn` if the caller gave one (the CLI prints it on stderr),
    else through `warnings.warn(..., PrivacyWarning)` so that every Python caller sees it."""
    if warn is not None:
        warn(message)
    else:
        warnings.warn(message, PrivacyWarning, stacklevel=stacklevel)


class InternalError(PcorError):
    """An invariant failed inside pcor-sql."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(f"{message} (this is probably a bug in pcor-sql; please report it)")


def require(condition: bool, message: str) -> None:
    """Check an internal invariant."""
    if not condition:
        raise InternalError(message)


# ---- hints that name an option the way the caller sets it ------------------------------
#
# One error can reach a Python caller, a shell user and a SQL script: a fix that says
# `--epsilon 0.2` is noise to the first, `epsilon=0.2` to the second. The entry points say
# where a call came from (`caller(CLI)` around a command, `caller(SQL)` around a statement);
# messages name options through `option_hint`, which spells them for the innermost caller.

PYTHON = "python"
CLI = "cli"
SQL = "sql"

_CALLERS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("pcor_sql_callers", default=(PYTHON,))

# How each caller spells an option, registered by its declaration (`core.option_spec.OptionSpec`):
# the CLI flag, and the statement's form — `WITH (name = ...)`, a clause of its own, or none
# (then a hint falls back to the outer caller's spelling).
_CLI_FLAGS: dict[str, str | None] = {}
_SQL_FORMS: dict[str, str | None] = {}
_CLAUSE_FORMATS = {"BY": "BY {}", "DOMAIN": "DOMAIN ({})", "USING": "USING {}"}


def register_spelling(name: str, cli_flag: str | None, sql_form: str | None) -> None:
    """Record how the CLI and statements spell option `name` (one declaration per option)."""
    _CLI_FLAGS[name] = cli_flag
    _SQL_FORMS[name] = sql_form


def _sql_form(name: str) -> str | None:
    return _SQL_FORMS.get(name)


@contextmanager
def caller(kind: str) -> Iterator[None]:
    """Within the block, hints name options as `kind` (CLI, SQL or PYTHON) writes them."""
    token = _CALLERS.set(_CALLERS.get() + (kind,))
    try:
        yield
    finally:
        _CALLERS.reset(token)


def option_name(name: str) -> str:
    """An option's name as the caller writes it: `--max-contexts` on the command line, `BY`
    for a statement's clause, else `max_contexts`."""
    for kind in reversed(_CALLERS.get()):
        if kind == CLI:
            return _cli_flag(name)
        if kind == SQL and _sql_form(name) is not None:
            form = _sql_form(name)
            return form if form in _CLAUSE_FORMATS else f"WITH ({name} = ...)"
        if kind == PYTHON:
            return f"{name}=..."
    return name


def from_python() -> bool:
    """True unless the call came from the command line (where there are no Python objects)."""
    return CLI not in _CALLERS.get()


def _cli_flag(name: str) -> str:
    return _CLI_FLAGS.get(name) or "--" + name.replace("_", "-")


def option_hint(name: str, value: str, *, python: str | None = None, sql: str | None = None) -> str:
    """How the caller sets option `name` to `value`, written as on the command line:
    `--by a,b` (CLI), `by='a,b'` (Python; `python` overrides the value's spelling),
    `BY a, b` or `WITH (epsilon = 0.2)` (a statement; `sql` overrides it)."""
    for kind in reversed(_CALLERS.get()):
        if kind == CLI:
            return f"{_cli_flag(name)} {value}"
        if kind == SQL and _sql_form(name) is not None:
            written = sql if sql is not None else _sql_literal(value)
            form = _sql_form(name)
            return _CLAUSE_FORMATS[form].format(written) if form in _CLAUSE_FORMATS else f"WITH ({name} = {written})"
        if kind == PYTHON:
            return f"{name}={python if python is not None else _python_literal(value)}"
    return f"{name}={value}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _python_literal(value: str) -> str:
    text = value.strip("'\"") if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value
    return text if _is_number(text) or text in ("True", "False") else repr(text)


def _sql_literal(value: str) -> str:
    text = value.strip("'\"") if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value
    return text if _is_number(text) else "'" + text.replace("'", "''") + "'"
