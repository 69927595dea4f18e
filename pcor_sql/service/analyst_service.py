"""The analyst service's state and the plumbing its endpoints share (DESIGN.md §8): the
owner's handle, the worker and admission pools, the identities and admissions kept, the body
checks, and `answer` — a request admitted first when it would wait, then run on a worker (see
`http_app` for the whole story). The endpoints themselves are `analyst_endpoints`."""

from __future__ import annotations

import copy
import threading
from typing import TYPE_CHECKING, Any, Callable

import anyio.to_thread
from starlette.requests import Request
from starlette.routing import Route

from pcor_sql import pipeline
from pcor_sql.analyst import OWNER_ONLY, Analyst
from pcor_sql.engine.build_threads import ServingThreads, duckdb_threads
from pcor_sql.errors import Refused, UserError
from pcor_sql.ledger.admission_memory import AdmissionMemory, NotKept, kept_only
from pcor_sql.ledger.dataset_registry import RegisteredDataset, find_dataset, list_datasets
from pcor_sql.service import analyst_identity
from pcor_sql.service.analyst_identity import Identity
from pcor_sql.service.copy_check import copy_check
from pcor_sql.service.endpoint_table import Endpoint
from pcor_sql.service.http_plumbing import bound_route
from pcor_sql.service.ledger_watch import IdentityWatch
from pcor_sql.service.owner_plane import AuditLog
from pcor_sql.service.request_schema import BadRequest, Limits, explain_schema, identify_schema, parse_body, sql_schema
from pcor_sql.service.worker_pool import WorkerPool
from pcor_sql.session import Session

if TYPE_CHECKING:
    from pcor_sql.owner import Owner

DEFAULT_MAX_WORK = pipeline.DEFAULT_MAX_WORK


class Service:
    """The app's state: the owner's handle, the worker Sessions, the limits and the schemas."""

    def __init__(self, owner: Owner, *, min_epsilon: float, limits: Limits, workers: int, max_work: int | None,
                 audit: AuditLog | None = None):
        self.owner = owner
        self.ledger = owner.ledger
        #: Registered datasets this host's copy may not serve (DESIGN.md §11 "Units across hosts"):
        #: name → `fingerprints.CopyRefusal`; to analysts they are as unregistered.
        self.refused = copy_check(owner)
        self.min_epsilon = float(min_epsilon)
        self.limits = limits
        self.max_work = max_work
        self.workers = workers
        #: Set when the service stops: running searches end at their next unit of work.
        self.stopping = threading.Event()
        self.pool = WorkerPool(owner, workers)
        self.admission = WorkerPool(owner, ADMISSION)
        #: The admissions tried on the event loop use it: its data access refuses every use.
        self.kept_session = self.admission.sessions()[0].reading_nothing()
        #: What admissions read, kept per analyst: it admits without reading, never refuses.
        self.memory = AdmissionMemory()
        #: The identities it authenticated, kept until an analyst is added, revoked or re-tokened.
        self.identities = analyst_identity.IdentityMemory()
        #: Another process's revocation on a shared ledger invalidates both memories (`ledger_watch`).
        self.watch = IdentityWatch(self.ledger, self.forget_identities)
        self.explain_schema = explain_schema(limits)
        self.identify_schema = identify_schema(limits)
        self.identify_keys_schema = identify_schema(limits, by_key=True)
        self.sql_schema = sql_schema(limits)
        #: The OpenAPI document (`openapi_document`), set by `http_app.app` from the table.
        self.document: dict[str, Any] = {}
        #: One line per request (`--audit-log`), shared with the owner's listener.
        self.audit = audit or AuditLog()

    def forget_identities(self) -> None:
        """Drop the kept identities and admissions: another process changed the analysts."""
        from pcor_sql.ledger.analysts import changed_elsewhere

        changed_elsewhere()
        self.memory.clear()

    def stop(self) -> None:
        """Interrupt every running request at its next unit of work (recorded as interrupted)."""
        self.stopping.set()

    # ---- the plumbing every endpoint shares ----------------------------------------------

    def route(self, endpoint: Endpoint) -> Route:
        """The route of `endpoint`, its handler bound to this service."""
        return bound_route(endpoint, self, self.authenticate, self.audit)

    async def authenticate(self, header: str | None) -> Identity | None:
        kept = self.identities.get(header)
        if kept is not None:
            return kept
        return await anyio.to_thread.run_sync(self.identities.read, self.ledger, header)

    async def body(self, request: Request) -> dict[str, Any]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequest("the body must be application/json", "send Content-Type: application/json", 415)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limits.max_body:
            raise BadRequest(f"the body is larger than {self.limits.max_body} bytes", "send a smaller request", 413)
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.limits.max_body:
                raise BadRequest(f"the body is larger than {self.limits.max_body} bytes", "send a smaller request", 413)
        body = parse_body(bytes(raw), self.limits)
        # An owner's option is a 403 (the trust model), not an unknown field (DESIGN.md §6).
        owners = sorted(set(body) & (OWNER_ONLY - BODY_WORDS))
        if owners:
            raise Refused(f"{owners[0]} is the data owner's option", f"drop {owners[0]}")
        return body

    def analyst(self, session: Session, identity: Identity, found: RegisteredDataset | None = None, *,
                admission: AdmissionMemory | None = None) -> Analyst:
        """The analyst handle for this request: the pipeline's analyst policy, paid from this
        analyst's quota, on the worker's own Session, its work capped. `found`: the registered
        dataset this request names, as `require_visible` read it (read once per request);
        `admission`: the memory an admission may answer from."""
        policy = pipeline.analyst_policy(identity.name, min_epsilon=self.min_epsilon, max_work=self.max_work,
                                         stop=self.stopping)
        return Analyst(self.owner, policy, session=session, registry={found.name: found} if found else None,
                       admission=admission)

    def visible(self, identity: Identity) -> list[Any]:
        return [d for d in self.served() if identity.datasets is None or d.name in identity.datasets]

    def served(self) -> list[Any]:
        """The registered datasets this service serves (all but those its copy may not)."""
        return [d for d in list_datasets(self.ledger) if d.name not in self.refused]

    def require_visible(self, identity: Identity, name: str, memory: AdmissionMemory | None = None) -> RegisteredDataset:
        """The registered dataset `name`, if this analyst may use it: one message for a dataset
        that does not exist and one this analyst may not use (one row read when it passes, or
        none when `memory` kept it)."""
        allowed = (identity.datasets is None or name in identity.datasets) and name not in self.refused
        read = lambda: find_dataset(self.ledger, name)  # noqa: E731
        found = (read() if memory is None else memory.dataset(identity.name, name, read)) if allowed else None
        if found is None:
            names = [d.name for d in self.visible(identity)]
            raise Refused(f"no dataset {name[:NAME]!r} among those you may use", f"yours: {', '.join(names) or 'none'}")
        return found

    def queued(self) -> int:
        """Requests waiting now for a worker (each in their analyst's own line)."""
        return self.pool.load()[1]

    async def run(self, identity: Identity, dataset: Dataset, call: Callable[[Analyst], Any], *,
                  pool: WorkerPool | None = None, memory: AdmissionMemory | None = None) -> Any:
        """`call` on an analyst handle for this request, on a worker (or on `pool`'s cursors),
        once the dataset it names is one this analyst may use. `dataset`: its name, or how to
        read the name from the request on the worker's Session (a statement's: `POST /v1/sql`)."""
        def work(session: Session) -> Any:
            found = self.require_visible(identity, _named(dataset, session), memory)
            return call(self.analyst(session, identity, found, admission=memory))

        if pool is not None:
            return await pool.run(work)
        return await self.pool.run(work, identity.name)

    def admitted_from_memory(self, identity: Identity, dataset: Dataset, admit: Callable[[Analyst], Any]) -> bool:
        """`admit` here, on the event loop, when all it needs is kept: True when it admitted; False
        when it would read (then nothing happened; parsing a SELECT reads DuckDB's parser, so a
        statement's admission goes to the pool). A refusal that needs no read raises here."""
        try:
            with kept_only():
                found = self.require_visible(identity, _named(dataset, self.kept_session), self.memory)
                admit(self.analyst(self.kept_session, identity, found, admission=self.memory))
            return True
        except NotKept:
            return False

    def would_wait(self, name: str) -> bool:
        """Whether a request of analyst `name` would wait now: every worker busy or others waiting
        for one."""
        running, waiting = self.pool.load()
        return running >= self.workers or waiting > 0

    async def answer(self, identity: Identity, method: str, dataset: Dataset, args: tuple[Any, ...],
                     options: dict[str, Any]) -> Any:
        """`Analyst.<method>(*args, **options)` on a worker, admitted first if it would wait (see
        the module docstring): a refusal that needs no data comes from the admission, without
        waiting; a request that finds a worker free goes to it, which checks the same. `dataset`:
        the dataset the request names (as `run` takes it). Every charging endpoint comes here —
        explain, identify and sql alike (DESIGN.md §6 "Reserve, then read")."""
        if self.would_wait(identity.name):
            admit = lambda a: a.admit(method, *copy.deepcopy(args), **copy.deepcopy(options))  # noqa: E731
            if not self.admitted_from_memory(identity, dataset, admit):
                await self.run(identity, dataset, admit, pool=self.admission, memory=self.memory)
        try:
            return await self.run(identity, dataset, lambda a: getattr(a, method)(*args, **options))
        except UserError:
            self.memory.forget(identity.name)  # perhaps admitted from what is no longer so: read afresh next time
            raise

    def serve_threads(self, asked: int | str) -> None:
        """DuckDB's threads from now on (`app(duckdb_threads=...)`); every summary build raises them back."""
        building = duckdb_threads(self.owner.con)
        serving = max(1, building // self.workers) if asked == "auto" else int(asked)
        threads = ServingThreads(self.owner.con, serving, building)
        for session in [self.owner.session, *self.pool.sessions(), *self.admission.sessions()]:
            session.building = threads.building

    def warm(self) -> None:
        """Build every registered dataset's summary on every worker before serving (see the module
        docstring): a first request is then as fast for everyone."""
        from pcor_sql.analyst_warm import warm_session

        datasets = self.served()
        for session in self.pool.sessions():
            for dataset in datasets:
                warm_session(session, dataset)



NAME = 128
#: The dataset a request names: its name, or how to read it from the request on a Session.
Dataset = str | Callable[[Session], str]


def _named(dataset: Dataset, session: Session) -> str:
    return dataset if isinstance(dataset, str) else dataset(session)

#: Body fields of the analyst's own (the owner's `dataset` option, the ledger name to charge, is
#: spelled like the body's registered dataset and is never an analyst's).
BODY_WORDS = frozenset({"dataset"})
#: Cursors that admit requests (`Service.answer`): a check takes milliseconds, so two keep up with many workers.
ADMISSION = 2
