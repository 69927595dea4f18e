"""Which process reserved a charge, and whether it is gone (DESIGN.md §8: a service killed
mid-request shows up, on restart, as interrupted requests).

A reservation's history rows carry the reserving process's pid, host name and a start token.
When a ledger is opened, a row still 'running' whose process is gone is marked 'interrupted'
(still charged). "Gone" must not be confused by pid reuse: on Linux the token is the boot id
and the process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), which a
later process with the same pid does not share. Elsewhere the token is random per process
and only the pid's existence can be checked, so a reused pid keeps a row 'running' (charged
either way — it only delays the label). Rows of another host are never judged.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    host: str
    token: str


_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_FALLBACK = f"random:{uuid.uuid4().hex}"  # this process, where /proc cannot tell start times
_current: ProcessIdentity | None = None


def current_process() -> ProcessIdentity:
    """This process (recomputed after a fork: the child has another pid and start time)."""
    global _current
    pid = os.getpid()
    if _current is None or _current.pid != pid:
        token = start_token(pid)
        fallback = _FALLBACK if _current is None else f"random:{uuid.uuid4().hex}"
        _current = ProcessIdentity(pid, socket.gethostname(), token or fallback)
    return _current


def start_token(pid: int) -> str | None:
    """`boot id:start time` of process `pid`, or None when it does not exist, is a zombie
    (killed, not yet reaped: it runs nothing) or /proc is not there."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        boot = _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': split after the last.
    fields = stat[stat.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{boot}:{fields[19]}"


def is_gone(pid: int, token: str | None) -> bool:
    """Whether the process that wrote (`pid`, `token`) on this host has ended."""
    if token is not None and not token.startswith("random:"):
        return start_token(pid) != token
    if pid == os.getpid():
        return token != current_process().token
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by someone else
        return False
    except OSError:
        return False
    return False
