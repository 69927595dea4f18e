"""What a `pcor-sql` argv means, as the CLI's own parser reads it (DESIGN.md §9 "Forwarded owner
commands"): the command path and every parameter's value,
exactly those click would use when running it — an option given twice is its last value, `--db=F`
and `--db F` are one option, an option's value that looks like a command is a value — without
running anything.

Parsing walks the click group the typer app builds (typer's own click: `typer.core.TyperGroup`), level by level, as `click.Group.main` would:
each group's own options are read by its parser alone (`make_parser(...).parse_args`, which runs
no callback: typer's `--install-completion` callback installs as it is parsed, `--version`
prints), then the subcommand is resolved by the group; the leaf command's context is made with
`resilient_parsing=False`, so values are converted and checked by their types, and a missing or
bad one is click's usage error. Any option of an intermediate group, and any eager option of the
leaf (`--help`), is refused: those act while parsing, never as part of the command.

Who uses it: forwarding an owner command to the service holding its file (`served_commands`),
on both sides — the caller decides with it whether to forward, the service what it may run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import typer
from typer.core import TyperGroup

from pcor_sql.errors import UserError


@dataclass(frozen=True)
class ParsedCommand:
    """An argv as click reads it: `path` the command names (`("analyst", "add")`), `params` the
    leaf command's parameters by name as click converted them, `root` the root group's options
    that were given (`--debug`, `--version`, `--install-completion`, …: global, so not part of
    the command), and `argv` the words from the command path on (the root's options left out)."""

    path: tuple[str, ...]
    params: dict[str, Any]
    root: tuple[Any, ...]
    argv: tuple[str, ...]

    @property
    def root_names(self) -> list[str]:
        """The root options given, as spelled in the help (`--install-completion`)."""
        return [_spelling(p) for p in self.root]


def parse_command(group: TyperGroup, argv: Sequence[str], *, prog_name: str = "pcor-sql") -> ParsedCommand:
    """Parse `argv` (without the program name) with `group`'s own parser; see the module docstring.
    A UserError says what is wrong: not a command, an option where none may be, click's usage
    error (unknown option, missing argument, bad value)."""
    words = [str(a) for a in argv]
    root_ctx = group.context_class(group, info_name=prog_name, resilient_parsing=True, **group.context_settings)
    command: Any = group
    ctx, path = root_ctx, []
    try:
        root_given, rest = _own_options(group, root_ctx, words)
        argv_from_command = tuple(rest)
        while isinstance(command, TyperGroup):
            if not rest:
                raise UserError(f"{' '.join([prog_name, *path])} needs a command",
                                f"give one of: {', '.join(sorted(command.list_commands(ctx)))}")
            word = rest[0]
            name, found, rest = command.resolve_command(ctx, rest)
            if found is None or name is None:
                raise UserError(f"no such command {word!r}", f"see '{' '.join([prog_name, *path])} --help'")
            path.append(name)
            if isinstance(found, TyperGroup):
                sub = found.context_class(found, info_name=name, parent=ctx, resilient_parsing=True,
                                          **found.context_settings)
                given, rest = _own_options(found, sub, rest)
                if given:
                    raise UserError(f"'{' '.join([prog_name, *path])}' takes no option of its own here, got "
                                    f"{_spelling(given[0])}", "put the options after the command's name")
                ctx = sub
            else:
                eager = [p for p in _given(found, ctx, rest, name) if p.is_eager]
                if eager:
                    raise UserError(f"{_spelling(eager[0])} is not part of a command",
                                    "give the command and its own options only")
                leaf = found.make_context(name, list(rest), parent=ctx, resilient_parsing=False)
                return ParsedCommand(tuple(path), dict(leaf.params), tuple(root_given), argv_from_command)
            command = found
    except typer.TyperException as exc:  # click's usage errors (typer's click)
        where = " ".join([prog_name, *path])
        raise UserError(exc.format_message().rstrip("."), f"see '{where} --help'") from None
    raise UserError("no command", f"see '{prog_name} --help'")  # pragma: no cover - the loop returns


def _own_options(group: TyperGroup, ctx: Any, words: list[str]) -> tuple[list[Any], list[str]]:
    """A group's options given in `words` (its parser stops at the first word that is not one of
    its options: the subcommand) and the words left, from the subcommand on. No callback runs."""
    parser = group.make_parser(ctx)
    ctx.resilient_parsing = False  # an unknown option is an error, not skipped
    try:
        _, rest, order = parser.parse_args(args=list(words))
    finally:
        ctx.resilient_parsing = True  # resolving a command then runs no group callback (`resolve_command`)
    return _unique(order), list(rest)


def _given(command: Any, parent: Any, words: list[str], name: str) -> list[Any]:
    """The parameters of `command` given in `words`, by its own parser (no callback runs)."""
    ctx = command.context_class(command, info_name=name, parent=parent, resilient_parsing=True,
                                **command.context_settings)
    ctx.resilient_parsing = False
    return _unique(command.make_parser(ctx).parse_args(args=list(words))[2])


def _unique(order: list[Any]) -> list[Any]:
    out: list[Any] = []
    for param in order:
        if param.param_type_name == "option" and param not in out:
            out.append(param)
    return out


def _spelling(param: Any) -> str:
    names = [n for n in getattr(param, "opts", []) if n.startswith("--")] or list(getattr(param, "opts", [])) \
        or [param.name or "?"]
    return names[0]
