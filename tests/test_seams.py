"""The seams of the release path, typed (DESIGN.md §4 "Layers"): the pipeline's `ReleaseSession`
and `Measurement`, the ledger's `ChargingLedger` and `Charged`, each met by the implementation a
reader lands on — `session.Session`, the jobs, `store.Ledger`, `reservation.Reservation` — with the
same parameters, so the trail from `pipeline.run` to `ReleaseJob` and the ledger is never lost at an
`Any`; and one class of each name."""

from __future__ import annotations

import ast
import inspect
import pathlib
import typing

import pytest

from pcor_sql import jobs, pipeline
from pcor_sql.backends import base as backends_base
from pcor_sql.engine import record_search, schema, search_processes
from pcor_sql.ledger import admission_memory, charge_rules, seams
from pcor_sql.ledger.reservation import Reservation
from pcor_sql.ledger.store import Ledger
from pcor_sql.session import Session

PKG = pathlib.Path(__file__).resolve().parents[1] / "pcor_sql"


def _members(protocol: type) -> dict[str, object]:
    own = {k: v for k, v in vars(protocol).items() if not k.startswith("_")}
    return {**own, **{k: None for k in typing.get_type_hints(protocol, vars(pipeline) | vars(seams) | vars(backends_base) | vars(record_search) | vars(schema) | vars(search_processes) | vars(charge_rules) | vars(admission_memory)) if k not in own}}


def _parameters(fn: object) -> tuple[int, list[str]]:
    """How many positional parameters, and the keyword-only ones by name (what a call relies on)."""
    params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    return (sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in params),
            sorted(p.name for p in params if p.kind is p.KEYWORD_ONLY))


@pytest.mark.parametrize(("protocol", "implementations"), [
    (pipeline.ReleaseSession, [Session]),
    (pipeline.Measurement, [jobs.ReleaseJob, jobs.AnswerJob, jobs.PointAnswerJob]),
    (seams.ChargingLedger, [Ledger]),
    (seams.Charged, [Reservation]),
], ids=lambda x: getattr(x, "__name__", "impl"))
def test_each_seam_is_met_by_its_implementation_with_the_same_parameters(protocol, implementations):
    members = _members(protocol)
    assert members
    for cls in implementations:
        for name, declared in members.items():
            if callable(declared):
                assert callable(getattr(cls, name, None)), (cls.__name__, name)
                assert _parameters(getattr(cls, name)) == _parameters(declared), (cls.__name__, name)
            else:  # an attribute: a class attribute, a dataclass field, or set in __init__
                source = inspect.getsource(cls)
                fields = getattr(cls, "__dataclass_fields__", {})
                assert name in fields or hasattr(cls, name) or f"self.{name}" in source, (cls.__name__, name)


def _hints(fn) -> dict:
    """`fn`'s annotations resolved, with the names pipeline imports only for type checkers (it
    imports no DuckDB module at run time: the light CLI imports its constants)."""
    return typing.get_type_hints(fn, vars(pipeline) | vars(seams) | vars(backends_base) | vars(record_search)
                                 | vars(schema) | vars(search_processes) | vars(charge_rules) | vars(admission_memory)
                                 | vars(jobs))


def test_the_release_path_is_typed_through_its_seams():
    for fn in (pipeline.quote, pipeline.run, pipeline.admit):
        assert _hints(fn)["session"] is pipeline.ReleaseSession
        assert _hints(fn)["job"] is pipeline.Measurement
    assert typing.get_type_hints(jobs.ReleaseJob.run)["session"] is pipeline.ReleaseSession
    assert typing.get_type_hints(jobs.ReleaseJob.run)["charge"] is seams.Charged
    assert _hints(pipeline.ReleaseSession.ledger)["return"] is seams.ChargingLedger


def test_one_measurement():
    """The pipeline's `Measurement` is the one class of that name: the jobs' shared base is named
    for what it shares (one charge per record)."""
    found = [f"{path.relative_to(PKG)}:{node.name}" for path in sorted(PKG.rglob("*.py"))
             for node in ast.parse(path.read_text(encoding="utf-8")).body
             if isinstance(node, ast.ClassDef) and "measurement" in node.name.lower()]
    assert found == ["pipeline.py:Measurement"]
