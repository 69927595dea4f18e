"""A start line for the worker processes of the race tests: each worker says it is ready (a file
beside GO, once its imports are done) and waits for GO; the test waits, with a bound, until every
worker is ready, then creates GO. No fixed sleep stands in for "the others have started"."""

from __future__ import annotations

import os
import time
from pathlib import Path

POLL = 0.001


def arrive_and_wait(go: Path, timeout: float = 60.0) -> None:
    """In a worker: mark this process ready, then return once GO exists."""
    go.with_name(f"{go.name}.ready.{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the go signal never came")
        time.sleep(POLL)


def start_together(go: Path, workers: int, timeout: float = 60.0) -> None:
    """In the test: once `workers` processes are ready (at most `timeout` seconds), create GO."""
    deadline = time.monotonic() + timeout
    while len(list(go.parent.glob(f"{go.name}.ready.*"))) < workers:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {workers} workers were ready after {timeout:g} s")
        time.sleep(POLL)
    go.touch()
