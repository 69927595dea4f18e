"""Warming a Session for analysts (DESIGN.md §8 "No cross-analyst channels"): every
registered dataset's summary built before the first request, uncharged and for all alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcor_sql.ledger.dataset_registry import RegisteredDataset
from pcor_sql.request_values import OutlierRequest, VerifierSpec
from pcor_sql.sqltext.quoting import quote_identifier

if TYPE_CHECKING:  # annotations only
    from pcor_sql.pipeline import ReleaseSession


def warm_session(session: ReleaseSession, registered: RegisteredDataset) -> None:
    """Build on `session` the per-cell summary every request on `registered` reads (its
    registered attributes and frozen domains, each metric, with the sorted values LOF and the
    histogram need), uncharged: it reads the whole relation — no key, no analyst's choice — so
    building it early is what makes a first request cost the same for every analyst (DESIGN.md
    §8 "No cross-analyst channels"). BY subsets and Python verifiers are built on demand."""
    frozen, binned = dict(registered.domains), dict(registered.bins)
    by = registered.attributes
    for metric in registered.metrics:
        request = OutlierRequest(
            relation=registered.relation, metric=quote_identifier(metric), selector="FALSE",
            select_list=quote_identifier(metric), by=by, domains=tuple((b, frozen[b]) for b in by if b not in binned),
            bins=tuple((b, binned[b]) for b in by if b in binned) or None, verifier=VerifierSpec("lof"),
        )
        session.prepare_records(request, ())
