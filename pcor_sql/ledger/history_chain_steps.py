"""What the ledger's writers call to keep the history chain (DESIGN.md §11 "A tamper-evident
history"): after a charge writes history rows, after an outcome changes them, after rows are
marked interrupted (a process ended, a lease lapsed), and in `budget verify`, `budget repair`
and `budget migrate`. Each runs in the caller's transaction, over `LedgerOps`: the rules are
`history_chain`'s, the statements each store's (`LedgerOps.chain_*`), so both stores keep one
and the same chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcor_sql.ledger import history_chain as chain
from pcor_sql.ledger.history_chain import FIELDS, Anchor, ChainCheck, ChainDifference, Entry, Event, Head
from pcor_sql.ledger.store_interface import LedgerOps
from pcor_sql.ledger.transactions import utc_now

Pair = tuple[str, str]


def _heads(found: Mapping[Pair, Sequence[Any]]) -> dict[Pair, Head]:
    return {pair: Head(int(link), head) for pair, (link, head) in found.items()}


def _rows(found: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(FIELDS, row)) for row in found]


def _append(ops: LedgerOps, heads: Mapping[Pair, Head], events: Mapping[Pair, Sequence[Event]]) -> None:
    entries: list[Entry] = []
    new_heads: dict[Pair, tuple[int, str]] = {}
    for pair in sorted(p for p, e in events.items() if e):
        made, new_heads[pair] = chain.extend(heads.get(pair), pair[0], pair[1], events[pair])
        entries.extend(made)
    if entries:
        ops.chain_append([chain.entry_row(e) for e in entries], new_heads, set(heads), utc_now())


def _by_pair(rows: Iterable[Mapping[str, Any]]) -> dict[Pair, list[Mapping[str, Any]]]:
    out: dict[Pair, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["unit"], r["notion"], r["seq"], r["release_id"])):
        out.setdefault((row["unit"], row["notion"]), []).append(row)
    return out


def record(ops: LedgerOps, release_ids: Sequence[str], kind: str) -> None:
    """Chain the rows of `release_ids` as they are now: written ('charge') or changed (CHANGE)."""
    if not release_ids:
        return
    found, heads = ops.chain_rows(sorted(set(release_ids)))
    events = {pair: [chain.row_event(kind, r) for r in group] for pair, group in _by_pair(_rows(found)).items()}
    _append(ops, _heads(heads), events)


def _read_all(ops: LedgerOps) -> tuple[list[dict[str, Any]], list[Entry], dict[Pair, Head]]:
    rows, entries, heads = ops.chain_all()
    return _rows(rows), [chain.entry_from(e) for e in entries], _heads(heads)


def verify(ops: LedgerOps, anchors: Iterable[Anchor] = ()) -> list[ChainCheck]:
    """Every chain checked against the history (and `anchors`): the checks that found something."""
    rows, entries, heads = _read_all(ops)
    return [c for c in chain.check_all(rows, entries, heads, anchors) if c.differences]


def heads(ops: LedgerOps) -> dict[Pair, Head]:
    return _heads(ops.chain_heads())


def repair(ops: LedgerOps) -> list[ChainDifference]:
    """Put back every row the chain vouches for, make again each chain that is not sound (from
    the history as restored), and record in each chain mended what was found. Returns it all."""
    rows, entries, found_heads = _read_all(ops)
    checks = [c for c in chain.check_all(rows, entries, found_heads) if c.differences]
    if not checks:
        return []
    present = {(r["release_id"], r["unit"]) for r in rows}
    restore = [tuple(row[f] for f in FIELDS) for c in checks for row in c.restore.values()]
    ops.chain_put_back(restore, present, [(c.unit, c.notion) for c in checks if not c.sound])
    rows, _, found_heads = _read_all(ops)
    groups = _by_pair(rows)
    now = utc_now()
    events: dict[Pair, list[Event]] = {}
    for c in checks:
        pair = (c.unit, c.notion)
        rebuilt = [] if c.sound else [chain.row_event("rebuilt", r) for r in groups.get(pair, [])]
        events[pair] = [*rebuilt, chain.repair_event(c.differences, now)]
    _append(ops, found_heads, events)
    return [d for c in checks for d in c.differences]


def build_missing(ops: LedgerOps) -> int:
    """The chain of every (unit, notion) whose history has none yet (`budget migrate` of a ledger
    from before the chain, on either store): one 'migrated' entry per row, in seq order.
    Returns how many chains it built."""
    rows, entries, found_heads = _read_all(ops)
    chained = {(e.unit, e.notion) for e in entries} | set(found_heads)
    events = {pair: [chain.row_event("migrated", r) for r in group]
              for pair, group in _by_pair(rows).items() if pair not in chained}
    _append(ops, found_heads, events)
    return len(events)
