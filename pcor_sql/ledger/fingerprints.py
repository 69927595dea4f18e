"""Units across hosts (DESIGN.md §11): a registered dataset's content fingerprint — its row count
and an order-independent hash of its rows (`engine.content_fingerprint`) — recorded in the
ledger at registration, and checked by every service that shares the ledger before it serves
the dataset from its own copy of the data.

Why: with a shared ledger, each host reads its own copy of the data file, and the units of a
table of that file are named by schema and table (`main.staff`), not by the file. A host whose
copy differs would answer from other data while charging the same budget, so a release there
is no longer the release the budget accounts for. A host therefore serves a dataset only if its
copy has the fingerprint recorded in the ledger (`check_copy`), else refuses that dataset and
says which and why (`CopyRefusal.line`).

The history of a dataset's content: every fingerprint is appended, never overwritten —
(dataset, seq, relation, rows, hash, method, note, recorded_at) — with a note saying what
recorded it: 'registered', 're-registered' (the owner's `dataset add --replace`: the explicit
act by which data that changed becomes the registered content; 're-registered: content
changed' when it did), or 'migrated' (`budget migrate --to`, computed from the moved file).
The latest entry is the one hosts compare with.

Registrations without a fingerprint (made by an earlier version): on the embedded ledger
nothing is checked (data and ledger are one file); a move into PostgreSQL (`carry`) records the
moved file's fingerprint of each; a dataset still without one is refused by a service on a
shared ledger (it cannot tell its copy is the registered content) until the owner re-registers
it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.store_interface import LedgerOps
from pcor_sql.ledger.transactions import utc_now


@dataclass(frozen=True)
class Recorded:
    """One fingerprint entry of a dataset."""

    dataset: str
    seq: int
    relation: str
    rows: int
    content_hash: str
    method: str
    note: str
    recorded_at: Any


def history(ledger: Ledger, name: str | None = None) -> tuple[Recorded, ...]:
    """Every fingerprint recorded for `name` (or all datasets), oldest first per dataset."""
    return tuple(Recorded(*row) for row in ledger.read(lambda ops: ops.fingerprints(name), []))


def latest(ledger: Ledger, name: str) -> Recorded | None:
    found = history(ledger, name)
    return found[-1] if found else None


def record(ledger: Ledger, dataset: str, relation: str, fingerprint: Any, note: str) -> Recorded:
    """Append `fingerprint` (rows, content_hash, method) as dataset's content now; `note` says
    why ('registered', 're-registered', 'migrated'); 're-registered' becomes 're-registered:
    content changed' when it differs from the latest."""
    ledger.ensure_writable()

    def body(ops: LedgerOps) -> Recorded:
        before = [Recorded(*row) for row in ops.fingerprints(dataset)]
        said = note
        if before and note == "re-registered" and not _same(before[-1], fingerprint):
            said = "re-registered: content changed"
        row = Recorded(dataset, (before[-1].seq + 1) if before else 1, relation, fingerprint.rows,
                       fingerprint.content_hash, fingerprint.method, said, utc_now())
        ops.record_fingerprint([row.dataset, row.seq, row.relation, row.rows, row.content_hash, row.method,
                                row.note, row.recorded_at])
        return row

    return ledger.transaction(body)


def _same(recorded: Recorded, fingerprint: Any) -> bool:
    return (recorded.rows, recorded.content_hash, recorded.method) == (
        fingerprint.rows, fingerprint.content_hash, fingerprint.method)


@dataclass(frozen=True)
class CopyRefusal:
    """Why a host's copy may not serve `dataset`."""

    dataset: str
    reason: str
    fix: str

    def line(self) -> str:
        return f"dataset {self.dataset!r} is not served from this copy: {self.reason} — {self.fix}"


_REREGISTER = "or, if the data changed on purpose, re-register it from this copy: pcor-sql dataset add NAME ... --replace"


def check_copy(ledger: Ledger, datasets: Sequence[Any], compute: Callable[[str], Any]) -> dict[str, CopyRefusal]:
    """The datasets (registered, each with .name and .relation) this host's copy may not serve,
    by name: `compute(relation)` gives this copy's fingerprint."""
    recorded = {}
    for row in history(ledger):
        recorded[row.dataset] = row  # oldest first: the last one stays
    refused: dict[str, CopyRefusal] = {}
    for dataset in datasets:
        kept = recorded.get(dataset.name)
        if kept is None:
            refused[dataset.name] = CopyRefusal(
                dataset.name, "the ledger holds no content fingerprint for it (registered by an earlier version)",
                "re-register it from the data it was registered with: pcor-sql dataset add NAME ... --replace")
            continue
        here = compute(dataset.relation)
        if here.method != kept.method:
            refused[dataset.name] = CopyRefusal(
                dataset.name, f"its fingerprint was computed by {kept.method}, this host runs {here.method}",
                f"run the same DuckDB version on every host, {_REREGISTER}")
        elif here.rows != kept.rows:
            refused[dataset.name] = CopyRefusal(
                dataset.name, f"this copy holds {here.rows:,} rows, {kept.rows:,} were registered",
                f"serve a copy of the registered data, {_REREGISTER}")
        elif here.content_hash != kept.content_hash:
            refused[dataset.name] = CopyRefusal(
                dataset.name, f"this copy's rows differ from the registered ones ({here.rows:,} rows, another content hash)",
                f"serve a copy of the registered data, {_REREGISTER}")
    return refused


def carry(entries: Sequence[Recorded], target: Ledger, datasets: Sequence[Any],
          compute: Callable[[str], Any] | None) -> None:
    """A moved ledger's fingerprints (`entries`, its `history()` read before the move) into
    `target` (DESIGN.md §11, `budget migrate --to`) as they were, and for each dataset without
    one, the moved file's own (`compute(relation)`; None: not on DuckDB), noted 'migrated'."""
    if entries:
        def body(ops: LedgerOps) -> None:
            for row in entries:
                ops.record_fingerprint([row.dataset, row.seq, row.relation, row.rows, row.content_hash, row.method,
                                        row.note, row.recorded_at])

        target.transaction(body)
    have = {row.dataset for row in entries}
    for dataset in datasets:
        if dataset.name not in have and compute is not None:
            record(target, dataset.name, dataset.relation, compute(dataset.relation), "migrated")
