"""Output helpers: JSON conversion of DuckDB values, value display, the progress bar switch."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import sys
import uuid

import numpy as np

from pcor_sql.cli.console import ProgressBar, make_warn
from pcor_sql.cli.render import json_text, jsonable, show_value


def test_jsonable_converts_what_json_lacks():
    value = {
        "d": decimal.Decimal("1.25"), "day": dt.date(2020, 1, 2), "at": dt.datetime(2020, 1, 2, 3, 4, 5),
        "nan": math.nan, "inf": -math.inf, "b": b"\x01\xff", "u": uuid.UUID(int=1), "n": np.int64(7),
        "a": np.array([1.5, 2.0]), "t": (1, "x"), "gap": dt.timedelta(seconds=90),
    }
    assert json.loads(json_text(value)) == {
        "d": 1.25, "day": "2020-01-02", "at": "2020-01-02T03:04:05", "nan": None, "inf": None, "b": "01ff",
        "u": "00000000-0000-0000-0000-000000000001", "n": 7, "a": [1.5, 2.0], "t": [1, "x"], "gap": 90.0,
    }
    assert jsonable(True) is True and jsonable(None) is None


def test_show_value_quotes_what_could_be_misread():
    assert show_value("Registered Nurse") == "Registered Nurse"
    assert show_value("a, b") == "'a, b'"
    assert show_value("it's") == "'it''s'"
    assert show_value(" pad") == "' pad'" and show_value("") == "''"
    assert show_value(None) == "NULL" and show_value(2018) == "2018"


def test_warnings_are_single_deduplicated_lines(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    warn = make_warn()
    warn("first\nsecond")
    warn("first second")
    warn("other")
    assert err.getvalue() == "warning: first second\nwarning: other\n"


def test_progress_bar_only_on_a_terminal(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    assert ProgressBar("x").callback is None

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with ProgressBar("checking") as bar:
        assert bar.callback is not None
        bar.callback(5, 10)
        bar.callback(10, 10)
    bar.callback(1, 2)  # a later report starts a new bar
    bar.stop()
    assert "checking" in terminal.getvalue() and pipe.getvalue() == ""
