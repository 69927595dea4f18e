"""What `Owner.register` checks and tells the owner (DESIGN.md §6 "What an analyst may ask
about"): the columns named, the limits per notion, the releasable keys frozen as text (a list, or
the rows a predicate holds for at registration), and the notes only the owner hears — releasable
keys absent from the data, a limit set below what is already spent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pcor_sql.errors import UserError
from pcor_sql.frontend.compact import parse_by
from pcor_sql.ledger.dataset_registry import releasable_text
from pcor_sql.ledger.input_checks import check_notion
from pcor_sql.ledger.store import NOTIONS, LimitChange
from pcor_sql.sqltext.quoting import quote_identifier

if TYPE_CHECKING:
    from pcor_sql.backends.base import DataAccess

#: The owner's warning line (the CLI's stderr); None: a Python UserWarning instead.
Warn = Callable[[str], None]


def names_of(value: Any, what: str) -> tuple[str, ...]:
    """The column names `value` gives ('a,b' or a list), each once."""
    names = parse_by(value) if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise UserError(f"{what} must name one or more columns, got {value!r}", f"e.g. {what}='a,b' or {what}=['a', 'b']")
    if len(set(names)) != len(names):
        raise UserError(f"{what} names a column twice", "name each column once")
    return tuple(names)


def limits_by_notion(limit: Any) -> dict[str, float]:
    """A registration's `limit`: one ε for every notion, or a mapping notion → ε."""
    if limit is None:
        return {}
    if isinstance(limit, Mapping):
        return {check_notion(n): value for n, value in limit.items()}
    return {notion: limit for notion in NOTIONS}


def absent_keys_note(access: DataAccess, relation: str, key: str, keys: Sequence[str], name: str,
                     warn: Warn | None) -> None:
    """Tell the owner (never an analyst: DESIGN.md §6, the releasable set is public, the data is
    not) how many of the releasable keys declared as a list are not in the data now: a typo
    there is otherwise silent, and a request about such a key is charged and then refused."""
    from pcor_sql.sqltext.build import select_from

    column = quote_identifier(key)
    table = access.arrow(select_from(f"DISTINCT {column}", relation, where=f"{column} IS NOT NULL"))
    present = {releasable_text(v) for v in table.column(0).to_pylist()}
    absent = [k for k in dict.fromkeys(keys) if k not in present]
    if not absent:
        return
    verb = "is" if len(absent) == 1 else "are"
    message = (f"{len(absent):,} of the {len(set(keys)):,} releasable keys declared for {name!r} {verb} not in the data "
               f"(e.g. {', '.join(absent[:3])}): a request about one is charged, then refused — check the list")
    _say(message, warn, stacklevel=4)


def below_spent_warning(change: LimitChange, warn: Warn | None) -> None:
    """A limit set below what is already spent: allowed (the owner may tighten a budget), but
    every charge is refused until it is raised — and analysts hear only "a limit was reached"."""
    message = (f"the new {change.notion} limit of {change.unit} (ε = {change.limit:.6g}) is below the ε already spent "
               f"({change.spent:.6g}): every charge is refused until it is raised")
    _say(message, warn, stacklevel=4)


def releasable_keys(access: DataAccess, relation: str, key: str, releasable: Sequence[Any] | str) -> list[str]:
    """The releasable keys as frozen text: the list given, or the keys of the rows where the
    owner's predicate holds now (read once, at registration)."""
    if isinstance(releasable, str):
        from pcor_sql.sqltext.build import select_from

        column = quote_identifier(key)
        where = f"{column} IS NOT NULL AND coalesce(CAST(({releasable}\n) AS BOOLEAN), FALSE)"
        try:
            table = access.arrow(select_from(f"DISTINCT {column}", relation, where=where))
        except UserError:
            raise
        except Exception as exc:  # the engine's own error type (DuckDB or Spark)
            raise UserError(f"the releasable predicate {releasable!r} is not a condition on {relation}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
                            "write a SQL boolean expression over the relation's columns, e.g. \"id < 100\"") from None
        return [releasable_text(v) for v in table.column(0).to_pylist()]
    if not isinstance(releasable, (list, tuple)):
        raise UserError("releasable must be a list of keys or a SQL predicate", "e.g. releasable=[1, 2, 3] or "
                        "releasable=\"dept = 'a'\"")
    return [releasable_text(v) for v in releasable]


def _say(message: str, warn: Warn | None, stacklevel: int) -> None:
    """A warning for the owner: through `warn` (the CLI's stderr line) when given, else as a
    Python `UserWarning` pointing at the owner's own call (`stacklevel` counts from here)."""
    if warn is not None:
        warn(message)
    else:
        import warnings

        warnings.warn(message, UserWarning, stacklevel=stacklevel)
