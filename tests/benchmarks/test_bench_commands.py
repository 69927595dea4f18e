"""One `python -m benchmarks NAME` per capability: every module of benchmarks/ is reached from a
command (a command's module, or one it imports, directly or through others), so none is left
that nothing runs; a study's options are its own module's, `--help` included."""

from __future__ import annotations

import ast
from pathlib import Path

from benchmarks.cli import app
from benchmarks.cli.studies import STUDIES
from tests.benchmarks.app_helpers import invoke as run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _imports(path: Path) -> set[str]:
    """The benchmarks.* modules `path` imports (benchmarks.x, or x from `from benchmarks import x`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "benchmarks":
            if node.module == "benchmarks":
                found |= {f"benchmarks.{a.name}" for a in node.names}
            else:
                found.add(".".join(node.module.split(".")[:2]))
        elif isinstance(node, ast.Import):
            found |= {".".join(a.name.split(".")[:2]) for a in node.names if a.name.startswith("benchmarks.")}
    return found


def test_every_module_is_reached_from_a_command():
    modules = {f"benchmarks.{p.stem}": p for p in BENCHMARKS.glob("*.py") if p.stem not in ("__init__", "__main__")}
    todo = [*(BENCHMARKS / "cli").glob("*.py"), *(modules[m] for _, m, _ in STUDIES)]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += [modules[m] for m in _imports(path) if m in modules]
    assert set(modules.values()) - seen == set()


def test_each_study_is_a_command_whose_help_is_its_modules():
    names = {command.name for command in app.registered_commands}
    for name, module, _ in STUDIES:
        assert name in names
        shown = run(name, "--help")
        assert shown.exit_code == 0 and f"python -m benchmarks {name}" in shown.stdout, (name, shown.stdout)


def test_a_studys_bad_option_is_its_parsers_error():
    refused = run("handoff", "--rows", "many")
    assert refused.exit_code == 2 and "--rows" in refused.stderr
