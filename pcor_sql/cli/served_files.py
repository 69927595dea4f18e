"""Files an owner command writes when the service carries it out (DESIGN.md §9): written by the
caller, not by the service.

A forwarded command runs in the service's process, whose working directory, permissions and
file system are not necessarily the caller's. So a picture the command draws (`explain-outlier
--plot FILE`, `budget status --plot FILE`) is drawn there into a private temporary folder
(`target`), its bytes go back with the command's output, and the CLI writes them at the path as
the caller gave it (`write_returned`), relative to the caller's folder and as the caller's user
— the same file, and the same "drew FILE" line, as when the command runs directly. The caller
checked the path before sending the command (`charged_output.check_plot_target`), so nothing is
charged for a picture that could not be written; one that fails after the answer (a full disk)
says so in one line, as a direct run does.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from pcor_sql.errors import UserError

#: In the service, while a forwarded command runs: [temporary folder, [(caller's path, drawn file)]].
_COLLECTING: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("pcor_sql_served_files", default=None)
#: The most bytes of pictures one command sends back (a batch's pictures, each a few hundred KB).
MAX_BYTES = 64 * 1024 * 1024


def collecting() -> bool:
    """Whether files the running command writes go back to its caller (it runs in the service)."""
    return _COLLECTING.get() is not None


def target(path: Path) -> Path:
    """Where to write `path`: itself, or — in the service — a file of its temporary folder, whose
    bytes are sent back and written at `path` by the caller."""
    held = _COLLECTING.get()
    if held is None:
        return path
    folder, files = held
    drawn = Path(folder) / f"{len(files)}{path.suffix}"
    files.append((str(path), drawn))
    return drawn


@contextlib.contextmanager
def collected() -> Iterator[list[dict[str, str]]]:
    """Around a forwarded command in the service: the list it yields is filled, once the block
    ends, with each file the command wrote ({path, data}: the caller's path, base64), in order."""
    folder = tempfile.mkdtemp(prefix="pcor-served-")  # mode 0700: this user's only
    files: list[tuple[str, Path]] = []
    out: list[dict[str, str]] = []
    token = _COLLECTING.set([folder, files])
    try:
        yield out
    finally:
        _COLLECTING.reset(token)
        total = 0
        for path, drawn in files:
            try:
                data = drawn.read_bytes()
            except OSError:
                continue  # not drawn (the command failed first): nothing to write
            total += len(data)
            if total > MAX_BYTES:
                break
            out.append({"path": path, "data": base64.b64encode(data).decode("ascii")})
        shutil.rmtree(folder, ignore_errors=True)


def write_returned(files: Any) -> None:
    """In the caller: write each file the service sent back, at its path (relative to this
    process's folder, as the caller gave it). A file that cannot be written is one UserError."""
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not isinstance(entry.get("data"), str):
            continue
        path = Path(entry["path"])
        try:
            path.write_bytes(base64.b64decode(entry["data"]))
        except (OSError, ValueError) as exc:
            sys.stdout.flush()
            raise UserError(f"the release above was charged and printed, but its picture {str(path)!r} could not be "
                            f"written ({getattr(exc, 'strerror', None) or exc})",
                            "free some space or give --plot another path") from None
