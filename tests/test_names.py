"""Names that say what they hold (DESIGN.md §4 "Declared once"): a public class is defined in one module of
the package, so `Job`, `ValidityOracle` or `Session` each name one thing, and the CLI's --engine
takes the backends' own `Engine`."""

import ast
import collections
import pathlib

import typer

from pcor_sql.backends.base import Engine
from pcor_sql.core.choices import Engine as CoreEngine
from pcor_sql.cli import parameters

PKG = pathlib.Path(__file__).resolve().parents[1] / "pcor_sql"


def test_each_public_class_is_defined_once():
    where = collections.defaultdict(list)
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(PKG)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_the_engine_option_is_the_backends_engine():
    choices, option = parameters.EngineOption.__origin__, parameters.EngineOption.__metadata__[0]
    assert choices is Engine and isinstance(option, typer.models.OptionInfo)
    assert not hasattr(parameters, "EngineName") and Engine is CoreEngine


def test_no_module_of_the_package_is_named_like_another_library():
    """`pcor_sql/requests.py` read, to a newcomer, as the HTTP library: a module directly in the
    package is named for what it holds, never after a standard-library module or a top-level
    name an installed distribution provides (`requests`, `httpx`, `duckdb`, `typer`, ...)."""
    import importlib.metadata
    import sys

    taken = (set(sys.stdlib_module_names) | set(importlib.metadata.packages_distributions())) - {"pcor_sql"}
    taken |= {"requests", "httpx", "duckdb", "numpy", "numba", "typer", "rich", "pyarrow"}  # whatever is installed
    ours = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert sorted(ours & taken) == []


def test_the_analyst_client_has_one_name():
    """The light client (client/, `pcor_sql_client`, httpx only) is the analyst's one client:
    `pcor_sql.connect` is its very function, and no second `client` package inside pcor_sql
    stands beside it under another name."""
    import pcor_sql
    import pcor_sql_client

    assert pcor_sql.connect is pcor_sql_client.connect and pcor_sql.RemoteAnalyst is pcor_sql_client.RemoteAnalyst
    assert not (PKG / "client").exists() and not (PKG / "client.py").exists()
