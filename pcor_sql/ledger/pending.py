"""A charge between its check and its write (`Ledger.open_charge`), the unit names a charge
takes, and the binding unit of a charge (the one with the least headroom)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb

from pcor_sql.core.accounting import DpCost, OcdpCost, SpCost
from pcor_sql.errors import InternalError
from pcor_sql.ledger.charge_rules import (
    ChargeItem,
    ChargeState,
    UnitTotal,
    check_item,
    check_limits,
    fresh_items,
    read_state,
    write_charge,
)
from pcor_sql.ledger.input_checks import check_unit
from pcor_sql.ledger.transactions import LedgerAccess, is_conflict, rollback_quietly

COSTS = {"ocdp": OcdpCost, "dp": DpCost, "sp": lambda eps: SpCost(eps, 1)}


def unit_names(units: str | Sequence[str]) -> tuple[str, ...]:
    if not isinstance(units, (str, list, tuple)):
        check_unit(units)  # the one-line error for a single bad name
    names = (units,) if isinstance(units, str) else tuple(units)
    if not names:
        raise InternalError("a charge needs at least one unit")
    for unit in names:
        check_unit(unit)
    return tuple(sorted(set(names)))


def checked_batch(items: Iterable[ChargeItem]) -> tuple[ChargeItem, ...]:
    """The items of one charge: valid, one notion, distinct release ids."""
    batch = tuple(items)
    for item in batch:
        check_item(item)
    if len({item.notion for item in batch}) > 1:
        raise InternalError("one batch of charges mixes privacy notions")
    ids = [item.release_id for item in batch]
    if len(set(ids)) != len(ids):
        raise InternalError("one batch of charges repeats a release_id")
    return batch


def binding(totals: tuple[UnitTotal, ...], after: bool) -> tuple[float, float | None]:
    """(spent, limit) of the unit with the least headroom (limit None when no unit has one; then
    the largest spent): spent after the charge if `after`, else as the check read it."""
    if not totals:
        return 0.0, None

    def spent(t: UnitTotal) -> float:
        return t.total if after else t.row.spent

    limited = [t for t in totals if t.limit is not None]
    if not limited:
        return max(spent(t) for t in totals), None
    t = min(limited, key=lambda t: t.limit - t.total)  # type: ignore[operator]
    return spent(t), t.limit


class PendingCharge:
    """A charge between its check and its write (see `Ledger.open_charge`). `totals` holds each
    charged unit's row, limit and total after the charge; `spent` and `limit` are those of the
    unit with the least headroom (limit None when no unit has one): spent as read by the check,
    and after `commit()` the total afterwards."""

    def __init__(self, access: LedgerAccess, units: tuple[str, ...], batch: tuple[ChargeItem, ...]):
        self._access, self._units, self._batch = access, units, batch
        self._notion = batch[0].notion if batch else "ocdp"
        self.totals: tuple[UnitTotal, ...] = ()
        self._committed = False
        self._cur: duckdb.DuckDBPyConnection | None = access.cursor()
        try:
            self._cur.execute("BEGIN TRANSACTION")
            self._state = self._read(self._cur)
            self.totals = check_limits(self._state, fresh_items(self._state, batch))
        except BaseException as exc:
            self.close()
            failure = self._access.failure(exc)
            if failure is not None:
                raise failure from None
            raise

    def _read(self, cur: duckdb.DuckDBPyConnection) -> ChargeState:
        return read_state(cur, self._access.tables, self._units, self._notion, [i.release_id for i in self._batch])

    @property
    def spent(self) -> float:
        return binding(self.totals, self._committed)[0]

    @property
    def limit(self) -> float | None:
        return binding(self.totals, self._committed)[1]

    def commit(self) -> "PendingCharge":
        """Write the charge. If another writer committed to the same budgets meanwhile, DuckDB
        refuses this write; the charge then runs again from a fresh snapshot (re-checking the
        limits, so a refusal is still possible)."""
        if self._cur is None:
            raise InternalError("a pending charge was committed twice or after it was closed")
        try:
            self._write(self._cur, self._state)
            self._cur.execute("COMMIT")
        except BaseException as exc:
            self.close()
            if not is_conflict(exc):
                failure = self._access.failure(exc)
                if failure is not None:
                    raise failure from None
                raise
            self._access.transaction(lambda cur: self._write(cur, self._read(cur)))
        else:
            self._cur.close()
            self._cur = None
        self._committed = True
        return self

    def _write(self, cur: duckdb.DuckDBPyConnection, state: ChargeState) -> None:
        fresh = fresh_items(state, self._batch)
        self.totals = check_limits(state, fresh)
        write_charge(cur, self._access.tables, state, fresh, self.totals)

    def close(self) -> None:
        """Roll back whatever was not committed and give the cursor back (idempotent)."""
        if self._cur is not None:
            rollback_quietly(self._cur)
            self._cur.close()
            self._cur = None

    def __enter__(self) -> "PendingCharge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
