"""`command_parsing.parse_command` reads an argv as the CLI itself does (DESIGN.md §9): for any
mix of spellings (`--db X`, `--db=X`, an option given several times, options before or after the
arguments), its command path and values are exactly those the command's callback receives when
the CLI runs that argv; and it runs nothing while parsing (no callback, no `--version` output)."""

from __future__ import annotations

import contextlib

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.cli.command_parsing import parse_command
from pcor_sql.cli.main import app
from pcor_sql.errors import UserError

GROUP = typer.main.get_command(app)
PATHS = st.sampled_from(["a.duckdb", "/tmp/b.duckdb", "c d.duckdb", "--db", "analyst"])


@contextlib.contextmanager
def captured(*path: str):
    """The leaf command's callback replaced by one that records the values click passes it."""
    leaf = GROUP
    for name in path:
        leaf = leaf.commands[name]
    seen: list[dict] = []
    original, leaf.callback = leaf.callback, lambda **values: seen.append(values)
    try:
        yield seen
    finally:
        leaf.callback = original


def db_words(draw_values: list[tuple[str, bool]]) -> list[str]:
    out: list[str] = []
    for value, joined in draw_values:
        out += [f"--db={value}"] if joined else ["--db", value]
    return out


@settings(max_examples=60, deadline=None)
@given(dbs=st.lists(st.tuples(PATHS, st.booleans()), min_size=1, max_size=4),
       notions=st.lists(st.sampled_from(["ocdp", "dp", "sp"]), max_size=3), front=st.booleans())
def test_the_values_are_those_the_command_receives(dbs, notions, front):
    options = db_words(dbs) + [w for n in notions for w in ("--notion", n)]
    argv = ["budget", "set-limit", *(options if front else []), "t", "1.5", *([] if front else options)]
    parsed = parse_command(GROUP, argv)
    with captured("budget", "set-limit") as seen:
        code = GROUP.main(args=argv, prog_name="pcor-sql", standalone_mode=False)
    assert code in (0, None) and len(seen) == 1
    assert parsed.path == ("budget", "set-limit") and parsed.params == seen[0] and not parsed.root
    assert str(parsed.params["db"]) == dbs[-1][0]  # the last one, as click reads it


@pytest.mark.parametrize("argv", [["--version", "analyst", "list"], ["-V", "analyst", "list"],
                                  ["--install-completion", "analyst", "list"]])
def test_global_options_are_reported_never_run(argv, capsys):
    parsed = parse_command(GROUP, argv)
    assert parsed.path == ("analyst", "list") and parsed.root and parsed.argv == ("analyst", "list")
    assert capsys.readouterr().out == ""  # --version printed nothing: no callback ran


@pytest.mark.parametrize("argv, needle", [
    (["analyst", "list", "--help"], "--help"), (["analyst", "--help", "list"], "--help"),
    (["analyst", "nope"], "no such command 'nope'"), (["--", "--install-completion"], "no such command"),
    (["analyst", "list", "--db"], "requires an argument"), (["analyst", "add"], "Missing argument"),
    (["--nope", "analyst", "list"], "No such option"), ([], "needs a command"),
])
def test_what_is_not_a_command_is_one_line(argv, needle, capsys):
    with pytest.raises(UserError) as caught:
        parse_command(GROUP, argv)
    assert needle in caught.value.problem and caught.value.fix
    assert capsys.readouterr() == ("", "")
