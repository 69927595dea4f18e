"""What the ledger's writers call to keep the history chain (DESIGN.md §11): after a charge
writes history rows, after an outcome changes them, after the sweep of ended processes, and in
`budget verify`, `budget repair` and `budget migrate`. Each runs in the caller's transaction:
the rules are `history_chain`'s, the statements `history_chain_sql`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcor_sql.ledger import history_chain as chain
from pcor_sql.ledger import history_chain_sql as sql
from pcor_sql.ledger.history_chain import Anchor, ChainCheck, ChainDifference, Event, Head
from pcor_sql.ledger.transactions import utc_now


def _append(cur: Any, t: Any, heads: Mapping[tuple[str, str], Head],
            events: Mapping[tuple[str, str], Sequence[Event]]) -> None:
    entries, new_heads = [], {}
    for pair in sorted(p for p, e in events.items() if e):
        made, new_heads[pair] = chain.extend(heads.get(pair), pair[0], pair[1], events[pair])
        entries.extend(made)
    sql.append(cur, t, entries, new_heads, heads)


def _by_pair(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["unit"], r["notion"], r["seq"], r["release_id"])):
        out.setdefault((row["unit"], row["notion"]), []).append(row)
    return out


def record(ops: Any, release_ids: Sequence[str], kind: str) -> None:
    """Chain the rows of `release_ids` as they are now: written ('charge') or changed (CHANGE)."""
    if not release_ids:
        return
    cur, t = ops.cur, ops.t  # the DuckDB store's cursor and tables
    rows, heads, _ = sql.read_rows(cur, t, release_ids)
    _append(cur, t, heads, {pair: [chain.row_event(kind, r) for r in group] for pair, group in _by_pair(rows).items()})


def record_sweep(ops: Any, host: str) -> None:
    """Chain what `outcomes.mark_interrupted` changed: the rows of `host`'s ended processes whose
    outcome differs from their latest entry."""
    cur, t = ops.cur, ops.t
    rows, heads, bodies = sql.read_rows(cur, t, host=host, latest=True)
    events = {}
    for pair, group in _by_pair(rows).items():
        events[pair] = chain.changed_events(group, {rid: b for (u, rid), b in bodies.items() if u == pair[0]})
    _append(cur, t, heads, events)


def verify(ops: Any, anchors: Iterable[Anchor] = ()) -> list[ChainCheck]:
    """Every chain checked against the history (and `anchors`): the checks that found something."""
    cur, t = ops.cur, ops.t
    rows, entries, heads = sql.read_all(cur, t)
    return [c for c in chain.check_all(rows, entries, heads, anchors) if c.differences]


def heads(ops: Any) -> dict[tuple[str, str], Head]:
    cur, t = ops.cur, ops.t
    return sql.read_heads(cur, t)


def repair(ops: Any) -> list[ChainDifference]:
    """Put back every row the chain vouches for, make again each chain that is not sound (from
    the history as restored), and record in each chain mended what was found. Returns it all."""
    cur, t = ops.cur, ops.t
    rows, entries, heads = sql.read_all(cur, t)
    checks = [c for c in chain.check_all(rows, entries, heads) if c.differences]
    if not checks:
        return []
    present = {(r["release_id"], r["unit"]) for r in rows}
    sql.put_back(cur, t, [row for c in checks for row in c.restore.values()], present,
                 [(c.unit, c.notion) for c in checks if not c.sound])
    rows, _, heads = sql.read_all(cur, t)
    groups = _by_pair(rows)
    now = utc_now()
    events: dict[tuple[str, str], list[Event]] = {}
    for c in checks:
        pair = (c.unit, c.notion)
        rebuilt = [] if c.sound else [chain.row_event("rebuilt", r) for r in groups.get(pair, [])]
        events[pair] = [*rebuilt, chain.repair_event(c.differences, now)]
    _append(cur, t, heads, events)
    return [d for c in checks for d in c.differences]


def build_missing(ops: Any) -> int:
    """The chain of every (unit, notion) whose history has none yet (`budget migrate` of a ledger
    from before the chain): one 'migrated' entry per row, in seq order. Returns how many."""
    cur, t = ops.cur, ops.t
    rows, entries, heads = sql.read_all(cur, t)
    chained = {(e.unit, e.notion) for e in entries} | set(heads)
    events = {pair: [chain.row_event("migrated", r) for r in group]
              for pair, group in _by_pair(rows).items() if pair not in chained}
    _append(cur, t, heads, events)
    return len(events)
