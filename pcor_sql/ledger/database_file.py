"""Opening a DuckDB database file that another process may hold.

DuckDB lets one process at a time open a file read-write (a file lock), and a reader is locked
out by a writer too. The ledger's guarantee across processes rests on that lock: processes
take turns, and each charge reads the spent ε its predecessors committed.

**One DuckDB instance per file per process, always** (DESIGN.md §9). Within one process DuckDB
shares one instance among the connections to a path (it normalises the spelling, symlinks
included), but a hard link of the file is another path to it: a second instance, which sees a
stale ledger, loses its writes, and drops the process's lock when it closes — after which another
process may open the file read-write beside this one. So every file opened here is recorded by
its (device, inode) while a connection to it lives; opening a file already held connects through
the holder's own path (the same instance), or, asked for another access mode, is refused.
"""

from __future__ import annotations

import math
import numbers
import os
import random
import re
import threading
import time
import weakref
from dataclasses import dataclass

import duckdb

from pcor_sql.errors import UserError


#: A DuckDB database file starts with an 8-byte checksum, then the magic bytes "DUCK".
_MAGIC_AT, _MAGIC = 8, b"DUCK"


def require_duckdb_file(path: str | os.PathLike[str], what: str = "database") -> None:
    """Refuse an existing path that is not a DuckDB database: `duckdb.connect` would open an
    in-memory database for a Parquet, CSV or JSON path (so a limit set there is lost), and a
    database file is told apart by its header alone. A path that does not exist passes (DuckDB
    makes a new database there). `what` names the file in the message ("database", "ledger")."""
    target = os.fspath(path)
    try:
        with open(target, "rb") as handle:
            head = handle.read(64)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise UserError(f"cannot open {what} {target!r}: it is a folder", "give a path to a DuckDB database file") from None
    except OSError as exc:
        raise UserError(f"cannot open {what} {target!r}: {exc.strerror}", "check the path and its permissions") from None
    if head[_MAGIC_AT:_MAGIC_AT + len(_MAGIC)] == _MAGIC:
        return
    new = " (or a path that does not exist yet: a new ledger is made there)" if what == "ledger" else ""
    raise UserError(
        f"cannot open {what} {target!r}: it is not a DuckDB database ({_looks_like(head)})",
        f"give a DuckDB database file{new}; Parquet, CSV and JSON files are data: read them in a query",
    )


def _looks_like(head: bytes) -> str:
    if not head:
        return "it is empty"
    if head.startswith(b"PAR1"):
        return "it is a Parquet file"
    if head.startswith(b"SQLite format 3"):
        return "it is a SQLite database"
    if b"\x00" in head:
        return "its header is not DuckDB's"
    text = head.decode("utf-8", "replace").lstrip()
    if text[:1] in ("{", "["):
        return "it looks like JSON"
    return "it looks like CSV or text" if "," in text or "\t" in text else "it is text"


def connect_with_retry(
    path: str | os.PathLike[str], *, read_only: bool = False, timeout: float = 10.0, what: str = "database"
) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB database file, waiting up to `timeout` seconds while another process holds
    its lock (DuckDB lets one process at a time open a file read-write; a reader is also locked
    out by a writer). Then a UserError names the file and the process holding it."""
    if not (isinstance(timeout, numbers.Real) and math.isfinite(timeout) and timeout >= 0):
        raise UserError(f"timeout must be a finite number of seconds ≥ 0, got {timeout!r}", "pass e.g. 10")
    target = os.fspath(path)
    with _HELD_LOCK:
        if _held(target, read_only, what) is None:
            # Never on a held file: closing any descriptor of a file drops every POSIX lock this
            # process has on it — DuckDB's lock included (another process could then open it).
            require_duckdb_file(target, what)
    jitter = random.Random()  # timing only, see Ledger
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            with _HELD_LOCK:  # one open at a time here: two first opens of one file make one instance
                held = _held(target, read_only, what)
                con = duckdb.connect(held or target, read_only=read_only)
                _hold(held or target, read_only, con)
                return con
        except duckdb.IOException as exc:
            message = str(exc)
            if "lock" not in message.lower():
                if read_only and "does not exist" in message:
                    raise UserError(
                        f"database {target!r} does not exist", "check the path (a read-only open cannot create it)"
                    ) from None
                raise
            if time.monotonic() >= deadline:
                pid = re.search(r"PID (\d+)", message)
                holder = f" (pid {pid.group(1)})" if pid else ""
                raise UserError(
                    f"database {target!r} is locked by another process{holder}",
                    f"wait for that process to finish or stop it, then retry (waited {timeout:g} s)",
                ) from None
        time.sleep(min(delay * (0.5 + jitter.random()), max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.1)


@dataclass
class _Holder:
    """A file this process has open: the path its instance was opened by, its access mode, and
    the connections to it (weakly: one that is closed or collected no longer holds it)."""

    path: str
    read_only: bool
    connections: list[weakref.ref]

    def alive(self) -> bool:
        live = []
        for ref in self.connections:
            con = ref()
            if con is None:
                continue
            try:
                con.cursor().close()  # raises once that connection is closed
            except duckdb.Error:
                continue
            live.append(ref)
        self.connections = live
        return bool(live)


#: The database files this process holds, by (device, inode).
_HELD: dict[tuple[int, int], _Holder] = {}
_HELD_LOCK = threading.RLock()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _held(target: str, read_only: bool, what: str) -> str | None:
    """The path to connect through when this process already holds `target`'s file (by any path:
    a hard link, a symlink, another spelling), else None; a UserError when it holds it in the
    other access mode (DuckDB would need a second instance)."""
    key = _identity(target)
    holder = _HELD.get(key) if key is not None else None
    if holder is None:
        return None
    if not holder.alive():
        del _HELD[key]  # type: ignore[arg-type]
        return None
    if holder.read_only != read_only:
        mode = "read-only" if holder.read_only else "read-write"
        raise UserError(f"cannot open {what} {target!r}: this process holds that file {mode} (as {holder.path!r})",
                        "use the connection that holds it (one DuckDB instance per file per process)")
    return holder.path


def _hold(target: str, read_only: bool, con: duckdb.DuckDBPyConnection) -> None:
    key = _identity(target)  # after connecting: a new database file exists only now
    if key is None:
        return
    holder = _HELD.get(key)
    if holder is None or not holder.alive():
        holder = _HELD[key] = _Holder(os.path.realpath(target), read_only, [])
    holder.connections.append(weakref.ref(con))

