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
    """A progress callback `(done, total)` that draws a rich bar on stderr when stderr is a
    terminal and does nothing otherwise. The bar starts at the first report and is removed by
    `stop()` (call it before printing results); a later report starts a new bar."""

    def __init__(self, description: str):
        self.description = description
        self.enabled = sys.stderr.isatty()
        self._progress = None
        self._task = None

    @property
    def callback(self) -> Callable[[int, int], None] | None:
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=Console(file=sys.stderr), transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
