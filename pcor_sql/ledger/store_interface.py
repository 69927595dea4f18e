"""The store under the ledger's rules (DESIGN.md §11 "Two stores, one contract").

The ledger's rules — charge before read, strict limits, quotas, refunds, outcomes, the history
as the truth, repair, the registry and the analysts — are written once, in Python, over this
interface (`store.Ledger`, `charge_rules`, `quota_rules`, `reservation`, `outcomes`,
`consistency`, `analysts`, `dataset_registry`). A store does the reads and writes and nothing
else: it holds the SQL of its database, and no module outside a store writes ledger SQL.

Two stores implement it: the embedded DuckDB store (`duckdb_store`: the ledger in schema `pcor`
of the data file or of a ledger file, DESIGN.md §6) and the PostgreSQL store (`postgres_store`,
named by a libpq URL). A rule runs its reads and writes as a body over `LedgerOps`, in one
transaction the store retries from a fresh snapshot when a concurrent writer got there first
(`LedgerStore.transaction`), or as a read outside any transaction (`LedgerStore.read`).

Rows come back as tuples in the order each method names; timestamps are naive UTC datetimes,
lists are Python lists. The history is written by `append_history` and its outcomes changed by
`set_outcome`, `mark_interrupted` and `interrupt_unleased` only, and read in order per (unit, notion) by
`history_of` and `history`: the places a hash chain over the history hooks into.
"""

from __future__ import annotations

import abc
import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pcor_sql.errors import LedgerUnreachable  # noqa: F401 - what a store raises when its server is gone

_T = TypeVar("_T")

#: The history columns a charge writes per row (`append_history`), in order.
HISTORY_ROW_COLUMNS = ("release_id", "unit", "seq", "mechanism", "epsilon", "k", "record_key", "statement",
                       "spent_after", "seeded", "role", "dataset")
#: The columns a charge writes once for all its rows (`append_history`), in order.
HISTORY_FIXED_COLUMNS = ("notion", "released_at", "outcome", "analyst", "pid", "host", "process_token")


class LedgerOps(abc.ABC):
    """The reads and writes of the ledger, on one transaction (or one read) of a store."""

    # ---- a charge (charge_reads, charge_rules, quota_rules) -----------------------------------

    @abc.abstractmethod
    def charge_rows(self, units: Sequence[str], notion: str, ids: Sequence[str], analyst: str | None,
                    datasets: Sequence[str]) -> dict[str, list[tuple]]:
        """What a charge reads, by tag, each row (name, x, y, z, n, names): 'b' the units' budget
        rows (unit, limit, spent, residual, releases), 'p' public units (unit), 's' settings
        (name, value), 'l' one row if any unit has a limit, 'h' release ids of `ids` charged
        before (release_id, epsilon, names=[unit]); with `analyst`: 'a' their row (name,
        n = 1 if revoked, names = datasets they may use) and 'q' their quota rows for `notion`
        over '' and `datasets` (dataset, limit, spent, residual, releases)."""

    @abc.abstractmethod
    def fit_rows(self, units: Sequence[str], notion: str, analyst: str | None,
                 datasets: Sequence[str]) -> dict[str, list[tuple]]:
        """The tags 'b', 'p', 's' and 'q' of `charge_rows` (an early check of a limit)."""

    @abc.abstractmethod
    def append_history(self, fixed: Sequence[object], columns: dict[str, list[object]]) -> None:
        """Insert history rows: `fixed` the values of HISTORY_FIXED_COLUMNS shared by every row,
        `columns` a list per name of HISTORY_ROW_COLUMNS (one entry per row)."""

    @abc.abstractmethod
    def update_budgets(self, notion: str, units: list[str], spent: list[float], residual: list[float],
                       releases: list[int], now: _dt.datetime, stored: bool) -> int | None:
        """Write the units' new totals: `stored` (every row was read) an UPDATE returning how many
        rows it changed; else an upsert (a new row without a limit), returning None."""

    @abc.abstractmethod
    def update_quotas(self, analyst: str, notion: str, datasets: list[str], spent: list[float],
                      residual: list[float], releases: list[int], now: _dt.datetime, stored: bool) -> int | None:
        """`update_budgets` for an analyst's quota rows."""

    # ---- outcomes and refunds (outcomes) ------------------------------------------------------

    @abc.abstractmethod
    def set_outcome(self, ids: Sequence[str], outcome: str, reason: str | None, refunded: bool,
                    now: _dt.datetime) -> list[tuple]:
        """Set the outcome of the history rows of `ids` still 'running'; (unit, notion, epsilon,
        analyst) of each row changed."""

    @abc.abstractmethod
    def budget_spent(self, notion: str, units: Sequence[str]) -> list[tuple]:
        """(unit, spent, residual) of the units' budget rows under `notion`."""

    @abc.abstractmethod
    def set_budget_spent(self, notion: str, units: list[str], spent: list[float], residual: list[float],
                         now: _dt.datetime) -> None:
        """Set the units' spent totals (a refund)."""

    @abc.abstractmethod
    def history_of(self, ids: Sequence[str]) -> list[tuple]:
        """(release_id, unit, notion, epsilon, refunded, spent_after) of the rows of `ids`, by
        unit, notion, seq."""

    @abc.abstractmethod
    def set_spent_after(self, ids: list[str], units: list[str], notions: list[str], values: list[float]) -> None:
        """Set `spent_after` of the rows (release_id, unit, notion)."""

    @abc.abstractmethod
    def mark_interrupted(self, host: str, keys: list[str], now: _dt.datetime) -> list[str]:
        """Rows still 'running' of `host` whose `pid:process_token` is in `keys`: 'interrupted'
        (reason 'process ended'); the release ids of the rows changed."""

    # ---- the history is the truth (consistency) ----------------------------------------------

    @abc.abstractmethod
    def mismatches(self, slack: float) -> list[tuple]:
        """(label, notion, spent, kept) of every unit total and analyst quota total whose spent
        differs from its history's unrefunded sum by more than `slack` of the ε that flowed
        through it (labels as `consistency.Mismatch`), by label and notion."""

    @abc.abstractmethod
    def open_state(self, slack: float) -> tuple[list[tuple], list[tuple], object]:
        """What opening reads: `mismatches(slack)`, the (host, pid, process_token, leased) of
        every holder of rows still 'running' — `leased`: it holds a lease unexpired by the
        store's clock (`renew_lease`) — and the needs-repair setting's value (None if unset)."""

    @abc.abstractmethod
    def reset_totals(self, now: _dt.datetime) -> None:
        """Every unit total and analyst quota total reset from the history (spent = the sum of
        its unrefunded ε, releases = its row count); limits kept."""

    @abc.abstractmethod
    def set_setting(self, name: str, value: float | None, now: _dt.datetime) -> None:
        """Upsert a ledger setting."""

    @abc.abstractmethod
    def delete_setting(self, name: str) -> None:
        """Remove a ledger setting."""

    # ---- budgets (store.Ledger) ---------------------------------------------------------------

    @abc.abstractmethod
    def statuses(self, unit: str | None, notion: str | None, notions: Sequence[str]) -> list[tuple]:
        """(unit, notion, own limit, default limit, spent, releases not refunded, public) of `unit`
        (whether or not stored) or of every unit with a budget row or a public mark, under each
        of `notions` (or `notion`), by unit and notion."""

    @abc.abstractmethod
    def strict(self) -> bool:
        """Whether the ledger holds any limit, own or default."""

    @abc.abstractmethod
    def history(self, unit: str | None, limit: int | None) -> list[tuple]:
        """The history rows (records.HISTORY_COLUMNS) of `unit` or of all, newest first, at most `limit`."""

    @abc.abstractmethod
    def budget_row(self, unit: str, notion: str) -> tuple | None:
        """(limit, spent) of a budget row, or None."""

    @abc.abstractmethod
    def upsert_limit(self, unit: str, notion: str, limit: float | None, now: _dt.datetime) -> None:
        """Set a unit's own limit (a new row spends nothing)."""

    @abc.abstractmethod
    def set_public(self, unit: str, public: bool, now: _dt.datetime) -> None:
        """Mark a unit public or private."""

    # ---- analysts (analysts) ------------------------------------------------------------------

    @abc.abstractmethod
    def analyst_row(self, name: str) -> tuple | None:
        """(created_at, revoked_at, datasets) of an analyst, or None."""

    @abc.abstractmethod
    def insert_analyst(self, name: str, token_hash: str, datasets: list[str] | None, now: _dt.datetime) -> None:
        """A new analyst."""

    @abc.abstractmethod
    def revoke_analyst(self, name: str, now: _dt.datetime) -> None:
        """Mark an analyst revoked (kept if revoked already)."""

    @abc.abstractmethod
    def set_token(self, name: str, token_hash: str) -> None:
        """A new token hash for an analyst, reinstated."""

    @abc.abstractmethod
    def analyst_names(self) -> list[str]:
        """Every analyst's name, sorted."""

    @abc.abstractmethod
    def analyst_tokens(self) -> list[tuple]:
        """(name, token_hash, revoked, datasets) of every analyst."""

    @abc.abstractmethod
    def quota_rows_of(self, name: str) -> list[tuple]:
        """(notion, dataset, limit, spent, releases) of an analyst's quota rows."""

    @abc.abstractmethod
    def set_quota_limits(self, name: str, notions: Sequence[str], dataset: str, limit: float | None,
                         keep_limit: bool, now: _dt.datetime) -> None:
        """Upsert an analyst's quota rows under `notions`: the limit (unless `keep_limit`) and
        always `updated_at` — the write a concurrent charge of that analyst meets."""

    @abc.abstractmethod
    def analyst_requests(self, name: str, limit: int | None, before: str | None) -> list[tuple]:
        """An analyst's requests, one per release, newest first: (release_id, first released_at,
        notion, epsilon, k, mechanism, dataset, record_key, outcome); strictly before the
        request `before` (by time, then id) when given; at most `limit`."""

    @abc.abstractmethod
    def request_counts(self) -> list[tuple]:
        """(analyst, outcome, distinct releases) over the history's rows of named analysts."""

    # ---- the registry (dataset_registry) ------------------------------------------------------

    @abc.abstractmethod
    def dataset_exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    def put_dataset(self, row: Sequence[object]) -> None:
        """Replace (or insert) a dataset: name, relation, key_column, metrics, attributes,
        domains, units, accounting, created_at, releasable."""

    @abc.abstractmethod
    def delete_dataset(self, name: str) -> None: ...

    @abc.abstractmethod
    def dataset_rows(self, name: str | None) -> list[tuple]:
        """(name, relation, key_column, metrics, attributes, domains, units, accounting,
        created_at, number of releasable keys or None) of `name`, or of all by name."""

    @abc.abstractmethod
    def releasable(self, name: str) -> list[str] | None:
        """A dataset's releasable keys (None: none declared or no such dataset)."""

    @abc.abstractmethod
    def releasable_page(self, name: str, offset: int, limit: int) -> tuple[int | None, list[str] | None] | None:
        """(how many releasable keys, `limit` of them from `offset` in their frozen order) of a
        dataset; None for no such dataset, (None, None) when none were declared."""

    @abc.abstractmethod
    def releasable_has_all(self, name: str, texts: list[str]) -> bool:
        """Whether every text is among a dataset's releasable keys."""

    # ---- the owner's views (service.owner_plane) ----------------------------------------------

    @abc.abstractmethod
    def history_page(self, filters: Sequence[tuple[str, str]], limit: int, offset: int) -> tuple[int, list[tuple]]:
        """(total, rows) of the history where each (column, value) of `filters` holds (columns:
        analyst, dataset, outcome), newest first, paged."""

    @abc.abstractmethod
    def spending(self, by: str, points: int) -> list[tuple]:
        """(series, moment, cumulative ε) per (unit, notion) or per (analyst, notion) of the rows
        not refunded, thinned to the last point of each of `points` time slices, by series, moment."""

    # ---- whole tables (moving a ledger between stores) ----------------------------------------

    @abc.abstractmethod
    def dump(self) -> dict[str, tuple[tuple[str, ...], list[tuple]]]:
        """Every ledger table: name → (columns, rows)."""

    @abc.abstractmethod
    def load(self, tables: dict[str, tuple[tuple[str, ...], list[tuple]]]) -> None:
        """Insert `dump`'s rows into this (empty) ledger."""

    @abc.abstractmethod
    def raw(self, query: str, params: Sequence[object] = ()) -> list[tuple]:
        """A statement in this store's SQL over the tables named `pcor.<table>`, for tests and
        hand edits only (placeholders $1, $2, ...): no module of the package calls it."""

    # ---- the history's hash chain and the reservations' leases (DESIGN.md §11) ---------------
    # The chain's rules are `history_chain` (written once); these are its reads and writes
    # (`history_chain_steps`). Heads are (link, hash) by (unit, notion); history rows are tuples
    # in `history_chain.FIELDS` order, entries in `history_chain.ENTRY_COLUMNS` order.

    @abc.abstractmethod
    def chain_rows(self, ids: Sequence[str]) -> tuple[list[tuple], dict[tuple[str, str], tuple[int, str]]]:
        """The history rows of `ids` and the heads of their chains, which this transaction then
        appends to (two appending to one chain: the second is refused and retried)."""

    @abc.abstractmethod
    def chain_all(self) -> tuple[list[tuple], list[tuple], dict[tuple[str, str], tuple[int, str]]]:
        """Every history row, every chain entry (by unit, notion, link) and every head."""

    @abc.abstractmethod
    def chain_heads(self) -> dict[tuple[str, str], tuple[int, str]]:
        """Every chain's head."""

    @abc.abstractmethod
    def chain_append(self, entries: Sequence[Sequence[object]], heads: dict[tuple[str, str], tuple[int, str]],
                     stored: set[tuple[str, str]], now: _dt.datetime) -> None:
        """Insert the entries and set each chain's head to `heads`; `stored`: the chains whose
        head row exists (read by this transaction, or kept by the store: `duckdb_chain_memory`)."""

    @abc.abstractmethod
    def chain_put_back(self, rows: Sequence[Sequence[object]], present: set[tuple[str, str]],
                       drop: Sequence[tuple[str, str]]) -> None:
        """A repair's writes: each history row as given (updated where (release_id, unit) is in
        `present`, else inserted), and the chains of `drop` emptied (entries and head)."""

    @abc.abstractmethod
    def renew_lease(self, holder: tuple[str, int, str], seconds: float) -> None:
        """The lease of holder (host, pid, process_token) — the reserving process of the rows it
        wrote — set to expire `seconds` from now by the store's clock (made if absent)."""

    @abc.abstractmethod
    def end_lease(self, holder: tuple[str, int, str]) -> None:
        """Remove a holder's lease (a process that ends with nothing running)."""

    @abc.abstractmethod
    def lapsed_leases(self) -> int:
        """How many leases expired by the store's clock."""

    @abc.abstractmethod
    def interrupt_unleased(self, now: _dt.datetime) -> list[str]:
        """Rows still 'running' whose holder holds no lease unexpired by the store's clock:
        'interrupted' (reason 'lease lapsed', still charged), and the expired leases removed;
        the release ids of the rows changed."""

    # ---- several services, one ledger (DESIGN.md §11): `ledger.sharing` ----------------------
    # Kept beside the layout: these tables are made when first written, so a ledger of an earlier
    # version needs no migration for them, and one without them reads as having none.

    @abc.abstractmethod
    def identity_generation(self) -> int | None:
        """How many times any process added, revoked or re-tokened an analyst of this ledger
        (0 before the first); None where one process holds the ledger (its own count suffices)."""

    @abc.abstractmethod
    def bump_identity_generation(self) -> None:
        """Count one more identity change (in the transaction that makes it)."""

    @abc.abstractmethod
    def fingerprints(self, name: str | None) -> list[tuple]:
        """Every fingerprint recorded for dataset `name` (or for all), oldest first per dataset:
        (dataset, seq, relation, row_count, content_hash, method, note, recorded_at)."""

    @abc.abstractmethod
    def record_fingerprint(self, row: Sequence[object]) -> None:
        """Append a fingerprint: (dataset, seq, relation, row_count, content_hash, method, note,
        recorded_at) — the history of a dataset's registered content."""


class LedgerStore(abc.ABC):
    """Where the ledger is kept: a transaction runner over `LedgerOps`, and the store's facts."""

    #: 'duckdb' or 'postgresql'.
    kind: str
    #: The ledger's file or URL (without a password); None in memory.
    path: str | None
    read_only: bool
    #: Whether the ledger holds its tables (a read-only store without them reads as empty).
    exists: bool

    @property
    def in_memory(self) -> bool:
        return self.path is None

    @abc.abstractmethod
    def label(self) -> str:
        """How messages name the ledger."""

    @abc.abstractmethod
    def layout_problem(self) -> Exception | None:
        """The refusal of a ledger not in the current layout (None when it is, or has none)."""

    @abc.abstractmethod
    def transaction(self, body: Callable[[LedgerOps], _T], *, single: bool = False, beside: bool = False) -> _T:
        """`body` in one transaction, run again from a fresh snapshot while a concurrent writer's
        conflict refuses it (bounded); failures a user can cause become one-line UserErrors.
        `single`: one statement (may commit on its own); `beside`: it writes only its own
        reservation's rows, so it need not wait for this process's other writers."""

    @abc.abstractmethod
    def read(self, body: Callable[[LedgerOps], _T]) -> _T:
        """`body` outside any write transaction (one snapshot where the store offers one)."""

    @abc.abstractmethod
    def migrate(self, resolve: Callable[[str], Sequence[str]] | None) -> Any:
        """Bring an older layout to the current one (`migration.MigrationReport`)."""

    @abc.abstractmethod
    def reopen(self) -> None:
        """Read the layout again (after a migration)."""

    @abc.abstractmethod
    def close(self) -> None: ...
