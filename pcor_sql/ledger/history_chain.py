"""A tamper-evident history (DESIGN.md §11): the rules of the hash chain kept per (unit, notion)
over every history row and every later change of its outcome — encoding, hashing, checking a
chain against the history, and what a repair may restore — written once for both stores. No
SQL here: each store reads and writes the chain's tables (`LedgerOps.chain_*`: `duckdb_chain`,
`postgres_chain`), and `history_chain_steps` is what the ledger's writers call.

The chain. Each (unit, notion) has entries numbered 1, 2, 3, … (`link`). An entry records one
event: a history row written ('charge'; 'migrated' when `budget migrate` built the chain for a
history that had none; 'rebuilt' when a repair made it again), a later change of that row's
outcome, refund or `spent_after` ('change': those fields' new values), or a repair ('repair':
what it found). Its `content` is a canonical text of the event (`content_text`: JSON, keys
sorted, no spaces, ASCII; floats as `float.hex`, timestamps as ISO text to the microsecond,
each tagged with its type; the version `v`, the chain's unit and notion and the entry's link
inside it, so that an entry cannot be moved to another place). It holds
`content_hash` = SHA-256(content), `prev_hash` = the previous entry's `entry_hash` (64 zeros
for the first) and `entry_hash` = SHA-256("pcor-sql history chain v1" ‖ prev_hash ‖
content_hash). The last entry's link and hash are the chain's head, kept beside it.

What checking finds (`check_chain`). The chain's entries are checked in order (numbering,
links, hashes, what the content says of its place), then folded into the state each row should
have now — a full row from its 'charge'-like entry, updated by each 'change' — and compared
field by field with the history. So these are found and named:
- a history row edited by hand (any field: ε halved, `spent_after` or the outcome rewritten,
  the totals fixed to match, so that `consistency` sees nothing) — the row differs from the
  chain;
- a row deleted (the chain holds it; the history does not), a row written outside pcor-sql
  (the history holds it; the chain does not), a row moved to another unit or notion (both);
- an entry of the chain edited, deleted or inserted without recomputing every hash after it,
  and entries removed from (or added to) the chain's end without changing its recorded head.
What it cannot find on its own: whoever can write the ledger's tables and knows this module
can recompute the whole chain and its head (SHA-256 takes no key). Such a rewrite is found only
against a head kept elsewhere: `budget verify` prints every chain's head and a digest of them
all (`heads_digest`); an owner who keeps that line outside the ledger (a log, a ticket, another
host) and compares it later, or passes an earlier chain head back (`Anchor`), finds a rewrite
of anything up to that head — a chain that still passes through an anchored (link, hash) holds,
up to that link, exactly the entries it held then. Rows written after the last anchor stay
rewritable by such an attacker.

What a repair restores (`ChainCheck.restore`). A row whose every chain entry is intact is put
back as the chain holds it (a deleted row comes back, an edited one is reset): the chain is the
record of what was charged, and the totals are then reset from the restored history, so a
rewrite that lowered ε is undone rather than accepted. A row the chain does not vouch for
(written outside pcor-sql, or whose entries were altered too) is kept as the history holds it and
named: it can only add to what is spent.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: The version of the encoding; a change of `FIELDS` or of the encoding is a new version.
VERSION = 1
#: The history's columns an entry of version 1 records, in sql/ledger.sql's order.
FIELDS = (
    "release_id", "unit", "notion", "seq", "released_at", "mechanism", "epsilon", "k", "record_key", "statement",
    "spent_after", "seeded", "role", "dataset", "analyst", "outcome", "reason", "refunded", "finished_at", "pid",
    "host", "process_token",
)
#: The fields a row's later events change (an outcome, a refund and the `spent_after` it
#: settles); every other field is fixed when the row is written.
MUTABLE = ("spent_after", "outcome", "reason", "refunded", "finished_at")
#: Kinds of entry whose content is a whole row.
WHOLE_ROW = ("charge", "migrated", "rebuilt")
CHANGE, REPAIR = "change", "repair"
KINDS = (*WHOLE_ROW, CHANGE, REPAIR)
GENESIS = "0" * 64
#: The columns of an entry in the chain's table, in `Entry`'s order.
ENTRY_COLUMNS = ("unit", "notion", "link", "kind", "release_id", "content", "content_hash", "prev_hash", "entry_hash")
_DOMAIN = "pcor-sql history chain v1"


def encode(value: Any) -> Any:
    """A value as exact JSON: None, bool, int and str as themselves; a float as its `float.hex`
    and a timestamp as ISO text to the microsecond, each tagged with its type (so no two values
    of a column share an encoding)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return {"float": float.hex(value)}
    if isinstance(value, _dt.datetime):
        return {"timestamp": value.isoformat(timespec="microseconds")}
    raise TypeError(f"the history chain cannot encode {type(value).__name__} values")


def decode(value: Any) -> Any:
    """The value `encode` made `value` from."""
    if isinstance(value, dict):
        if "float" in value:
            return float.fromhex(value["float"])
        return _dt.datetime.fromisoformat(value["timestamp"])
    return value


def canonical(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def link_hash(prev_hash: str, content_hash: str) -> str:
    return digest(f"{_DOMAIN}\n{prev_hash}\n{content_hash}")


def encoded_row(row: Mapping[str, Any], fields: Sequence[str] = FIELDS) -> dict[str, Any]:
    return {name: encode(row.get(name)) for name in fields}


def content_text(kind: str, unit: str, notion: str, link: int, release_id: str | None,
                 body: Mapping[str, Any]) -> str:
    """The canonical content of an entry: `body` is the row's fields (a whole row, or the
    changed ones) for a row's event, or what a repair found."""
    return canonical({"v": VERSION, "kind": kind, "unit": unit, "notion": notion, "link": link,
                      "release_id": release_id, "body": dict(body)})


class Head(NamedTuple):
    """A chain's last entry: its link and its hash."""

    link: int
    hash: str


GENESIS_HEAD = Head(0, GENESIS)


@dataclass(frozen=True)
class Entry:
    unit: str
    notion: str
    link: int
    kind: str
    release_id: str | None
    content: str
    content_hash: str
    prev_hash: str
    entry_hash: str


class Event(NamedTuple):
    """What an entry records: its kind, the row's release id (None for a repair) and its body."""

    kind: str
    release_id: str | None
    body: Mapping[str, Any]


def row_event(kind: str, row: Mapping[str, Any]) -> Event:
    """The event of a row written (`kind` in WHOLE_ROW: all its fields) or changed (CHANGE: the
    fields that change)."""
    return Event(kind, row["release_id"], encoded_row(row, MUTABLE if kind == CHANGE else FIELDS))


def extend(head: Head | None, unit: str, notion: str, events: Iterable[Event]) -> tuple[list[Entry], Head]:
    """The entries that append `events` to the chain of (unit, notion) whose head is `head`
    (None: an empty chain), and the new head."""
    link, prev = head or GENESIS_HEAD
    out = []
    for event in events:
        link += 1
        content = content_text(event.kind, unit, notion, link, event.release_id, event.body)
        content_hash = digest(content)
        entry_hash = link_hash(prev, content_hash)
        out.append(Entry(unit, notion, link, event.kind, event.release_id, content, content_hash, prev, entry_hash))
        prev = entry_hash
    return out, Head(link, prev)


def changed_events(rows: Iterable[Mapping[str, Any]], chained: Mapping[str, Mapping[str, Any]]) -> list[Event]:
    """The events that bring the chain up to `rows`: a whole row for a row it does not hold, a
    change for a row whose outcome fields differ from what it holds (`chained`: release id →
    the encoded fields of the row's latest entry). Other differences are left to `check_chain`."""
    out = []
    for row in rows:
        held = chained.get(row["release_id"])
        if held is None:
            out.append(row_event("charge", row))
        elif any(held.get(f) != encode(row.get(f)) for f in MUTABLE):
            out.append(row_event(CHANGE, row))
    return out


class ChainDifference(NamedTuple):
    """Something of the history of (unit, notion) that its chain does not vouch for: `entry`
    names it (`release ID (seq N)` for a history row, `chain entry N` for an entry of the
    chain), `problem` says what differs."""

    unit: str
    notion: str
    entry: str
    problem: str

    def text(self) -> str:
        return f"{self.unit} ({self.notion}), {self.entry}: {self.problem}"


class Anchor(NamedTuple):
    """A chain's head as the owner kept it elsewhere: the chain of (unit, notion) must still
    hold an entry `link` of hash `hash`."""

    unit: str
    notion: str
    link: int
    hash: str


@dataclass
class ChainCheck:
    """What `check_chain` found for one (unit, notion): the differences, the rows a repair puts
    back as the chain holds them (decoded, by release id), and whether the chain itself is
    sound (its entries intact, its head recorded, every history row in it) — else a repair
    makes it again from the restored history."""

    unit: str
    notion: str
    differences: list[ChainDifference] = field(default_factory=list)
    restore: dict[str, dict[str, Any]] = field(default_factory=dict)
    sound: bool = True


def _row_name(rid: str, row: Mapping[str, Any] | None) -> str:
    seq = row.get("seq") if row else None
    seq = decode(seq) if seq is not None else None
    return f"release {rid}" + (f" (seq {seq})" if seq is not None else "")


def _entry_problems(entry: Entry, expected_link: int, prev: str) -> tuple[list[str], dict[str, Any] | None]:
    problems = []
    if entry.link != expected_link:
        problems.append(f"is numbered {entry.link} where entry {expected_link} belongs")
    if entry.prev_hash != prev:
        problems.append("does not link to the entry before it")
    if digest(entry.content) != entry.content_hash:
        problems.append("its content does not match its hash")
    if link_hash(entry.prev_hash, entry.content_hash) != entry.entry_hash:
        problems.append("its hash is not the hash of its link and content")
    try:
        document = json.loads(entry.content)
        place = (document["v"], document["kind"], document["unit"], document["notion"], document["link"],
                 document["release_id"])
        body = document["body"]
    except (ValueError, KeyError, TypeError):
        return problems + ["its content is not an entry of this version"], None
    expected = (VERSION, entry.kind, entry.unit, entry.notion, entry.link, entry.release_id)
    if place != expected or entry.kind not in KINDS:
        problems.append("its content names another kind, place or release")
    return problems, body if isinstance(body, dict) else None


def check_chain(unit: str, notion: str, entries: Sequence[Entry], head: Head | None,
                rows: Mapping[str, Mapping[str, Any]], anchors: Sequence[Anchor] = ()) -> ChainCheck:
    """Check the chain of (unit, notion) — `entries` in link order, its recorded `head` — against
    its history `rows` (release id → the row's fields as read) and any `anchors` of it."""
    check = ChainCheck(unit, notion)

    def differ(entry: str, problem: str, *, sound: bool = True) -> None:
        check.differences.append(ChainDifference(unit, notion, entry, problem))
        check.sound = check.sound and sound

    state: dict[str, dict[str, Any]] = {}
    tainted: set[str] = set()
    prev = GENESIS
    for i, entry in enumerate(entries, 1):
        problems, body = _entry_problems(entry, i, prev)
        prev = entry.entry_hash
        if not problems and entry.kind == CHANGE and entry.release_id not in state:
            problems.append("changes a row the chain does not hold")
        if problems or body is None:
            what = f"chain entry {entry.link}" + (f" ({_row_name(entry.release_id, None)})" if entry.release_id else "")
            differ(what, "; ".join(problems or ["its content is not an entry of this version"]), sound=False)
            if entry.release_id:
                tainted.add(entry.release_id)
            continue
        if entry.kind in WHOLE_ROW:
            state[entry.release_id] = dict(body)  # type: ignore[index]
        elif entry.kind == CHANGE:
            state[entry.release_id].update(body)  # type: ignore[index]
    end = Head(len(entries), prev) if entries else None
    if end != head:
        differ("chain end", "the chain's last entry is not its recorded head (entries removed or added at its end)"
               if head is not None else "the chain has no recorded head", sound=False)
    for anchor in anchors:
        at = entries[anchor.link - 1] if 0 < anchor.link <= len(entries) else None
        if at is None or at.link != anchor.link or at.entry_hash != anchor.hash:
            differ(f"chain entry {anchor.link}", "differs from the head kept outside the ledger (the chain was"
                   " rewritten up to there)", sound=False)
    def order(rid: str) -> tuple[float, str]:
        seq = rows[rid].get("seq") if rid in rows else decode(state.get(rid, {}).get("seq"))
        return (seq if isinstance(seq, int) else float("inf"), str(rid))

    for rid in sorted(set(state) | set(rows) | tainted, key=order):
        row = rows.get(rid)
        if rid in tainted:
            if row is not None or rid in state:
                differ(_row_name(rid, row and encoded_row(row)), "its chain entries are altered or missing, so it"
                       " cannot be checked or restored: kept as the history holds it (compare it with a backup)",
                       sound=False)
            continue
        if rid not in state:
            differ(_row_name(rid, encoded_row(row)),  # type: ignore[arg-type]
                   "is not in the chain (written outside pcor-sql): kept, since it only adds to what is spent",
                   sound=False)
            continue
        held = state[rid]
        if row is None:
            differ(_row_name(rid, held), "is missing from the history (deleted): the chain holds it")
            check.restore[rid] = {f: decode(held.get(f)) for f in FIELDS}
            continue
        now = encoded_row(row)
        fields = [f for f in FIELDS if now[f] != held.get(f)]
        if fields:
            verb = "differs" if len(fields) == 1 else "differ"
            differ(_row_name(rid, held), f"{', '.join(fields)} {verb} from the chain")
            check.restore[rid] = {f: decode(held.get(f)) for f in FIELDS}
    return check


def repair_event(found: Sequence[ChainDifference], at: _dt.datetime) -> Event:
    """The entry a repair records in each chain it mends: what it found there, and when."""
    return Event(REPAIR, None, {"at": encode(at), "found": [f"{d.entry}: {d.problem}" for d in found]})


def heads_digest(heads: Mapping[tuple[str, str], Head]) -> str:
    """One digest of every chain's head, for the owner to keep outside the ledger: it changes
    when any chain gains, loses or changes an entry."""
    return digest(canonical({"v": VERSION, "heads": [[u, n, h.link, h.hash] for (u, n), h in sorted(heads.items())]}))


def body_of(content: str) -> dict[str, Any]:
    """The body of an entry's content (empty when it is not an entry's: `check_chain` names it)."""
    try:
        body = json.loads(content)["body"]
    except (ValueError, KeyError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def entry_from(row: Sequence[Any]) -> Entry:
    """An entry from its table's columns (ENTRY_COLUMNS)."""
    return Entry(*row)


def entry_row(entry: Entry) -> tuple[Any, ...]:
    """An entry as its table's columns (ENTRY_COLUMNS)."""
    return tuple(getattr(entry, name) for name in ENTRY_COLUMNS)


def check_all(rows: Iterable[Mapping[str, Any]], entries: Iterable[Entry], heads: Mapping[tuple[str, str], Head],
              anchors: Iterable[Anchor] = ()) -> list[ChainCheck]:
    """`check_chain` for every (unit, notion) that has history rows, chain entries or a head."""
    by_pair: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        by_pair.setdefault((row["unit"], row["notion"]), {})[row["release_id"]] = row
    chains: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        chains.setdefault((entry.unit, entry.notion), []).append(entry)
    kept: dict[tuple[str, str], list[Anchor]] = {}
    for anchor in anchors:
        kept.setdefault((anchor.unit, anchor.notion), []).append(anchor)
    pairs = sorted(set(by_pair) | set(chains) | set(heads) | set(kept))
    return [check_chain(u, n, sorted(chains.get((u, n), []), key=lambda e: e.link), heads.get((u, n)),
                        by_pair.get((u, n), {}), kept.get((u, n), ())) for u, n in pairs]


def head_lines(heads: Mapping[tuple[str, str], Head]) -> list[dict[str, Any]]:
    """The heads as `budget heads --format json` writes them, one object a chain."""
    return [{"unit": u, "notion": n, "link": h.link, "hash": h.hash} for (u, n), h in sorted(heads.items())]


def parse_anchors(lines: Iterable[str]) -> list[Anchor]:
    """Anchors from the lines `head_lines` made (JSON, one object a line; blank lines skipped).
    ValueError names the first line that is not one."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            anchor = Anchor(item["unit"], item["notion"], item["link"], item["hash"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"line {number} is not a chain head") from None
        if not (type(anchor.unit) is str and type(anchor.notion) is str and type(anchor.link) is int
                and anchor.link >= 1 and type(anchor.hash) is str and len(anchor.hash) == 64):
            raise ValueError(f"line {number} is not a chain head")
        out.append(anchor)
    return out
