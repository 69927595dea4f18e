"""The layers of the package and what each may import, checked on the source (every import,
function-level ones included; `if TYPE_CHECKING:` blocks excepted), and no import cycles.

    errors, resources                  nothing of pcor_sql
    sqltext   quoting, tokens, SQL     errors (and duckdb)
    core      pure numpy/scipy         errors
    request_specs  options declared once  core, anomaly.mechanisms (pure), errors
    requests  the request values       core, request_specs, anomaly.mechanisms (pure), errors
    frontend  text → values            sqltext, core, requests, errors — never the engine
    ledger    budgets, history, registry sqltext, core, errors (and duckdb)
    engine    the DuckDB adapter       sqltext, core, requests, errors — never the front end
    anomaly   anomaly identification   sqltext, core, requests, engine, errors
    backends  where rows are read      sqltext, core, requests, engine, anomaly (DuckDB or Spark)
    readable, notebook                 plain words, HTML of results: nothing but each other
    client    an analyst's HTTP handle  errors only (no DuckDB: an analyst holds no data)
    pipeline  the one release path    core, engine.progress, errors
    jobs      the two measurements     sqltext, core, requests, engine, ledger, anomaly, results, pipeline
    results, session                   backends, engine, anomaly, core, requests, sqltext, readable, notebook — never the front end
    api, statements                    everything above but the CLI
    service   the analyst service (HTTP) everything above but the CLI
    cli       the only printing        anything in the package
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "pcor_sql"
BASE = {"pcor_sql.errors", "pcor_sql.resources"}
LOWER = {
    "sqltext": set(),
    "core": set(),
    "request_specs": {"core", "pcor_sql.anomaly.mechanisms"},
    "requests": {"core", "request_specs", "pcor_sql.anomaly.mechanisms"},
    "frontend": {"sqltext", "core", "requests", "request_specs"},
    "ledger": {"sqltext", "core"},
    "engine": {"sqltext", "core", "requests", "request_specs"},
    "anomaly": {"sqltext", "core", "requests", "engine"},
    "backends": {"sqltext", "core", "requests", "engine", "anomaly"},
    "pipeline": {"core", "engine"},
    "readable": set(),
    "client": set(),
    "notebook": {"readable"},
    "results": {"sqltext", "core", "requests", "engine", "anomaly", "readable", "notebook"},
    "jobs": {"sqltext", "core", "requests", "engine", "ledger", "anomaly", "results", "pipeline"},
    "session": {"sqltext", "core", "requests", "engine", "ledger", "anomaly", "backends", "results", "readable", "notebook",
                "pipeline", "jobs"},
    "service": {"sqltext", "core", "requests", "request_specs", "frontend", "engine", "ledger", "anomaly", "backends",
                "results", "readable", "notebook", "pipeline", "jobs", "session", "analyst", "owner", "api",
                "statement_runner"},
}


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            skip.update(id(sub) for sub in ast.walk(node))
    return skip


def imports(module: str) -> set[str]:
    """The modules `module` imports: `from pkg import sub` counts as `pkg.sub` when that is a
    module (a package's __init__ re-exporting is not a dependency of the submodule's user)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            out.update(subs or {node.module})
    return out - {module}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@pytest.mark.parametrize("name", sorted(LOWER))
def test_each_layer_imports_only_the_layers_below_it(name):
    allowed = LOWER[name]
    bad = []
    for module in MODULES:
        if layer(module) != name:
            continue
        for target in imports(module):
            if not target.startswith("pcor_sql.") or target in BASE:
                continue
            if layer(target) not in allowed | {name} and target not in allowed:
                bad.append(f"{module} imports {target}")
    assert not bad, bad


def test_core_requests_and_client_import_no_duckdb_and_no_ui():
    for module in MODULES:
        if layer(module) in ("core", "requests", "client"):
            third_party = {t.split(".")[0] for t in imports(module)}
            assert not third_party & {"duckdb", "pyarrow", "typer", "rich"}, module


def test_only_the_cli_imports_the_ui():
    for module in MODULES:
        if layer(module) != "cli":
            third_party = {t.split(".")[0] for t in imports(module)}
            assert not third_party & {"typer", "rich"}, module


def test_there_are_no_import_cycles():
    graph = {m: {t for t in imports(m) if t in MODULES} for m in MODULES}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " → ".join(path[path.index(t):] + [t]))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
