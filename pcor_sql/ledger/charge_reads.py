"""What a charge reads, in one read inside its transaction (`LedgerOps.charge_rows`): the units'
budget rows, the public units, the ledger's settings, whether any limit exists, which of its
release ids the history holds already — and, for an analyst, their row and quota rows
(`quota_rules.quota_state`) — turned into the state the charge's rules judge.

Every row the store hands back has one shape, tagged with what it is: (name, x, y, z, n, names)
by tag ('b' a budget row, 'p' a public unit, 's' a setting, 'l' a limit exists, 'h' a release
charged before, 'a' the analyst, 'q' a quota row; `store_interface.LedgerOps.charge_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pcor_sql.ledger.charge_rules import NEEDS_REPAIR, ChargeState, UnitRow


def by_tag(rows: Iterable[Sequence[Any]]) -> dict[str, list[tuple]]:
    """The rows of the one read, each (tag, name, x, y, z, n, names), by tag and without it: what
    `LedgerOps.charge_rows` hands back, whichever store ran the read."""
    found: dict[str, list[tuple]] = {}
    for tag, *rest in rows:
        found.setdefault(tag, []).append(tuple(rest))
    return found


def read_state(ops: Any, units: tuple[str, ...], notion: str, ids: Sequence[str]) -> ChargeState:
    """The budget rows of `units` for `notion`, the notion's default limit, whether any limit
    exists, and which of `ids` the history holds already — one read (`read_state_with`)."""
    return read_state_with(ops, units, notion, ids)[0]


def settings_of(found: dict[str, list[tuple]]) -> dict[str, Any]:
    """The ledger's settings as read ('s'): name → value."""
    return {name: value for name, value, *_ in found.get("s", [])}


def unit_rows(found: dict[str, list[tuple]], units: Sequence[str]) -> tuple[UnitRow, ...]:
    """Each unit's row as read ('b', 'p'); a unit never charged is zeros, not stored."""
    stored = {r[0]: r for r in found.get("b", [])}
    public = {r[0] for r in found.get("p", [])}
    return tuple(UnitRow(u, stored[u][1], stored[u][2], stored[u][3], stored[u][4], u in public, True) if u in stored
                 else UnitRow(u, None, 0.0, 0.0, 0, u in public, False) for u in sorted(set(units)))


def read_state_with(
    ops: Any, units: tuple[str, ...], notion: str, ids: Sequence[str], analyst: str | None = None,
    datasets: Sequence[str] = (),
) -> tuple[ChargeState, dict[str, list[tuple]]]:
    """`read_state`, and with `analyst` their row and quota rows over `datasets` in the same
    read: one statement less inside the charge's transaction, which every charge of this
    process waits on. Returns every row read, by tag, too."""
    found = ops.charge_rows(list(units), notion, list(ids), analyst, list(datasets))
    shared = settings_of(found)
    seen: dict[str, tuple[set[str], float]] = {}
    for rid, eps, _, _, _, (unit,) in found.get("h", []):
        seen.setdefault(rid, (set(), eps))[0].add(unit)
    defaults = [v for name, v in shared.items() if name.startswith("default_limit_") and v is not None]
    return ChargeState(
        notion,
        unit_rows(found, units),
        shared.get(f"default_limit_{notion}"),
        bool(found.get("l")) or bool(defaults),
        {rid: (frozenset(us), eps) for rid, (us, eps) in seen.items()},
        bool(shared.get(NEEDS_REPAIR)),
    ), found
