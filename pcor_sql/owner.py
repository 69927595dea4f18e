"""The data owner's handle (DESIGN.md §6): register datasets, set limits, hand analysts a
restricted handle.

    owner = pcor_sql.Owner(con)                       # the ledger lives with the data
    owner.register("salaries", "salaries", key="id", metric="salary", by="job_title,year", limit=1.0)
    analyst = owner.analyst()                         # give this to the app that serves analysts
    analyst.explain_outlier("salaries", 42, epsilon=0.2).context
    owner.spent("salaries")                           # 0.2

The owner may do anything the plain API does (`owner.explain_outlier(query, ...)`, `coe`,
seeded runs where allowed, owner views). Limits are per privacy unit (a base table or file)
and per notion; `set_limit` accepts any spelling of a unit — a table name, `main.t`, a file
path — or a registered dataset's name, and resolves it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from pcor_sql import api, owner_content
from pcor_sql.core.bins import declared_bins, edge_text
from pcor_sql.request_specs import ACCOUNTING
from pcor_sql.ledger.input_checks import check_notion
from pcor_sql.ledger.store import NOTIONS, Ledger, LimitChange
from pcor_sql.ledger.records import BudgetStatus
from pcor_sql.ledger.seams import LedgerChoice
from pcor_sql.ledger.dataset_registry import (
    RegisteredDataset,
    add_dataset,
    check_name,
    find_dataset,
    get_dataset,
    list_datasets,
    remove_dataset,
)
from pcor_sql.engine.schema import is_numeric
from pcor_sql.errors import UserError, warn_privacy
from pcor_sql.core.verifiers.registry import VerifierRegistry
from pcor_sql.session import Session, Warn
from pcor_sql.sqltext.quoting import quote_identifier
from pcor_sql.backends.base import Engine
from pcor_sql.registration import absent_keys_note, below_spent_warning, limits_by_notion, names_of, releasable_keys
from pcor_sql.results import AnomalyResult, CoeResult, Explanation

if TYPE_CHECKING:  # annotations only: each is imported where it is used
    from pcor_sql.analyst import Analyst
    from pcor_sql.ledger.analysts import AnalystInfo
    from pcor_sql.ledger.migration import MigrationReport


class Owner:
    """The data owner's handle on `con` (a DuckDB connection or a SparkSession; rows are read
    through `self.session.access`). `ledger`: None pins the ledger to the data (see
    `pcor_sql.Session`; for Spark: `$PCOR_SQL_LEDGER`, else the per-user file), else a ledger
    file path, `":memory:"` or a Ledger."""

    def __init__(
        self,
        con: Any,
        ledger: LedgerChoice = None,
        *,
        warn: Warn | None = None,
        registry: VerifierRegistry | None = None,
        allow_seeded: bool = False,
        per_user_ledger: bool = False,
        lazy_ledger: bool = False,
    ):
        self.session = Session(con, ledger=ledger, warn=warn, registry=registry, allow_seeded=allow_seeded,
                               per_user_ledger=per_user_ledger)
        self.con = con
        if not lazy_ledger:  # opened now: a bad ledger path or the in-memory warning shows at once
            self.session.ledger()

    @property
    def ledger(self) -> Ledger:
        """The budget ledger (opened on first use: the owner's uncharged work never opens it)."""
        return self.session.ledger()

    @classmethod
    @contextmanager
    def open(cls, db: Any = None, ledger: str | None = None, *, reads: str | None = None, engine: str = "duckdb",
             spark_master: str = "local[*]", warn: Warn | None = None, allow_seeded: bool = False,
             lazy_ledger: bool = False) -> Iterator["Owner"]:
        """The owner's handle on the data a command names — a DuckDB file `db`, else an in-memory
        database with the bundled tables `reads` names, else (engine "spark") a SparkSession —
        with the ledger where it lives (`ledger.location`: the file's own, else `ledger`,
        `$PCOR_SQL_LEDGER` or the per-user file; `lazy_ledger`: opened only if a job needs it);
        closed at the end of the block."""
        from pcor_sql.backends.opening import open_data

        with open_data(db, engine, spark_master, reads) as con:
            owner = cls(con, ledger, warn=warn, allow_seeded=allow_seeded, per_user_ledger=True, lazy_ledger=lazy_ledger)
            try:
                yield owner
            finally:
                owner.session.close()

    # ---- registered datasets -------------------------------------------------------------

    def register(
        self,
        name: str,
        relation: str,
        *,
        key: str,
        metric: str | Sequence[str],
        by: str | Sequence[str],
        domains: Mapping[str, Sequence[Any]] | None = None,
        bins: Mapping[str, Any] | None = None,
        limit: float | Mapping[str, float] | None = None,
        accounting: str | None = None,
        replace: bool = False,
        releasable: Sequence[Any] | str | None = None,
    ) -> RegisteredDataset:
        """Register `relation` as dataset `name` for analysts: its record `key` column, the
        metric column(s) analysts may ask about, the context attributes `by` with their domains
        frozen now (declared here, else from ENUM types, else — with a PrivacyWarning — from
        the values present; `bins` makes numeric or date attributes ordinal: attribute → edges,
        or 'auto:K', quantiles frozen now, with a PrivacyWarning), and optionally limits (one ε for every notion, or notion → ε) on
        each unit it reads and an accounting rule analysts may not change. `releasable`: the keys
        analysts may ask about by key — a list, or a SQL predicate over the relation evaluated
        once now — frozen (None: analysts may ask about no key; DESIGN.md §6)."""
        check_name(name)
        if not isinstance(relation, str) or not relation.strip():
            raise UserError("the relation must be SQL text naming a table, view, file or subquery", "e.g. 'salaries'")
        metrics = names_of(metric, "metric")
        attributes = names_of(by, "by")
        if accounting is not None:  # by the option's spec, as a request's (DESIGN.md §6): stored canonical
            accounting = ACCOUNTING.check(accounting)
        limits = limits_by_notion(limit)
        access = self.session.access
        described, _ = access.describe(relation, quote_identifier(metrics[0]))
        columns = {c: t for c, t, _ in described[0]}
        for column, role in [(key, "key"), *[(m, "metric") for m in metrics]]:
            if column not in columns:
                raise UserError(f"the {role} column {column!r} is not a column of {relation}",
                                f"columns are: {', '.join(columns)}")
        for m in metrics:
            if not is_numeric(columns[m]):
                raise UserError(f"the metric {m!r} has type {columns[m]}, not a number", "register numeric columns")
        if key in attributes or key in metrics:
            raise UserError(f"the key {key!r} cannot also be a metric or a context attribute", "name another key column")
        binned, domains = declared_bins(bins, domains)
        if binned:
            domains = {**dict(domains or {}), **dict(binned)}  # Bins: an ordinal attribute's domain
        schema = access.schema(
            relation, quote_identifier(metrics[0]), by=attributes, domains=domains,
            warn=lambda message: warn_privacy(message, self.session.warn, stacklevel=6), described=described,
        )
        source = None if releasable is None else "list" if not isinstance(releasable, str) else f"predicate: {releasable}"
        dataset = RegisteredDataset(
            name, relation, key, metrics, attributes,
            tuple((a.name, tuple(str(v) for v in a.domain)) for a in schema.attributes),
            self.session.units(relation), accounting,
            bins=tuple((a.name, tuple(edge_text(e) for e in a.edges)) for a in schema.attributes if a.ordinal),
            releasable_source=source,
        )
        keys = None if releasable is None else releasable_keys(access, relation, key, releasable)
        if isinstance(releasable, str):
            # DESIGN.md §8: a predicate selects keys by their data, and the set is public by declaration.
            warn_privacy(f"the releasable keys of {name!r} are selected by the data ({releasable}): the set of "
                         f"{len(keys):,} keys becomes public — an analyst learns for free whether a key is in it "
                         "(a request about a key outside it is refused before any charge). Declare a list chosen "
                         "without looking at the data if that membership must stay private",
                         self.session.warn, stacklevel=3)
        if keys is not None and not isinstance(releasable, str):
            absent_keys_note(access, relation, key, keys, name, self.session.warn)
        add_dataset(self.ledger, dataset, replace=replace, releasable=keys)
        owner_content.record_registration(self, name, relation)  # DESIGN.md §11 "Units across hosts"
        for notion, epsilon in limits.items():
            for unit in dataset.units:
                change = self.ledger.set_limit(unit, epsilon, notion)
                if change.below_spent:
                    below_spent_warning(change, self.session.warn)
        return get_dataset(self.ledger, name)

    def datasets(self) -> tuple[RegisteredDataset, ...]:
        return list_datasets(self.ledger)

    def dataset(self, name: str) -> RegisteredDataset:
        return get_dataset(self.ledger, name)

    def unregister(self, name: str) -> RegisteredDataset:
        """Remove a registered dataset; its units keep their budgets and history."""
        return remove_dataset(self.ledger, name)

    # ---- budgets -------------------------------------------------------------------------

    def units(self, spelling: str) -> tuple[str, ...]:
        """The units `spelling` denotes: a registered dataset's name, or any spelling of a table,
        view or file (resolved by DuckDB's binder: `wages`, `main.wages`, `'data/w.parquet'`)."""
        if not isinstance(spelling, str) or not spelling.strip():
            raise UserError(f"invalid unit {spelling!r}", "name a table, a file or a registered dataset")
        if (found := find_dataset(self.ledger, spelling)) is not None:
            return found.units
        if self.session.access.engine != Engine.DUCKDB:  # Spark: a table name or a relation it reads
            return self.session.units(spelling)
        from pcor_sql.engine.units import resolve_spelling

        return tuple(u.name for u in resolve_spelling(self.con, spelling))

    def set_limit(self, spelling: str, epsilon: float | None, notion: str = "ocdp") -> tuple[LimitChange, ...]:
        """Set the `notion` limit of every unit `spelling` denotes (None clears it)."""
        units = self.units(spelling)
        return tuple(self.ledger.set_limit(unit, epsilon, notion) for unit in units)

    def set_default_limit(self, epsilon: float | None, notion: str = "ocdp") -> None:
        """The limit of units without their own (None clears it); makes the ledger strict."""
        self.ledger.set_default_limit(epsilon, notion)

    def mark_public(self, spelling: str, public: bool = True) -> tuple[str, ...]:
        """Mark the units `spelling` denotes public (lookup tables: never charged)."""
        units = self.units(spelling)
        for unit in units:
            self.ledger.set_public(unit, public)
        return units

    def spent(self, name: str, notion: str = "ocdp") -> float:
        """The ε spent under `notion` on the units of `name` (a registered dataset or any
        spelling of a unit): the largest among them, which is what the dataset has used."""
        return max(self.ledger.status(unit, notion).spent for unit in self.units(name))

    def status(self, spelling: str | None = None, notion: str | None = None) -> tuple[BudgetStatus, ...]:
        """Budgets per unit and notion: of `spelling`'s units, or of every unit in the ledger."""
        notions = NOTIONS if notion is None else (check_notion(notion),)
        if spelling is None:
            return tuple(s for s in self.ledger.statuses() if s.notion in notions)
        return tuple(self.ledger.status(unit, n) for unit in self.units(spelling) for n in notions)

    # ---- the jobs ------------------------------------------------------------------------

    def analyst(self) -> Analyst:
        """A restricted handle for apps that serve analysts (see `pcor_sql.analyst.Analyst`)."""
        from pcor_sql.analyst import Analyst

        return Analyst(self)

    def explain_outlier(self, query: str, **options: Any) -> Explanation:
        return api.explain_outlier(None, query, session=self.session, **options)

    def explain_outliers(self, query: str, **options: Any) -> list[Explanation]:
        return api.explain_outliers(None, query, session=self.session, **options)

    def coe(self, query: str, **options: Any) -> list[CoeResult]:
        return api.coe(None, query, session=self.session, **options)

    def identify_anomaly(self, query: str, **options: Any) -> AnomalyResult:
        return api.identify_anomaly(None, query, session=self.session, **options)

    def identify_anomalies(self, query: str, **options: Any) -> list[AnomalyResult]:
        return api.identify_anomalies(None, query, session=self.session, **options)

    def sql(self, text: str, **defaults: Any) -> Any:
        from pcor_sql.statement_runner import sql

        return sql(None, text, session=self.session, **defaults)

    # ---- analysts and the ledger's integrity (one block; pcor_sql.ledger.analysts,
    # consistency and migration do the work, so the CLI and the service reach them here) ----

    def add_analyst(self, name: str, *, quota: float | None = None, notion: str | None = None,
                    datasets: Sequence[str] | None = None) -> str:
        """Name an analyst and return their bearer token — shown this once, stored only as a
        hash. `quota`: their ε quota under `notion` (None: under every notion); `datasets`: the
        registered datasets they may use (None: all)."""
        from pcor_sql.ledger.analysts import add_analyst

        return add_analyst(self.ledger, name, quota=quota, notion=notion, datasets=datasets)

    def analysts(self) -> tuple[AnalystInfo, ...]:
        """Every analyst (`AnalystInfo`: name, created, revoked, datasets, quota usage per notion)."""
        from pcor_sql.ledger.analysts import list_analysts

        return list_analysts(self.ledger)

    def revoke_analyst(self, name: str) -> AnalystInfo:
        """Stop `name`'s token at once (their history and spent stay)."""
        from pcor_sql.ledger.analysts import revoke_analyst

        return revoke_analyst(self.ledger, name)

    def rotate_analyst(self, name: str) -> str:
        """A new token for `name`, shown this once; the old one stops at once. Quotas, spent and
        history stay; a revoked analyst is reinstated with the new token."""
        from pcor_sql.ledger.analysts import rotate_analyst

        return rotate_analyst(self.ledger, name)

    def set_analyst_quota(self, name: str, epsilon: float | None, *, notion: str | None = None,
                          dataset: str | None = None) -> None:
        """Set (None: remove) `name`'s quota under `notion` (None: every notion), over all
        datasets or on one registered `dataset`."""
        from pcor_sql.ledger.analysts import set_quota

        set_quota(self.ledger, name, epsilon, notion=notion, dataset=dataset)

    def verify_ledger(self, anchors: Iterable[Any] = ()) -> tuple[Any, ...]:
        """The totals that differ from the history (`Mismatch`: unit, notion, spent_total,
        history_sum), then the history entries its hash chain does not vouch for
        (`ChainDifference`: unit, notion, entry, problem; DESIGN.md §11), which refuse releases
        until `repair_ledger()`; empty when the ledger is consistent. `anchors`: chain heads kept
        outside the ledger — the lines `ledger_heads()` gave (JSON text) or `Anchor` values —,
        which also find a rewrite that recomputed the chain up to them."""
        from pcor_sql.ledger.history_chain import parse_anchors

        kept = list(anchors)
        try:
            parsed = parse_anchors(a for a in kept if isinstance(a, str))
        except ValueError as exc:
            raise UserError(f"the anchors: {exc}", "pass the lines `pcor-sql budget heads --format json` wrote,"
                            " unchanged") from None
        return tuple(self.ledger.verify([*parsed, *(a for a in kept if not isinstance(a, str))]))

    def ledger_heads(self) -> tuple[list[str], str]:
        """Each (unit, notion)'s history chain head as one line of JSON (unit, notion, link,
        hash) to keep outside the ledger and pass back to `verify_ledger`, and one digest of
        them all."""
        import json

        from pcor_sql.ledger.history_chain import head_lines, heads_digest

        heads = self.ledger.chain_heads()
        return [json.dumps(line) for line in head_lines(heads)], heads_digest(heads)

    def repair_ledger(self) -> tuple[Any, ...]:
        """Put back every history entry its chain vouches for, reset every total from the
        history and lift the refusal of releases; returns what differed."""
        return tuple(self.ledger.repair())

    def migrate_ledger(self) -> MigrationReport:
        """Bring a ledger in an older layout to the current one, keeping spent ε, limits and
        history (`MigrationReport`). A pre-`pcor` ledger's budgets were kept per name: each name
        that spells a unit here (a table, a file, a registered dataset, or the relation a key
        like `salaries#3c1f…` was made from) moves to that unit; the others keep their name."""
        from pcor_sql.ledger.migration import legacy_relation

        def resolve(name: str) -> tuple[str, ...]:
            # Not `self.units`: it looks in the registry, which an old ledger cannot be read for.
            for spelling in dict.fromkeys((name, legacy_relation(name))):
                if spelling is None:
                    continue
                try:
                    if self.session.access.engine != Engine.DUCKDB:
                        return self.session.units(spelling)
                    from pcor_sql.engine.units import resolve_spelling

                    return tuple(u.name for u in resolve_spelling(self.con, spelling))
                except UserError:
                    continue
            return ()

        return self.ledger.migrate(resolve)

    def move_ledger(self, url: str) -> dict[str, int]:
        """Move this ledger (embedded in the data file, or a ledger file) into the empty
        PostgreSQL ledger `url`, its whole history kept and verified row for row; a data file is
        marked so that it is used with `url` from now on (DESIGN.md §11). Rows moved per table."""
        from pcor_sql.ledger.ledger_move import move_ledger
        from pcor_sql.ledger.postgres_store import PostgresStore, is_postgres_url

        if not is_postgres_url(url):
            raise UserError(f"--to takes a PostgreSQL URL, got {url!r}", "e.g. --to postgresql://owner@host/pcor")
        target = Ledger(store=PostgresStore(url))
        try:
            with owner_content.carried(self, target):  # the fingerprints move too (DESIGN.md §11)
                return move_ledger(self.ledger, target)
        finally:
            target.close()


def redacted_url(url: str) -> str:
    """A ledger URL without its password."""
    from pcor_sql.ledger.postgres_store import redacted

    return redacted(url)


def notions_named(text: str) -> tuple[str, ...]:
    """The notions `text` names: one notion, or every one for "all" — in any ASCII case, as
    every fixed-value option (DESIGN.md §5)."""
    from pcor_sql.core.option_spec import parse_choice

    notion = parse_choice("privacy notion", text, (*NOTIONS, "all"))
    return NOTIONS if notion == "all" else (notion,)
