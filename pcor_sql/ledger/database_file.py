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


def connect_with_retry(
    path: str | os.PathLike[str], *, read_only: bool = False, timeout: float = 10.0
) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB database file, waiting up to `timeout` seconds while another process holds
    its lock (DuckDB lets one process at a time open a file read-write; a reader is also locked
    out by a writer). Then a UserError names the file and the process holding it."""
    if not (isinstance(timeout, numbers.Real) and math.isfinite(timeout) and timeout >= 0):
        raise UserError(f"timeout must be a finite number of seconds ≥ 0, got {timeout!r}", "pass e.g. 10")
    target = os.fspath(path)
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
