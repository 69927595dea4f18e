"""What the release path asks of a ledger, as types (DESIGN.md §6 "Trust model"): the seam
between the pipeline (`pcor_sql.pipeline`) and the budget ledger (`store.Ledger`, the one
implementation, over either store). A reader who follows `session.ledger()` from the pipeline
lands here, and a test may stand in a ledger of its own that has these methods.

- `ChargingLedger`: refuse early (`ensure_writable`, `check_fit`), then charge once (`reserve`).
- `Charged`: the reservation a charge returns, on which the run records its outcome.
- `LedgerChoice`: what an owner or a Session may be given as its ledger (a path, a URL,
  ":memory:", a Ledger, or None: pinned to the data; `location.open_ledger`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence, Union

from pcor_sql.ledger.charge_rules import ChargeItem

if TYPE_CHECKING:
    from pcor_sql.ledger.admission_memory import AdmissionMemory
    from pcor_sql.ledger.store import Ledger


class Charged(Protocol):
    """A reserved charge (`reservation.Reservation`): the binding unit's total after it and its
    limit, and the outcome the run records — exactly one of these, once."""

    # Read-only: a Reservation's `spent` is a float and its `limit` may be None; settable
    # attributes would be invariant and a float field would not meet `float | None`.
    @property
    def spent(self) -> float | None: ...

    @property
    def limit(self) -> float | None: ...

    def failed(self, reason: str, *, refund: bool) -> bool: ...

    def interrupted(self, *, refund: bool) -> bool: ...

    def settle(self, failures: Mapping[int, str], *, refund: bool) -> bool: ...


class ChargingLedger(Protocol):
    """The ledger as the pipeline uses it: checked writable before any work, a cheap early
    refusal that charges nothing, and the one charge, before any row is read."""

    def ensure_writable(self) -> None: ...

    def check_fit(self, units: str | Sequence[str], items: Sequence[ChargeItem], *, analyst: str | None = None,
                  memory: AdmissionMemory | None = None) -> None: ...

    def reserve(self, units: str | Sequence[str], items: Sequence[ChargeItem], *,
                analyst: str | None = None) -> Charged: ...


#: A ledger as a caller names it (`location.open_ledger` resolves it).
LedgerChoice = Union[str, "os.PathLike[str]", "Ledger", None]
