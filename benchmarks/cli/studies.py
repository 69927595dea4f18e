"""The benchmarks that keep their own argparse options, each run as `python -m benchmarks NAME
[OPTIONS]` (`--help` is the module's own): one entry per capability, whatever parses its options.

Each module's `main(argv)` parses `argv` and returns its exit code (None: 0); its docstring says
what it measures and against which reference measured in the same run.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import typer

#: (command, module, one line for `python -m benchmarks --help`).
STUDIES = (
    ("per-check", "benchmarks.per_check",
     "Microseconds per validity check, compiled against the reference path, on the same contexts."),
    ("width-checks", "benchmarks.width_checks",
     "LOF and histogram checks on a wide births-shaped summary, by member cells, against the previous checks."),
    ("summary-threads", "benchmarks.summary_threads",
     "The per-cell summary build at DuckDB threads = 1, 2, 16: the old build against the new one."),
    ("duckdb-threads", "benchmarks.duckdb_threads",
     "An analyst's light request under each DuckDB threads setting, against the first."),
    ("request-statements", "benchmarks.request_statements",
     "The DuckDB statements one analyst request costs the service, from DuckDB's query log."),
    ("ledger-lock", "benchmarks.ledger_lock",
     "The embedded ledger's write lock held per request, with group commit and without it."),
    ("ledger-history", "benchmarks.ledger_history",
     "An explain request as the ledger's history grows, with and without the release_id index."),
    ("handoff", "benchmarks.handoff",
     "One search in a thread and handed to a search process: what the hand-off costs."),
    ("profile-release", "benchmarks.profile_release",
     "Where one fresh release's time goes on a scale table (cProfile)."),
    ("history-chain", "benchmarks.history_chain",
     "Reserve + answered with and without the history chain's appends and the lease, and verify's time."),
    ("seeded-outputs", "benchmarks.seeded_outputs",
     "Seeded releases and answers as JSON, of this checkout or another: a refactor leaves them the same."),
)

#: Every option goes to the module's own parser, --help included.
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def command(name: str, module: str) -> Callable[..., None]:
    def run(ctx: typer.Context) -> None:
        code: Any = importlib.import_module(module).main(list(ctx.args))
        raise typer.Exit(code if isinstance(code, int) else 0)

    run.__name__ = name.replace("-", "_")
    return run
