"""Opening a DuckDB database file that another process may hold.

DuckDB lets one process at a time open a file read-write (a file lock), and a reader is locked
out by a writer too. The ledger's guarantee across processes rests on that lock: processes
take turns, and each charge reads the spent ε its predecessors committed.
"""

from __future__ import annotations

import math
import numbers
import os
import random
import re
import time

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
    require_duckdb_file(target, what)
    jitter = random.Random()  # timing only, see Ledger
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            return duckdb.connect(target, read_only=read_only)
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
