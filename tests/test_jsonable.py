"""One JSON encoder (DESIGN.md §6 "Only data crosses the boundary"): the CLI's output, the analyst service's HTTP responses and
the owner plane convert library values the same way, into exact JSON types only."""

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import uuid

import numpy as np

from pcor_sql import analyst_account
from pcor_sql.cli import render
from pcor_sql.jsonable import jsonable
from pcor_sql.service import analyst_endpoints, analyst_identity, owner_plane
from pcor_sql.service.http_plumbing import ok


class Kind(enum.StrEnum):
    EXPLAIN = "explain"


class Level(enum.IntEnum):
    HIGH = 3


class Loud(str):
    def __str__(self) -> str:
        return "not what it holds"


@dataclasses.dataclass
class Pair:
    left: object
    right: object


@dataclasses.dataclass
class Shown:
    hidden: int

    def as_dict(self) -> dict:
        return {"shown": self.hidden + 1}


VALUE = {
    "bytes": b"\x01\xff", "view": memoryview(b"\x02"), "gap": dt.timedelta(minutes=1, seconds=30),
    "dec": decimal.Decimal("1.25"), "dec_nan": decimal.Decimal("NaN"), "nan": math.nan, "inf": -math.inf,
    "day": dt.date(2020, 1, 2), "at": dt.datetime(2020, 1, 2, 3, 4, 5), "clock": dt.time(6, 7),
    "kind": Kind.EXPLAIN, "level": Level.HIGH, "loud": Loud("x"), "pair": Pair((1, "x"), {2}),
    "shown": Shown(1), "u": uuid.UUID(int=1), "n": np.int64(7), "f": np.float64(0.5), "yes": np.bool_(True),
    "a": np.array([1.5, 2.0]), 4: None,
}
EXPECTED = {
    "bytes": "01ff", "view": "02", "gap": 90.0, "dec": 1.25, "dec_nan": None, "nan": None, "inf": None,
    "day": "2020-01-02", "at": "2020-01-02T03:04:05", "clock": "06:07:00", "kind": "explain", "level": 3,
    "loud": "not what it holds", "pair": {"left": [1, "x"], "right": [2]}, "shown": {"shown": 2},
    "u": "00000000-0000-0000-0000-000000000001", "n": 7, "f": 0.5, "yes": True, "a": [1.5, 2.0], "4": None,
}


def exact_types(value) -> bool:
    if type(value) is dict:
        return all(type(k) is str and exact_types(v) for k, v in value.items())
    if type(value) is list:
        return all(exact_types(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


def test_values_json_lacks_are_converted_to_exact_types():
    out = jsonable(VALUE)
    assert out == EXPECTED
    assert exact_types(out)
    assert type(out["kind"]) is str and type(out["level"]) is int and type(out["loud"]) is str


def test_the_cli_and_the_service_write_the_same_document():
    cli = json.loads(render.json_text(VALUE))
    served = json.loads(ok(analyst_endpoints.jsonable(VALUE)).body)
    assert cli == served == EXPECTED


def test_there_is_one_encoder():
    assert render.jsonable is analyst_endpoints.jsonable is owner_plane.jsonable is analyst_account.jsonable is jsonable
    assert not hasattr(analyst_identity, "plain")
