"""Where the CLI writes: results to stdout; warnings, errors and progress bars to stderr.

Warnings and errors are plain lines (`warning: ...`, `error: ...`), never wrapped, so scripts
can grep them. A progress bar appears only when stderr is a terminal; on a pipe nothing does.
"""

from __future__ import annotations

import sys
from typing import Callable

from rich.console import Console

# Off a terminal, lay out tables at their natural width instead of cutting them at 80 columns.
_PIPE_WIDTH = 10_000


def stdout_console() -> Console:
    """A rich console on the current stdout (made per call: tests swap sys.stdout)."""
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, highlight=False, width=None if tty else _PIPE_WIDTH, soft_wrap=not tty)


def write_line(text: str) -> None:
    """One line of machine-readable output (JSON, SQL, CSV) on stdout, untouched by rich."""
    sys.stdout.write(text + "\n")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def write_error(message: str) -> None:
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()


def make_warn() -> Callable[[str], None]:
    """A `warn(message)` callback for the library: each distinct warning once, on stderr."""
    seen: set[str] = set()

    def warn(message: str) -> None:
        line = one_line(message)
        if line not in seen:
            seen.add(line)
            sys.stderr.write(f"warning: {line}\n")
            sys.stderr.flush()

    return warn


class ProgressBar:
    """A progress callback `(done, total)` for the library that draws on stderr when stderr is
    a terminal and does nothing otherwise (so never inside JSON or any piped output).

    Used as a context manager it shows a spinner with the time elapsed from the start — work
    that reports nothing (reading the data, writing the ledger) is seen to be running — and a
    bar once counts arrive; the library's `phase(label)` names each stretch of work. `stop()`
    removes it (call it before printing results); a later report starts it again."""

    def __init__(self, description: str, *, when: bool = True):
        self.description = description
        self.enabled = when and sys.stderr.isatty()
        self._progress = None
        self._task = None

    @property
    def callback(self) -> "ProgressBar | None":
        """What to pass as the library's `progress=`: this bar, or None off a terminal."""
        return self if self.enabled else None

    def __call__(self, done: int, total: int) -> None:
        self.update(done, total)

    def update(self, done: int, total: int) -> None:
        self._start()
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=total, counts=f"{done:,}/{total:,}")

    def phase(self, label: str) -> None:
        """The next stretch of work: its label, and a spinner until its counts arrive."""
        self.description = label
        self._start()
        if self._progress is not None:
            self._progress.update(self._task, description=label, completed=0, total=None, counts="")

    def _start(self) -> None:
        if self._progress is not None or not self.enabled:
            return
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True,
            redirect_stdout=False,  # results written meanwhile (coe's JSON lines) stay on stdout
        )
        self._progress.start()
        self._task = self._progress.add_task(self.description, total=None, counts="")

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "ProgressBar":
        self._start()
        if not self.enabled:
            # Off a terminal there is no bar, yet a first run's compile (10-35 s) must not look
            # like a hang: one line on stderr when it begins (a cache load says nothing).
            from contextlib import ExitStack

            from pcor_sql.api import compiling

            self._notice = ExitStack()
            self._notice.enter_context(compiling(self._compiling))
        return self

    def _compiling(self, begins: bool) -> None:
        if begins and not getattr(self, "_told", False):
            self._told = True
            sys.stderr.write(f"warning: {COMPILE_NOTE}\n")
            sys.stderr.flush()

    def __exit__(self, *exc: object) -> None:
        notice = getattr(self, "_notice", None)
        if notice is not None:
            notice.close()
            self._notice = None
        self.stop()


#: Said once on stderr off a terminal when numba compiles (a terminal's bar says it as a phase).
COMPILE_NOTE = ("compiling the validity checks for this machine, once (10-35 s): later runs load them from "
                "numba's cache")
