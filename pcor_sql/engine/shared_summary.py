"""A per-cell summary in a memory-mapped file, for search processes that outlive a request
(DESIGN.md §10).

Why a file and not pickles: a summary holds the metric's sorted runs (8 bytes a row: 80 MB
at 10M rows). A long-lived search process must read summaries built after it started (a
dataset registered later, a new data version, a BY subset), and pickling one per request
would copy it per request. Here the owning process writes each summary's arrays once into
one file; a search process maps the file copy-on-write (MAP_PRIVATE): every process reads
the same page-cache pages, and a process that wrote into an array (nothing does today) would
get its own copy of that page, never change another's. The arrays come back as plain,
writable ndarrays, so the compiled kernels see the types they were compiled for.

Where: `/dev/shm` when it has room for twice the file (memory, never written to disk),
else the temporary directory (the page cache holds it; the disk copy is written back
lazily). The file is unlinked when the summary it mirrors is garbage collected in the owning
process or when the owner closes: a process that still maps it keeps reading it (Linux frees
the pages when the last mapping goes). The files hold the metric's values: they are 0600 in a
0700 folder named for the owner's pid, and an owner killed before it could remove them (kill
-9) leaves them until the next owner starts, which removes the folders of owners that ended.

Memory: a summary's file is the size of its arrays (coords 8·m bytes a cell; five moments
40 bytes a cell; runs 8 bytes a row + 8 a cell); the owner keeps its own summary besides, so
the page cache holds a second copy of it, shared by every search process.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from pcor_sql.engine.cellruns import CellRuns
from pcor_sql.engine.schema import Schema
from pcor_sql.engine.summary import CellSummary

#: The summary's own arrays, in file order (`CellRuns` values and starts follow when present).
_MOMENTS = ("coords", "count", "s1", "s2", "vmin", "vmax")
_ALIGN = 64


@dataclass(frozen=True)
class SummaryFile:
    """What a search process needs to map a shared summary: small, pickled per request."""

    path: str
    size: int
    layout: tuple[tuple[str, str, tuple[int, ...], int], ...]  # (array, dtype, shape, offset)
    schema: Schema
    shift: float
    build_seconds: float


class SharedSummaries:
    """The owning process's side: one file per summary object (with its runs, once loaded)."""

    def __init__(self, directory: str | None = None):
        base = directory or tempfile.gettempdir()
        _remove_stale(base)
        self._dir = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)
        self._lock = threading.Lock()
        self._files: dict[tuple[int, bool], SummaryFile] = {}
        self._folders = {self._dir}
        self._closed = False

    def share(self, summary: CellSummary) -> SummaryFile:
        """The file mirroring `summary` (written on first call, its runs included if loaded)."""
        key = (id(summary), summary._runs is not None)
        with self._lock:
            if self._closed:
                raise RuntimeError("the shared summaries are closed")
            found = self._files.get(key)
            if found is not None:
                return found
            arrays = [(name, getattr(summary, name)) for name in _MOMENTS]
            if summary._runs is not None:
                arrays += [("values", summary._runs.values), ("starts", summary._runs.starts)]
            arrays = [(name, np.ascontiguousarray(a)) for name, a in arrays]
            layout, offset = [], 0
            for name, a in arrays:
                layout.append((name, a.dtype.str, tuple(a.shape), offset))
                offset += -(-a.nbytes // _ALIGN) * _ALIGN
            size = max(offset, 1)
            folder = _room(self._dir, size)
            self._folders.add(folder)
            fd, path = tempfile.mkstemp(prefix="summary-", dir=folder)
            with os.fdopen(fd, "wb") as f:
                for (_, a), (_, _, _, at) in zip(arrays, layout):
                    f.seek(at)
                    f.write(memoryview(a).cast("B"))
                f.truncate(size)
            shared = SummaryFile(path, size, tuple(layout), summary.schema, summary.shift, summary.build_seconds)
            self._files[key] = shared
            weakref.finalize(summary, self._forget, key, path)
            return shared

    def _forget(self, key: tuple[int, bool], path: str) -> None:
        with self._lock:
            if self._files.get(key) is not None and self._files[key].path == path:
                del self._files[key]
        _unlink(path)

    def close(self) -> None:
        """Unlinks every file (processes mapping one keep reading it until they drop it)."""
        with self._lock:
            self._closed = True
            paths = [f.path for f in self._files.values()]
            self._files.clear()
        for path in paths:
            _unlink(path)
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)


def attach(shared: SummaryFile) -> CellSummary:
    """A search process's summary over the shared file: moments (and runs) as views of one
    private mapping; no connection (the search reads nothing more from the data)."""
    with open(shared.path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), shared.size, access=mmap.ACCESS_COPY)
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, shape, offset in shared.layout:
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(mapped, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    runs = CellRuns(arrays.pop("values"), arrays.pop("starts")) if "values" in arrays else None
    return CellSummary(shared.schema, **arrays, shift=shared.shift, build_seconds=shared.build_seconds,
                       _con=None, _runs=runs)


#: A folder of ours: `pcor-sql-summaries-<owner pid>-<random>` (0700, its files 0600).
_PREFIX = "pcor-sql-summaries-"


def _remove_stale(base: str) -> None:
    """Folders of owners that ended without closing (kill -9): they hold the metric's values,
    so the next owner to start removes them, here and in /dev/shm."""
    for where in (base, "/dev/shm"):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            pid = name[len(_PREFIX):].split("-", 1)[0]
            if not name.startswith(_PREFIX) or not pid.isdigit():
                continue
            folder = os.path.join(where, name)
            try:
                mine = os.stat(folder).st_uid == os.getuid()
            except OSError:
                continue
            if mine and not _alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _room(default: str, size: int) -> str:
    """`/dev/shm` (a folder of ours in it) when it has room for twice `size`, else `default`."""
    try:
        stat = os.statvfs("/dev/shm")
        if stat.f_bavail * stat.f_frsize >= 2 * size and os.access("/dev/shm", os.W_OK):
            folder = os.path.join("/dev/shm", os.path.basename(default))
            os.makedirs(folder, mode=0o700, exist_ok=True)
            return folder
    except OSError:
        pass
    return default


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

