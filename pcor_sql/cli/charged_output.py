"""Where a charged command writes, checked before the charge, and what happens when writing
fails after it: a release that was paid for is shown (DESIGN.md §6
"Reserve, then read": the owner's charge stands once the release is computed).

Before the reservation: standard output is open, and every picture path can be written (its
directory exists and is writable, matplotlib writes its suffix). After it, what cannot be
checked beforehand — a full disk, a pipe closed midway — still leaves the release in view: the
results go to stdout first; if that fails they are written as JSON Lines on stderr, then the
error. A picture is drawn only after the results are printed.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from pcor_sql.cli.render import json_text
from pcor_sql.errors import UserError

#: The exit code of a batch in which some records were not released (each said on its own line).
PARTIAL_EXIT = 3


def check_stdout() -> None:
    """Refuse, before anything is charged, to release into a closed standard output."""
    out = sys.stdout
    closed = out is None or getattr(out, "closed", False)
    if not closed:
        try:
            os.fstat(out.fileno())
        except OSError as exc:
            closed = exc.errno == errno.EBADF
        except (AttributeError, ValueError, Exception):  # not a real file (a test's buffer): writable
            closed = False
    if closed:
        raise UserError("standard output is closed, so a release would be charged and not shown",
                        "run the command with its output open (a terminal, a pipe or > FILE)")


def check_plot_target(plot: Path) -> None:
    """Refuse, before anything is charged, a picture path that cannot be written. In the service
    (a forwarded command) the caller checked it on its own side and writes it (`served_files`)."""
    from pcor_sql.cli import served_files

    if served_files.collecting():
        return
    from matplotlib.backend_bases import FigureCanvasBase

    shown = str(plot)
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = plot.suffix[1:].lower()
    if suffix and suffix not in kinds:
        raise UserError(f"cannot draw {shown!r}: matplotlib does not write .{suffix} files",
                        f"end the --plot path in one of: {', '.join('.' + k for k in sorted(kinds))}")
    if plot.is_dir():
        raise UserError(f"--plot {shown!r} is a directory", "give a file name, e.g. --plot explanation.png")
    folder = plot.parent
    if not folder.is_dir():
        raise UserError(f"cannot draw {shown!r}: the directory {str(folder)!r} does not exist",
                        "create it, or give --plot a path in an existing directory")
    if not os.access(folder, os.W_OK | os.X_OK) or (plot.exists() and not os.access(plot, os.W_OK)):
        raise UserError(f"cannot draw {shown!r}: it is not writable", "give --plot a path you may write")


def show_charged(results: Sequence[Any], show: Callable[[], None]) -> None:
    """Print charged `results` with `show`; if stdout fails (full disk, closed pipe), write them
    as JSON Lines on stderr and raise the error, so that what was paid for is still seen."""
    try:
        show()
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        for result in results:
            sys.stderr.write(json_text(result.as_dict()) + "\n")
        sys.stderr.flush()
        _forget_stdout()
        raise UserError(f"the release was charged, but standard output failed ({reason}): it is written on "
                        "stderr above, one JSON object a line", "give the command an output it can write") from None


def draw_charged(results: Sequence[Any], plot: Path) -> list[Path]:
    """The pictures of the released records (FILE-1.png, FILE-2.png, ... for a batch, numbered
    by the record's place), after the results were printed: a failure says so, and why."""
    from pcor_sql.cli.served_files import target

    paths = []
    for i, result in enumerate(results):
        if not result.released:
            continue
        path = plot if len(results) == 1 else plot.with_name(f"{plot.stem}-{i + 1}{plot.suffix}")
        try:
            result.plot(target(path))  # in the service: drawn for the caller to write (`served_files`)
        except OSError as exc:
            raise UserError(f"the release above was charged and printed, but its picture {str(path)!r} could not "
                            f"be written ({exc.strerror or exc})", "free some space or give --plot another path") from None
        paths.append(path)
    return paths


def batch_exit(results: Sequence[Any]) -> None:
    """Exit PARTIAL_EXIT, with one error line, when a record of the batch was not released."""
    missed = [r for r in results if not r.released]
    if missed:
        from pcor_sql.cli.console import write_error

        import typer

        write_error(f"{len(missed)} of {len(results)} records not released (each is said above, with its key "
                    "and reason) — the released ones are valid releases; see --help for the exit codes")
        raise typer.Exit(PARTIAL_EXIT)


def _forget_stdout() -> None:
    """After stdout failed, the interpreter's own flush at exit would fail again (a complaint on
    stderr and exit code 120): point the file descriptor under it at /dev/null."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return  # not a file descriptor (a test's buffer): nothing flushes it at exit
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass
