"""The layers of the package and what each may import, declared once — `LAYERS` below, bottom
first; CONTRIBUTING.md and DESIGN.md §4 "Layers" point here — and checked on the source (every
import, function-level ones and those under `if TYPE_CHECKING:` included: an import for type
checking is still a dependency, and a cycle through one is still a cycle), and no import cycles.
Besides the layers it names, every layer may import `BASE` (errors, resources, jsonable).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "pcor_sql"
BASE = {"pcor_sql.errors", "pcor_sql.resources", "pcor_sql.jsonable"}

#: (layer, what it holds, what it may import: layers, or single modules of one; None: anything
#: in the package, unchecked). Third-party rules: core and request_values import no DuckDB and
#: no UI, only the CLI imports the UI (below), sqltext only DuckDB (tests/test_import_boundaries.py).
LAYERS: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("jsonable", "values as JSON data", frozenset()),
    ("sqltext", "quoting, tokens, SQL builders", frozenset()),
    ("core", "pure numpy/scipy", frozenset()),
    ("request_specs", "options declared once", frozenset({"core", "pcor_sql.anomaly.mechanisms"})),
    ("request_values", "the request values", frozenset({"core", "request_specs", "pcor_sql.anomaly.mechanisms"})),
    ("frontend", "text → values, never the engine", frozenset({"sqltext", "core", "request_values", "request_specs"})),
    ("ledger", "budgets, history, registry", frozenset({"sqltext", "core"})),
    ("engine", "the DuckDB adapter, never the front end", frozenset({"sqltext", "core", "request_values", "request_specs"})),
    ("anomaly", "anomaly identification", frozenset({"sqltext", "core", "request_values", "engine"})),
    ("backends", "where rows are read (DuckDB or Spark)",
     frozenset({"sqltext", "core", "request_values", "engine", "anomaly", "ledger"})),
    # The ledger's seam (`ledger.seams`) and where rows are read (`backends.base`) type its Session.
    ("pipeline", "the one release path", frozenset({"core", "engine", "ledger", "pcor_sql.backends.base"})),
    # A built-in verifier's words are its own label (`core.verifiers.builtins`), never typed again.
    ("readable", "results in plain words", frozenset({"core"})),
    ("anomaly_words", "an anomaly answer in words", frozenset({"readable"})),
    ("notebook", "HTML of results", frozenset({"readable"})),
    ("plots", "the owner's pictures (matplotlib)", frozenset()),
    ("results", "what a release returns",
     frozenset({"sqltext", "core", "request_values", "engine", "anomaly", "readable", "anomaly_words", "notebook",
                "plots"})),
    ("release_searches", "a release's searches, once paid for",
     frozenset({"sqltext", "core", "request_values", "engine", "results", "pipeline", "pcor_sql.backends.base"})),
    ("jobs", "the two measurements",
     frozenset({"sqltext", "core", "request_values", "engine", "ledger", "anomaly", "results", "pipeline",
                "release_searches"})),
    ("session", "a connection's releases, never the front end",
     frozenset({"sqltext", "core", "request_values", "engine", "ledger", "anomaly", "backends", "results", "readable",
                "notebook", "pipeline", "jobs"})),
    ("service", "the analyst service (HTTP), never the CLI",
     frozenset({"sqltext", "core", "request_values", "request_specs", "frontend", "engine", "ledger", "anomaly", "backends",
                "results", "readable", "notebook", "pipeline", "jobs", "session", "analyst", "owner", "api",
                "statement_runner", "pcor_sql.analyst_keys", "pcor_sql.analyst_account",
                "pcor_sql.analyst_warm", "pcor_sql.analyst_statements"})),
    ("api, statements, owner, analyst", "the public calls: everything above but the CLI", None),
    ("cli", "the only printing", None),
)
LOWER = {name: set(allowed) for name, _, allowed in LAYERS if allowed is not None}


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


def imports(module: str) -> set[str]:
    """The modules `module` imports: `from pkg import sub` counts as `pkg.sub` when that is a
    module (a package's __init__ re-exporting is not a dependency of the submodule's user)."""
    return imports_in(MODULES[module].read_text(encoding="utf-8"), module)


def imports_in(source: str, module: str) -> set[str]:
    """The modules `source` imports, wherever the import statement is (TYPE_CHECKING blocks,
    functions and all)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
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


def test_core_and_request_values_import_no_duckdb_and_no_ui():
    for module in MODULES:
        if layer(module) in ("core", "request_values"):
            third_party = {t.split(".")[0] for t in imports(module)}
            assert not third_party & {"duckdb", "pyarrow", "typer", "rich"}, module


def test_only_the_cli_imports_the_ui():
    for module in MODULES:
        if layer(module) != "cli":
            third_party = {t.split(".")[0] for t in imports(module)}
            assert not third_party & {"typer", "rich"}, module


def test_there_are_no_import_cycles():
    assert find_cycle({m: {t for t in imports(m) if t in MODULES} for m in MODULES}) is None


def find_cycle(graph: dict[str, set[str]]) -> str | None:
    """One import cycle of `graph` as 'a → b → a', or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> str | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return " → ".join(path[path.index(t):] + [t])
            if t not in state and (found := visit(t)) is not None:
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_a_cycle_through_a_type_checking_import_is_a_cycle():
    """The check must see what it checks: a TYPE_CHECKING import closing a loop is found."""
    store = "from pcor_sql.ledger.reservation import Reservation\n"
    reservation = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from pcor_sql.ledger.store import Ledger\n")
    assert imports_in(reservation, "pcor_sql.ledger.reservation") >= {"pcor_sql.ledger.store"}
    graph = {"pcor_sql.ledger.store": imports_in(store, "pcor_sql.ledger.store") & set(MODULES),
             "pcor_sql.ledger.reservation": imports_in(reservation, "pcor_sql.ledger.reservation") & set(MODULES)}
    assert find_cycle(graph) == "pcor_sql.ledger.reservation → pcor_sql.ledger.store → pcor_sql.ledger.reservation"


#: CLI modules that reach the ledger only through the owner/session/api layer (DESIGN.md §6:
#: the CLI acts for the owner). The others are being moved to the same rule (DESIGN.md §4 "Layers").
OWNER_ONLY_CLI = ("pcor_sql.cli.budget", "pcor_sql.cli.budget_integrity", "pcor_sql.cli.analyst_commands")


@pytest.mark.parametrize("module", OWNER_ONLY_CLI)
def test_the_budget_and_analyst_commands_go_through_the_owner(module):
    allowed = ("pcor_sql.cli", "pcor_sql.owner", "pcor_sql.session", "pcor_sql.api", "pcor_sql.errors")
    bad = [t for t in imports(module) if t.startswith("pcor_sql.") and not t.startswith(allowed)]
    assert not bad, bad


def test_the_cli_imports_only_the_public_api():
    """The CLI is a thin shell over the owner/session/api layer: never the engine, the pure
    core, the backends, the anomaly package or the SQL text layer."""
    forbidden = ("pcor_sql.engine", "pcor_sql.core", "pcor_sql.backends", "pcor_sql.anomaly", "pcor_sql.sqltext")
    bad = [f"{m} imports {t}" for m in MODULES if layer(m) == "cli"
           for t in _all_imports(m) if t.startswith(forbidden)]
    assert not bad, bad


def _all_imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out
