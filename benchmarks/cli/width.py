"""`python -m benchmarks width-checks`: µs per LOF and histogram check on a births-shaped summary by
member cells, against the previous checks in the same run (the work is `benchmarks.width_checks`)."""

from __future__ import annotations

from typing import Annotated

import typer

from pcor_sql.errors import UserError


def width_checks(
    states: Annotated[int, typer.Option("--states", metavar="N", help="States of the births shape.")] = 51,
    years: Annotated[int, typer.Option("--years", metavar="N", help="Years of the births shape.")] = 20,
    contexts: Annotated[int, typer.Option("--contexts", metavar="N", help="Contexts checked per verifier.")] = 1500,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the contexts' order.")] = 1,
) -> None:
    """Time one LOF and one histogram check on a births-shaped summary (state × year × month ×
    weekday cells, a tied integer count), grouped by the context's member cells, against the
    checks before the window walks, in the same run; exit 1 if any verdict or size differs.

    \b
    Example:
        python -m benchmarks width-checks --states 25 --years 2 --contexts 300
    """
    from benchmarks.width_checks import main

    for name, value in (("--states", states), ("--years", years), ("--contexts", contexts)):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}", f"pass e.g. {name} 10")
    code = main(["--states", str(states), "--years", str(years), "--contexts", str(contexts), "--seed", str(seed)])
    if code:
        raise typer.Exit(code)
