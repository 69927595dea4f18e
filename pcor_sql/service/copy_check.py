"""Which registered datasets this host's copy of the data may serve (DESIGN.md §11 "Units across
hosts"): on a ledger that several hosts share, a service serves a dataset only if its copy has
the content fingerprint recorded at registration (`ledger.fingerprints`); each other one is
refused at start — `pcor-sql serve` says which and why, one line each — and is, to analysts,
as if it were not registered. Nothing left to serve: the service does not start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pcor_sql.backends.content import fingerprinter
from pcor_sql.errors import UserError
from pcor_sql.ledger.dataset_registry import list_datasets
from pcor_sql.ledger.fingerprints import check_copy

if TYPE_CHECKING:
    from pcor_sql.owner import Owner


def copy_check(owner: Owner) -> dict[str, Any]:
    """The registered datasets this host's copy of the data may not serve, on a ledger that
    other hosts share (`ledger.fingerprints.check_copy`); none on a ledger kept in the data file
    (one file, one copy). Every one refused is a UserError: nothing left to serve."""
    if getattr(getattr(owner.ledger, "store", None), "kind", None) != "postgresql":
        return {}
    compute = fingerprinter(owner.session.access)
    if compute is None:
        return {}
    datasets = list_datasets(owner.ledger)
    refused = check_copy(owner.ledger, datasets, compute)
    if datasets and len(refused) == len(datasets):
        first = next(iter(refused.values()))
        raise UserError(f"no registered dataset can be served from this copy ({len(refused)} refused); {first.line()}",
                        "serve a copy of the registered data")
    return refused
