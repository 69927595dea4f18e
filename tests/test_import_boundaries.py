"""The rooms of the code stay separate (the layers: tests/test_layers.py): sqltext imports no third
party but DuckDB, the package never the benchmarks, and the benchmarks (benchmarks/, outside the
wheel) reach the library only through its public API."""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "pcor_sql"
BENCHMARKS = ROOT / "benchmarks"

# What benchmarks/ may import from pcor_sql: the top-level names (pcor_sql/__init__.py), the pure
# core, the request / session / result / error modules, and the CLI's own helpers (console,
# options, database, render, the command group).
BENCHMARKS_MAY_IMPORT = (
    "pcor_sql.core", "pcor_sql.anomaly.mechanisms", "pcor_sql.session", "pcor_sql.request_values", "pcor_sql.results",
    "pcor_sql.errors", "pcor_sql.cli", "pcor_sql.owner", "pcor_sql.service",
)
# Besides those, a few files may import internal modules: the evidence benchmark's ball counts
# over a whole relation have no public entry point (a release answers for selected records and
# charges them), so the shim is the one place that changes if they move; the per-check
# benchmark (`python -m benchmarks per-check`) times one validity check, which no public call
# runs alone (a release runs a whole search), so it builds the summary and the oracle itself; the
# summary build's benchmark (DESIGN.md §10 "Building the summary") times the old build, frozen in
# `summary_build_old`, against the package's steps of it, which no public call runs alone; the
# hand-off benchmark (DESIGN.md §10 "Reads in DuckDB, searches in workers") times one search in a
# thread and in a search process, which no public call separates.
BENCHMARKS_EXCEPTIONS = {
    "_anomaly_api.py": ("pcor_sql.anomaly.points",),
    "per_check.py": ("pcor_sql.engine.evaluator", "pcor_sql.engine.schema", "pcor_sql.engine.summary"),
    "summary_build_old.py": ("pcor_sql.engine.cellruns", "pcor_sql.engine.schema", "pcor_sql.sqltext.build"),
    "handoff.py": ("pcor_sql.engine.search_processes", "pcor_sql.engine.shared_summary", "pcor_sql.engine.verdicts"),
    "summary_threads.py": ("pcor_sql.engine.build_threads", "pcor_sql.engine.counting_runs", "pcor_sql.engine.schema"),
    # One check timed by its member cells: the checks themselves, below any public call.
    "per_check_cells.py": ("pcor_sql.core.space", "pcor_sql.engine.evaluator", "pcor_sql.engine.schema",
                           "pcor_sql.engine.summary"),
    # The reservation's latency on each store (DESIGN.md §11), below any public call (a release
    # reserves and reads data), and the content fingerprint's time, which only registration runs.
    "ledger_services.py": ("pcor_sql.ledger.charge_rules", "pcor_sql.ledger.records", "pcor_sql.ledger.postgres_store",
                           "pcor_sql.ledger.store", "pcor_sql.engine.content_fingerprint"),
    # What the history chain's appends cost a charge (DESIGN.md §11 "A tamper-evident history"): the
    # reference leaves out only the chain's statements, so it reserves below any public call.
    "history_chain.py": ("pcor_sql.core.accounting", "pcor_sql.ledger", "pcor_sql.ledger.history_chain_steps",
                         "pcor_sql.ledger.store"),
    "width_checks.py": ("pcor_sql.core.jit", "pcor_sql.core.space", "pcor_sql.core.verifiers",
                        "pcor_sql.engine.compiled_checks", "pcor_sql.engine.lof_checks", "pcor_sql.engine.schema",
                        "pcor_sql.engine.summary"),
}


def imported_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def check(folder, forbidden):
    bad = []
    for path in sorted((PKG / folder).rglob("*.py")):
        for mod in imported_modules(path):
            if any(mod == f or mod.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(PKG)} imports {mod}")
    assert not bad, bad


# Which layer may import which (the core pure, the engine and the front end apart, no UI below
# the CLI) is declared once, in tests/test_layers.py's LAYERS, and checked there.


def test_no_star_imports():
    for path in PKG.rglob("*.py"):
        assert "import *" not in path.read_text(encoding="utf-8"), path


def test_sqltext_is_the_bottom_layer():
    """Everything may read SQL text through sqltext, so it may use only DuckDB, the standard
    library and the error types."""
    allowed = {"duckdb", "pcor_sql.errors"} | set(sys.stdlib_module_names)
    bad = [
        f"{path.relative_to(PKG)} imports {mod}"
        for path in sorted((PKG / "sqltext").rglob("*.py"))
        for mod in imported_modules(path)
        if mod not in allowed and mod.split(".")[0] not in allowed and not mod.startswith("pcor_sql.sqltext")
    ]
    assert not bad, bad


def test_the_package_never_imports_the_benchmarks():
    check(".", ["benchmarks"])


def test_benchmarks_use_only_the_public_api():
    bad = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        allowed = BENCHMARKS_MAY_IMPORT + BENCHMARKS_EXCEPTIONS.get(path.name, ())
        for mod in imported_modules(path):
            if mod.startswith("pcor_sql.") and not any(mod == a or mod.startswith(a + ".") for a in allowed):
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, bad
