"""The owner's side of content fingerprints (DESIGN.md §11 "Units across hosts";
`ledger.fingerprints` holds the rules, `engine.content_fingerprint` the computation): recorded
when a dataset is registered, carried when the ledger moves into PostgreSQL."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from pcor_sql.backends import content
from pcor_sql.ledger import fingerprints
from pcor_sql.ledger.dataset_registry import list_datasets


def fingerprinter(owner: Any) -> Callable[[str], Any] | None:
    """`relation → Fingerprint` on the owner's data (None on Spark: not fingerprinted)."""
    return content.fingerprinter(owner.session.access)


def record_registration(owner: Any, name: str, relation: str) -> None:
    """The just registered dataset's fingerprint, appended to its record: 'registered', or
    're-registered' when it had one (the owner's explicit act after the data changed)."""
    compute = fingerprinter(owner)
    if compute is not None:
        again = fingerprints.latest(owner.ledger, name) is not None
        fingerprints.record(owner.ledger, name, relation, compute(relation), "re-registered" if again else "registered")


@contextlib.contextmanager
def carried(owner: Any, target: Any) -> Iterator[None]:
    """Around a move of the owner's ledger into `target`: its fingerprints are read first and,
    once the block moved the rest, written to `target` — with this file's own for each dataset
    that had none ('migrated')."""
    kept = fingerprints.history(owner.ledger)
    yield
    fingerprints.carry(kept, target, list_datasets(target), fingerprinter(owner))
