"""`pcor-sql remote ...`: an analyst's requests to a data owner's service, from the shell.

    export PCOR_SQL_TOKEN=...            # the token `pcor-sql analyst add` printed for you
    export PCOR_SQL_URL=http://127.0.0.1:8000
    pcor-sql remote datasets
    pcor-sql remote explain-outlier salaries 42 --epsilon 0.2 --metric salary

A pass-through: the light client's argparse parser (`pcor_sql_client.cli`, the command line of
`pcor-sql-remote`) is the one declaration of the analyst's commands, and this command hands it
every argument unread, --help included. So the two command lines have the same subcommands,
options, outputs, exit codes and one-line errors by construction (docs/DESIGN.md §6: an analyst
needs no data and no DuckDB, and gets one set of words whichever package is installed).
"""

from __future__ import annotations

import sys

import typer
from pcor_sql_client.cli import main as client_main

__all__ = ["CONTEXT", "HELP", "remote"]

#: click leaves every argument to the client: unknown options are not refused, and --help is not
#: click's (`pcor-sql remote --help` and `pcor-sql remote X --help` print the argparse help).
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
HELP = ("An analyst's requests to a pcor-sql service (pcor-sql serve): datasets, me, history, releasable-keys, "
        "cost, explain-outlier, identify-anomaly, sql. The token is read from $PCOR_SQL_TOKEN, the URL from --url "
        "or $PCOR_SQL_URL. The same command line as the light client's pcor-sql-remote (`pip install ./client`); "
        "see `pcor-sql remote --help`.")


def remote(ctx: typer.Context) -> None:
    # sys.stdout and sys.stderr are read at call time: typer's CliRunner swaps them per invocation.
    code = client_main(list(ctx.args), out=sys.stdout, err=lambda line: print(line, file=sys.stderr),
                       prog="pcor-sql remote")
    raise typer.Exit(code)
