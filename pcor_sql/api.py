"""The Python API for apps: thin conveniences that build a request and run it on a Session.

    import duckdb, pcor_sql
    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    r = pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 42", epsilon=0.2, seed=7)
    r.context, r.predicate, r.explanation_sql

Options are the fields of `OutlierRequest` / `AnomalyRequest` by name (`pcor_sql.request_values`
documents each); an unknown one is a UserError listing the known ones. `session=` reuses a
Session's registry, ledger and cached summaries; without it each call makes a fresh Session
on `con` (fresh data, a fresh look at the ledger) with `ledger=` and `allow_seeded=` (see
`Session`). These functions act for the data owner (DESIGN.md §6); apps serving analysts use
`pcor_sql.Owner(con).analyst()`. `progress(done, total)` hears how long work goes (the
summary build in thousandths; one record's search in EM calls; a batch: records done); a
callback with a third parameter, `progress(done, total, phase)`, also hears which of those the
counts are ("building the summary", "searching", "releasing records", ...), and one with a
`phase(label)` method is told each stretch of work before its counts start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pcor_sql.core.compile_notice import listening as compiling
from pcor_sql.engine.progress import with_phases
from pcor_sql.frontend.keyed import listed_order
from pcor_sql.ledger.seams import LedgerChoice
from pcor_sql.frontend.request_builders import anomaly_request, outlier_request
from pcor_sql.results import AnomalyResult, CoeResult, Explanation
from pcor_sql.session import Session, session_for
from pcor_sql.sqltext.connection import objects_in_scope

if TYPE_CHECKING:
    import duckdb

Con = Any  # a DuckDB connection or a pyspark SparkSession; None with session=
Warn = Callable[[str], None]
Progress = Callable[[int, int], None]


def explain_outlier(con: Con, query: str, *, session: Session | None = None, warn: Warn | None = None,
                    progress: Progress | None = None, ledger: LedgerChoice = None, allow_seeded: bool = False,
                    **options: Any) -> Explanation:
    """Release, under ε-OCDP, a context in which the one record `query` selects is an outlier.

    `query` is `SELECT <metric> FROM <relation> WHERE <record selector>`; a selector that
    matches several rows is a UserError (nothing is charged) — use `explain_outliers`. The
    release is charged to the budget ledger before it is returned. Bad input raises UserError
    before any work.
    """
    session = _session(con, session, warn, ledger, allow_seeded)
    with objects_in_scope(session.con, query, warn):
        [result] = session.explain(outlier_request(session.access.parser, query, **options), progress=with_phases(progress),
                                   single=True)
    return result


def explain_outliers(con: Con, query: str, *, session: Session | None = None, warn: Warn | None = None,
                     progress: Progress | None = None, ledger: LedgerChoice = None, allow_seeded: bool = False,
                     max_records: int | None = None, workers: int = 1, **options: Any) -> list[Explanation]:
    """As `explain_outlier`, for every selected row: one Explanation each, each charged ε, all
    charges in one transaction before any search runs. A row whose release fails (no valid
    context, ...) is a `NotReleased` in its place, with its key and reason, and is not charged
    (`.released` tells the two apart); one row alone raises its error instead. `max_records`:
    refuse (before any charge) a selector picking more rows than that. `workers`: search the
    records in that many processes sharing the summary (docs/performance.md, "Using your cores"); the
    outputs, seeded or not, have the same law for any count, and a seeded batch the same values."""
    session = _session(con, session, warn, ledger, allow_seeded)
    with objects_in_scope(session.con, query, warn):
        request = outlier_request(session.access.parser, query, **options)
        results = session.explain(request, progress=with_phases(progress), max_records=max_records, workers=workers)
    return listed_order(session.access.parser, request.selector, results)


def coe(con: Con, query: str, *, session: Session | None = None, warn: Warn | None = None,
        progress: Progress | None = None, **options: Any) -> list[CoeResult]:
    """COE(D, V) for each selected record: every valid context with its utility (paper Alg. 1,
    lines 1–7). The data owner's exact tool: not differentially private, not charged to the
    ledger, never to be released."""
    session = session_for(con, session, warn)
    with objects_in_scope(session.con, query, warn):
        return session.coe(outlier_request(session.access.parser, query, **options), progress=with_phases(progress))


def identify_anomaly(con: Con, query: str, *, session: Session | None = None, warn: Warn | None = None,
                     progress: Progress | None = None, ledger: LedgerChoice = None, allow_seeded: bool = False,
                     **options: Any) -> AnomalyResult:
    """A private answer to "is the one record `query` selects a (β, r)-anomaly?".

    `query` is `SELECT <col>[, <col> ...] FROM <relation> WHERE <selector>`. Options: `beta`,
    `radius`, `epsilon` (required), `privacy` ("sp": (ε, k)-sensitive privacy, far more
    accurate on true anomalies; "dp": ε-DP), `k`, `norm` (l1, l2, linf for several columns),
    `seed`, `dataset`, `owner_view`. Several selected rows are a UserError (nothing charged) —
    use `identify_anomalies`."""
    session = _session(con, session, warn, ledger, allow_seeded)
    with objects_in_scope(session.con, query, warn):
        [result] = session.identify(anomaly_request(session.access.parser, query, describe_columns=session.access.columns,
                                                    **options), single=True, progress=with_phases(progress))
    return result


def identify_anomalies(con: Con, query: str, *, session: Session | None = None, warn: Warn | None = None,
                       progress: Progress | None = None, ledger: LedgerChoice = None, allow_seeded: bool = False,
                       max_records: int | None = None, workers: int = 1, **options: Any) -> list[AnomalyResult]:
    """As `identify_anomaly` for every selected row (no WHERE: every row). Each answer costs ε
    (sequential composition): the batch total is announced through `warn`, refused up front
    past the dataset's limit, and charged before any answer is drawn. `workers` is accepted as for
    `explain_outliers` (checked the same way); DuckDB already counts on every core and the
    answers are one vectorised draw, so it changes nothing here."""
    session = _session(con, session, warn, ledger, allow_seeded)
    with objects_in_scope(session.con, query, warn):
        return session.identify(anomaly_request(session.access.parser, query, describe_columns=session.access.columns,
                                                **options), progress=with_phases(progress), max_records=max_records,
                                workers=workers)


def _session(con: Con, session: Session | None, warn: Warn | None, ledger: LedgerChoice, allow_seeded: bool) -> Session:
    """The given session, or a fresh one with this ledger choice (see `Session`)."""
    extra: dict[str, Any] = {}
    if ledger is not None:
        extra["ledger"] = ledger
    if allow_seeded:
        extra["allow_seeded"] = True
    return session_for(con, session, warn, **extra)


# ---- the bundled datasets (for the command line's `datasets` group) -----------------------

def bundled_datasets() -> Any:
    """The bundled datasets: name, rows, columns, planted outliers (see `pcor_sql.engine.datasets`)."""
    from pcor_sql.engine.datasets import list_datasets

    return list_datasets()


def planted_outliers(name: str) -> Any:
    from pcor_sql.engine.datasets import planted_outliers as planted

    return planted(name)


def export_dataset(con: duckdb.DuckDBPyConnection | None, name: str, path: str | Path, fmt: str = "parquet", *,
                   overwrite: bool = False) -> Path:
    from pcor_sql.engine.datasets import export_dataset as export

    return export(con, name, path, fmt, overwrite=overwrite)
