"""The CLI's own fixed-value options (`--format`, `--engine`, ...) follow the spelling rule of every
fixed-value option (DESIGN.md §6; `core.option_spec.parse_choice`): any ASCII case, nothing else
folded — not click's casefold, which reads 'ſ' as 's'."""

from __future__ import annotations

import enum
import inspect
import json
import typing

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcor_sql.cli.main import app
from tests.cli.cli_helpers import assert_error, invoke


def _commands(typer_app, path=()):
    for command in typer_app.registered_commands:
        yield path + (command.name or command.callback.__name__,), command.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, path + (group.name,))


def _choice_options():
    for path, callback in _commands(app):
        for p in inspect.signature(callback, eval_str=True).parameters.values():
            base, *meta = typing.get_args(p.annotation) or (p.annotation,)
            if isinstance(base, type) and issubclass(base, enum.Enum):
                yield path, p.name, [m for m in meta if hasattr(m, "parser")]


def test_every_fixed_value_option_of_the_cli_is_parsed_by_the_rule():
    found = list(_choice_options())
    assert len(found) >= 20 and any(name == "engine" for _, name, _ in found)
    for path, name, infos in found:
        assert infos and infos[0].parser is not None, (path, name)
        assert infos[0].parser.__qualname__.startswith("choice."), (path, name)


FORMATS = ("table", "json", "jsonl", "csv")


@st.composite
def spelling(draw):
    word = draw(st.sampled_from(FORMATS))
    text = "".join(c.upper() if draw(st.booleans()) else c for c in word)
    return draw(st.sampled_from([text, text, text + " ", text.replace("s", "\u017f"), text.replace("t", "\uff54")]))


@given(text=spelling())
@settings(max_examples=10, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_a_format_in_any_case_is_that_format_and_a_look_alike_is_refused(text):
    result = invoke("budget", "status", "--format", text, "--ledger", ":memory:")
    expected = text.lower() if text.isascii() and text.lower() in FORMATS else None
    if expected is None:
        assert_error(result, "unknown --format", "use one of: table, json, jsonl, csv")
        return
    assert result.exit_code == 0, result.stderr
    if expected == "json":
        assert json.loads(result.stdout) == []  # one document
    elif expected == "table":
        assert "unit" in result.stdout
    else:  # jsonl, csv: a line per row, none here
        assert result.stdout.strip() == ""


def test_an_engine_in_any_case_and_a_look_alike():
    assert_error(invoke("identify-anomaly", "SELECT victim_age FROM homicides WHERE id = 7", "--beta", "5",
                        "--radius", "1", "--epsilon", "0.1", "--engine", "\u017fpark", "--ledger", ":memory:"),
                 "unknown --engine", "duckdb, spark")
    result = invoke("identify-anomaly", "SELECT victim_age FROM homicides WHERE id = 7", "--beta", "5", "--radius", "1",
                    "--epsilon", "0.1", "--engine", "DuckDB", "--ledger", ":memory:", "--format", "JSON")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["privacy"] == "sp"


def test_a_ledger_notion_in_any_case_is_that_notion_and_a_look_alike_is_refused(tmp_path):
    """The ledger keys its rows by the canonical notion: `--notion SP` must land on the `sp` row
    (a row keyed 'SP' would be a second budget, never summed with the first)."""
    ledger = str(tmp_path / "ledger.duckdb")
    assert invoke("budget", "set-limit", "homicides", "0.6", "--notion", "SP", "--ledger", ledger).exit_code == 0
    result = invoke("budget", "status", "--notion", "Sp", "--format", "json", "--ledger", ledger)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["unit"], r["notion"], r["limit"]) for r in rows] == [("bundled:homicides", "sp", 0.6)]
    assert_error(invoke("budget", "status", "--notion", "\u017fp", "--ledger", ledger), "unknown privacy notion")


def test_the_python_ledger_folds_a_notion_to_its_row():
    import duckdb

    from pcor_sql.ledger.store import Ledger

    ledger = Ledger(duckdb.connect())
    ledger.set_limit("u", 1.0, notion="DP")
    assert ledger.status("u", "dp").limit == 1.0
    assert [(s.unit, s.notion) for s in ledger.statuses("Dp")] == [("u", "dp")]
