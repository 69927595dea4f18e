"""`python -m benchmarks`: the lab's command line, run from a checkout (not in the wheel).

Commands: `bench` (release timings against a naive baseline), `reproduce` (the PCOR paper's
experiment tables), `explore` (the explore search against BFS), `anomaly-evidence` (SP vs DP
error rates), `scale` (large tables, wide spaces), `verifiers` (rows each verifier flags among
all rows), `service` (concurrent analysts over HTTP), `batch` (explain_outliers with workers=1, 2),
`ledger-services` (services sharing a PostgreSQL ledger against one on the embedded ledger),
and the studies of one part (`benchmarks/cli/studies.py`: per-check, width-checks, summary-threads,
duckdb-threads, request-statements, ledger-lock, ledger-history, handoff, profile-release, seeded-outputs),
which parse their own options. Errors behave as in `pcor-sql` — one
`error: <problem> — <fix>` line on stderr, exit code 2 (bad input) or 1 —
because the app runs on pcor-sql's own command group.
"""

from __future__ import annotations

import typer

from benchmarks.cli.batch import batch
from benchmarks.cli.bench import bench
from benchmarks.cli.evidence import anomaly_evidence
from benchmarks.cli.explore import explore
from benchmarks.cli.ledger_services import ledger_services
from benchmarks.cli.reproduce import reproduce
from benchmarks.cli.scale import scale
from benchmarks.cli.service import service
from benchmarks.cli.spark import spark_scale
from benchmarks.cli.studies import CONTEXT, STUDIES, command
from benchmarks.cli.verifiers import verifiers
from pcor_sql.cli.main import _Group, _options

PROG = "python -m benchmarks"

app = typer.Typer(
    name=PROG,
    cls=_Group,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
# pcor-sql's global options (--debug), with this app's own description.
app.callback(
    help="pcor-sql's benchmarks and the reproduction of the papers' experiments, run from a checkout "
    "through the library's public API. Run a command with --help for its options.\n\n"
    "\b\nExample:\n    python -m benchmarks bench --quick",
)(_options)

_COMMANDS = (
    ("bench", "Time releases against a naive baseline measured in the same run.", bench),
    ("reproduce", "Reproduce the PCOR paper's experiment tables on the bundled data.", reproduce),
    ("explore", "Measure the explore search against BFS on every planted outlier, next to its targets.", explore),
    ("anomaly-evidence", "Show SP vs DP error rates on true anomalies (the sensitive-privacy paper's claim).",
     anomaly_evidence),
    ("scale", "Time releases on 10M-100M-row tables and on context spaces past 64 free bits.", scale),
    ("service", "Concurrent analysts on one pcor-sql serve: latency, throughput, quotas and history checked.",
     service),
    ("spark-scale", "One release on a large Parquet file on DuckDB and on Spark, with the rows sent to the driver.",
     spark_scale),
    ("batch", "Time explain_outliers of 40 and 400 records with workers=1, 2: ratio and peak memory.", batch),
    ("verifiers", "Show the share of rows each verifier flags among all rows, plain vs distinct LOF on ties.",
     verifiers),
    ("ledger-services", "Answered/s with one and two services on one PostgreSQL ledger against the embedded one; "
     "reservation latency on each store.", ledger_services),
)
for _name, _short, _function in _COMMANDS:
    app.command(_name, short_help=_short)(_function)
for _name, _module, _short in STUDIES:
    app.command(_name, short_help=_short, help=_short + " Options: python -m benchmarks " + _name + " --help.",
                context_settings=CONTEXT, add_help_option=False)(command(_name, _module))


def run() -> None:
    """`python -m benchmarks`."""
    app(prog_name=PROG)
