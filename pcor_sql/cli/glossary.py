"""`pcor-sql glossary`: the terms the output uses, in plain words (the glossary of docs/cli.md too)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.text import Text

from pcor_sql.cli.console import stdout_console, write_line
from pcor_sql.cli.render import json_text
from pcor_sql.errors import UserError


def glossary(
    term: Annotated[
        Optional[str], typer.Argument(help="Show only this term (e.g. OCDP, epsilon1, utility).", show_default=False)
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON object per term: {term, meaning}.")] = False,
) -> None:
    """Explain the terms of the output: ε, ε1, OCDP, COE, utility, verifier, search and more.

    \b
    Example:
        pcor-sql glossary OCDP
    """
    from pcor_sql.readable import GLOSSARY

    entries = list(GLOSSARY)
    if term is not None:
        wanted = term.strip().lower()
        entries = [(t, m) for t, m in GLOSSARY if wanted in (t.lower(), *_aliases(t))]
        if not entries:
            raise UserError(f"no glossary entry for {term!r}", f"run pcor-sql glossary for all {len(GLOSSARY)} terms")
    if json:
        for t, meaning in entries:
            write_line(json_text({"term": t, "meaning": meaning}))
        return
    console = stdout_console()
    for t, meaning in entries:
        line = Text(t, style="bold")
        line.append(f"  {meaning}")
        console.print(line)


def _aliases(term: str) -> tuple[str, ...]:
    """`ε1 (epsilon1)` is found as ε1 and as epsilon1."""
    head, _, rest = term.lower().partition(" (")
    return (head, rest.rstrip(")")) if rest else (head,)
