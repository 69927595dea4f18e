"""Progress of long work, reported to a caller's `progress(done, total)` callback.

The protocol is a plain callable `progress(done, total)`; a callback that also has a
`phase(label)` method (the CLI's progress bar has one) is told what the work in hand is —
"building the summary", "checking contexts" — before its counts start. A plain function is
never called with anything but the two counts.

One SQL statement can be the long part (the per-cell summary of a large table, the ball
counts of an anomaly batch): `watch_query` polls DuckDB's own progress of the running query
from a second thread and reports it in thousandths. It does so only when a callback is given,
so an unwatched run issues exactly the statements it always did; the connection's progress
settings are put back afterwards. Where DuckDB refuses those settings (a Jupyter kernel
without ipywidgets), the query's start and end are reported instead.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import duckdb

Progress = Callable[[int, int], None]

#: A query's progress is reported as thousandths done.
PERMILLE = 1000
_POLL_SECONDS = 0.2
_SETTINGS = ("enable_progress_bar", "enable_progress_bar_print")


def with_phases(progress: Any) -> Any:
    """A caller's `progress(done, total, phase)` (a third positional parameter) as the library's
    two-count callback with a `phase` method, so each count says which work it measures (one
    callback hears a summary build in thousandths, then a batch's records); any other callback
    is returned as it is (a two-parameter function keeps being called with two counts)."""
    if progress is None or callable(getattr(progress, "phase", None)) or _positional(progress) < 3:
        return progress
    return _Phased(progress)


class _Phased:
    """`progress(done, total, phase)` behind the two-count protocol."""

    def __init__(self, progress: Callable[[int, int, str], None]):
        self._progress, self._label = progress, "working"

    def phase(self, label: str) -> None:
        self._label = label

    def __call__(self, done: int, total: int) -> None:
        self._progress(done, total, self._label)


def _positional(function: Any) -> int:
    """How many positional arguments `function` takes (3 for `*args`; 2 when it cannot say)."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 2
    kinds = [p.kind for p in parameters]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return 3
    return sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)


def report_phase(progress: Progress | None, label: str) -> None:
    """Tell `progress` what comes next, if it listens (has a `phase` method)."""
    phase = getattr(progress, "phase", None)
    if callable(phase):
        phase(label)


@contextmanager
def watch_query(con: duckdb.DuckDBPyConnection, progress: Progress | None, label: str) -> Iterator[None]:
    """Within the block, report the progress of the query `con` is running to `progress`."""
    report_phase(progress, label)
    if progress is None:
        yield
        return
    previous = con.execute(
        "SELECT " + ", ".join(f"system.main.current_setting('{name}')" for name in _SETTINGS)
    ).fetchall()[0]
    try:
        con.execute("SET enable_progress_bar_print = false")  # DuckDB's own bar would print to stdout
        con.execute("SET enable_progress_bar = true")
    except duckdb.InvalidInputException:
        # In a Jupyter kernel without ipywidgets DuckDB refuses any progress-bar setting (it would
        # draw a widget); its query progress then reads -1. Report the query's start and end only.
        progress(0, PERMILLE)
        yield
        progress(PERMILLE, PERMILLE)
        return
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(_POLL_SECONDS):
            try:
                percent = con.query_progress()
            except duckdb.Error:  # between statements, or the connection is busy closing
                continue
            if percent >= 0:
                progress(min(PERMILLE, int(percent * PERMILLE / 100)), PERMILLE)

    watcher = threading.Thread(target=poll, name="pcor-sql query progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        for name, value in zip(_SETTINGS, previous):
            con.execute(f"SET {name} = {_bool_sql(value)}")


def _bool_sql(value: Any) -> str:
    return "true" if str(value).lower() in ("true", "1") else "false"
