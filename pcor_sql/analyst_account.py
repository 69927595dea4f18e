"""What an analyst may read about the service and about themselves — the registered datasets,
their own quotas and limits, their own history — as plain JSON, written once for both handles
(DESIGN.md §8 "Analyst endpoints"): the service's `GET /v1/datasets`, `/v1/me`, `/v1/history`
and the in-process `Analyst.datasets()`, `.me()`, `.history()` call these same functions.
Everything here is public by registration or the analyst's own (DESIGN.md §6 "Analysts and
their quotas"): no unit, limit or spending of the owner's or anyone else's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from pcor_sql.jsonable import jsonable
from pcor_sql.ledger.dataset_registry import RegisteredDataset

if TYPE_CHECKING:
    from pcor_sql.ledger.store import Ledger

#: The history rows one page holds by default, and at most (the service's query parameters too).
HISTORY_PAGE = 100
MAX_HISTORY_PAGE = 1000
#: The longest `before` (a release_id) a history page is asked for.
RELEASE_ID_LENGTH = 64


def dataset_rows(found: Iterable[RegisteredDataset]) -> list[dict[str, Any]]:
    """Each registered dataset as the analyst sees it: name, key, metrics, attributes, the
    frozen domains, how many keys are releasable (None: none declared) and the fixed accounting."""
    return [{"name": d.name, "key": d.key, "metrics": list(d.metrics), "attributes": list(d.attributes),
             "domains": {a: list(v) for a, v in d.domains}, "releasable_keys": d.releasable,
             "accounting": d.accounting} for d in found]


def allowed_datasets(ledger: Ledger, name: str | None) -> tuple[str, ...] | None:
    """The datasets analyst `name` may use (None: all, or an unnamed handle's), from the ledger."""
    from pcor_sql.ledger.analysts import list_analysts

    if name is None:
        return None
    for info in list_analysts(ledger):
        if info.name == name:
            return info.datasets
    return None


def usage(ledger: Ledger, name: str | None) -> Any:
    """The analyst's quotas and spent ε per notion, as plain JSON; an unnamed handle has none."""
    from pcor_sql.ledger.analysts import analyst_usage

    return [] if name is None else jsonable(analyst_usage(ledger, name))


def me(ledger: Ledger, name: str | None, datasets: tuple[str, ...] | None, *, min_epsilon: float,
       max_keys: int | None, max_work: int | None) -> dict[str, Any]:
    """The analyst as they may see themselves: name, datasets they may use, the least ε per
    request, the most keys per request (None: unbounded), the work cap, and their usage."""
    return {"analyst": name, "datasets": None if datasets is None else list(datasets), "min_epsilon": min_epsilon,
            "max_keys": max_keys, "max_work": max_work, "usage": usage(ledger, name)}


def history(ledger: Ledger, name: str | None, limit: int | None = None, before: str | None = None) -> Any:
    """The analyst's own requests, oldest first within the page, as plain JSON (an unnamed
    handle's requests are nobody's: none)."""
    from pcor_sql.ledger.analysts import analyst_history

    if name is None:
        return []
    return jsonable(analyst_history(ledger, name, HISTORY_PAGE if limit is None else limit, before))
