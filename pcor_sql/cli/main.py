"""The `pcor-sql` command line: thin commands over the library; the only code that prints.

Every error ends the command with one line on stderr, `error: <problem> — <fix>`, and exit
code 2 (bad input or usage) or 1 (internal); `pcor-sql --debug ...` adds the traceback.
Warnings are `warning: ...` lines on stderr.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Annotated, Any, Sequence

import typer
from typer.core import TyperGroup

from pcor_sql.cli import anomaly, budget, bundled_commands, coe_command, dataset_commands, explain, glossary, runner
from pcor_sql.cli import analyst_commands, serve_command
from pcor_sql.cli import remote_commands
from pcor_sql.cli.console import make_warn, write_error
from pcor_sql.cli.error_report import INTERNAL_EXIT, USER_EXIT, report
from pcor_sql.errors import CLI, UserError, caller

#: The shell's code for a process ended by SIGINT (128 + 2).
INTERRUPTED_EXIT = 130
_PASS_THROUGH = (typer.TyperException, typer.Exit, typer.Abort, BrokenPipeError)


class _Group(TyperGroup):
    """The top-level group: turns every error into one stderr line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            with caller(CLI):  # the library's hints name flags (--by), not Python keywords
                return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C: say what the ledger kept
            write_error(getattr(exc, "message", "interrupted: not charged"))
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except Exception as exc:
            raise typer.Exit(report(exc, debug=bool(ctx.params.get("debug")))) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from pcor_sql.cli.served_commands import forward_if_served

        try:
            # An owner command on a file a running service holds is carried out by that service.
            forwarded = forward_if_served(self, list(sys.argv[1:] if args is None else args))
            if forwarded is not None:
                code = forwarded
            else:
                result = super().main(
                    args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra
                )
                code = result if isinstance(result, int) else 0
        except typer.TyperException as exc:  # usage: unknown option, missing argument, bad value
            where = getattr(getattr(exc, "ctx", None), "command_path", None) or prog_name or "pcor-sql"
            write_error(f"{exc.format_message().rstrip('.')} — see '{where} --help'")
            code = getattr(exc, "exit_code", USER_EXIT)
        except typer.Abort:
            write_error("aborted")
            code = INTERNAL_EXIT
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    name="pcor-sql",
    cls=_Group,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from pcor_sql import __version__

        typer.echo(f"pcor-sql {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _options(
    ctx: typer.Context,
    debug: Annotated[
        bool, typer.Option("--debug", envvar="PCOR_SQL_DEBUG", help="Show the traceback of an error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_show_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Explain outliers privately: private contextual outlier release (PCOR) and private
    anomaly identification, on DuckDB. Run a command with --help for its options.

    \b
    Example:
        pcor-sql explain-outlier "SELECT salary FROM salaries WHERE id = 42" --epsilon 0.2

    The words of the output (ε, ε1, OCDP, COE, utility, verifier, search, ...) are explained
    by `pcor-sql glossary`.
    """
    if ctx.invoked_subcommand is None:  # a bare `pcor-sql`: the help, not an error
        typer.echo(ctx.get_help())
        raise typer.Exit()
    if ctx.invoked_subcommand == "datasets":
        make_warn()(DATASETS_DEPRECATED)
    if ctx.invoked_subcommand not in _NO_CHECKS:
        _require_numba()


#: The one line `pcor-sql datasets ...` (the bundled data's old name) writes on stderr.
DATASETS_DEPRECATED = ("`pcor-sql datasets` is now `pcor-sql examples` (the bundled data; `pcor-sql dataset` is "
                       "the registered ones) — the old name goes in the next release")


#: Commands that run no validity check: the analyst's client (HTTP only) and the glossary.
_NO_CHECKS = ("remote", "glossary")


def _require_numba() -> None:
    """numba is a required dependency (the compiled validity checks): an environment without
    it stops here with one line rather than in the middle of a release. `find_spec` only looks
    for the package (microseconds); importing numba (0.4-1 s) waits for the first check."""
    if importlib.util.find_spec("numba") is None:
        raise UserError(
            "numba is not installed; pcor-sql compiles its validity checks with it",
            "pip install 'numba>=0.60', or reinstall pcor-sql with its dependencies",
        )


_COMMANDS = (
    ("explain-outlier", "Privately release a context in which a record is an outlier.", explain.explain_outlier),
    ("coe", "Owner only: list a record's valid contexts exactly.", coe_command.coe),
    ("sql", "Run statements, EXPLAIN OUTLIER included (file, stdin or prompt).", runner.sql),
    ("identify-anomaly", "Privately answer whether records are (β, r)-anomalies.", anomaly.identify_anomaly),
    ("glossary", "The terms of the output in plain words: ε, ε1, OCDP, COE, utility and more.", glossary.glossary),
    ("serve", "Serve analysts over HTTP: tokens, JSON, the data stays here.", serve_command.serve),
)
for _name, _short, _function in _COMMANDS:
    app.command(_name, short_help=_short)(_function)
app.add_typer(budget.app, name="budget")
app.add_typer(bundled_commands.app, name="examples")
# The old spelling, one release more (DESIGN.md §5): hidden, and `_options` says on stderr that
# it is going — a script keeps working while `datasets` (bundled) and `dataset` (registered) stop
# reading as one thing.
app.add_typer(bundled_commands.app, name="datasets", hidden=True)
app.add_typer(dataset_commands.app, name="dataset")
app.add_typer(analyst_commands.app, name="analyst")
# A pass-through to the light client's one declaration of the analyst's commands (remote_commands).
app.command("remote", context_settings=remote_commands.CONTEXT, help=remote_commands.HELP, add_help_option=False,
            short_help="An analyst's requests to a pcor-sql service (token from $PCOR_SQL_TOKEN).")(remote_commands.remote)


def run() -> None:
    """The console entry point (`pcor-sql`, `python -m pcor_sql`)."""
    app(prog_name="pcor-sql")
