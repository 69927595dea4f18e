"""A charge between its check and its write (`Ledger.open_charge`), and the unit names it takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb

from pcor_sql.core.accounting import DpCost, OcdpCost, SpCost
from pcor_sql.ledger.charge_rules import (
    ChargeItem,
    ChargeState,
    UnitTotal,
    check_limits,
    check_unit,
    fresh_items,
    is_conflict,
    read_state,
    rollback_quietly,
    write_charge,
)
from pcor_sql.errors import InternalError

if TYPE_CHECKING:
    from pcor_sql.ledger.store import Ledger

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


class PendingCharge:
    """A charge between its check and its write (see `Ledger.open_charge`). `totals` holds each
    charged unit's row, limit and total after the charge; `spent` and `limit` are those of the
    unit with the least headroom (limit None when no unit has one): spent as read by the check,
    and after `commit()` the total afterwards."""

    def __init__(self, ledger: Ledger, units: tuple[str, ...], batch: tuple[ChargeItem, ...]):
        self._ledger, self._units, self._batch = ledger, units, batch
        self._notion = batch[0].notion if batch else "ocdp"
        self.totals: tuple[UnitTotal, ...] = ()
        self._committed = False
        self._cur: duckdb.DuckDBPyConnection | None = ledger._cursor()
        try:
            self._cur.execute("BEGIN TRANSACTION")
            self._state = self._read(self._cur)
            self.totals = check_limits(self._state, fresh_items(self._state, batch))
        except BaseException:
            self.close()
            raise

    def _read(self, cur: duckdb.DuckDBPyConnection) -> ChargeState:
        return read_state(cur, self._ledger.tables, self._units, self._notion, [i.release_id for i in self._batch])

    @property
    def spent(self) -> float:
        return self._binding()[0]

    @property
    def limit(self) -> float | None:
        return self._binding()[1]

    def _binding(self) -> tuple[float, float | None]:
        if not self.totals:
            return 0.0, None
        limited = [t for t in self.totals if t.limit is not None]
        def spent(t: UnitTotal) -> float:
            return t.total if self._committed else t.row.spent

        if not limited:
            return max(spent(t) for t in self.totals), None
        t = min(limited, key=lambda t: t.limit - t.total)
        return spent(t), t.limit

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
                raise
            self._ledger.transaction(lambda cur: self._write(cur, self._read(cur)))
        else:
            self._cur.close()
            self._cur = None
        self._committed = True
        return self

    def _write(self, cur: duckdb.DuckDBPyConnection, state: ChargeState) -> None:
        fresh = fresh_items(state, self._batch)
        self.totals = check_limits(state, fresh)
        write_charge(cur, self._ledger.tables, state, fresh, self.totals)

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
