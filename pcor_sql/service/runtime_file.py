"""The runtime file of a running `pcor-sql serve` (DESIGN.md §9): beside the database, named
`<database file>.pcor-serve.json` (e.g. `salaries.duckdb.pcor-serve.json`), readable and
writable by its OS user only (mode 0600). It tells owner commands where the service's owner
listener is and holds that run's owner token: while a service holds the file (DuckDB lets one
process open it read-write), `pcor-sql analyst|dataset|budget ... --db FILE` send themselves
there instead of failing with "locked".

Written atomically when the service is up (a new 0600 file renamed over the path, never through
a link: `private_files`), removed on a clean stop. A file left by a killed service is stale: its
pid is no longer alive, and readers ignore it (and remove it).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from pcor_sql.service.private_files import write_private

SUFFIX = ".pcor-serve.json"


def path_for(db: Path | str) -> Path:
    """Where the runtime file of a service over `db` lives."""
    db = Path(db).expanduser().resolve()
    return db.with_name(db.name + SUFFIX)


def new_token() -> str:
    return "pcor_owner_" + secrets.token_urlsafe(32)


def write(db: Path | str, *, owner_url: str, analyst_url: str, token: str) -> Path:
    """Write the runtime file of this process's service over `db`: a new 0600 file renamed over
    whatever was at its path (`private_files.write_private`: never through a link)."""
    target = path_for(db)
    content = {"pid": os.getpid(), "database": str(Path(db).expanduser().resolve()), "owner_url": owner_url,
               "analyst_url": analyst_url, "token": token, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return write_private(target, json.dumps(content), what="runtime file")


def write_token(path: Path | str, token: str) -> None:
    """`--owner-token-file PATH`: the token alone, in a new 0600 file renamed over PATH."""
    write_private(path, token + "\n", what="owner token file")


def remove(db: Path | str) -> None:
    """Remove this process's runtime file of `db` (not another live service's)."""
    target = path_for(db)
    found = _read(target)
    if found is not None and found.get("pid") == os.getpid():
        target.unlink(missing_ok=True)


def live(db: Path | str) -> dict[str, Any] | None:
    """The runtime file of a live service over `db`, or None (none, unreadable, or stale: its
    process is gone — then the stale file is removed)."""
    target = path_for(db)
    found = _read(target)
    if found is None:
        return None
    pid = found.get("pid")
    if type(pid) is not int or not _alive(pid):
        try:
            target.unlink()
        except OSError:
            pass
        return None
    return found


def _read(target: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("owner_url"), str) \
        and isinstance(found.get("token"), str) else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    # A zombie (exited, not yet reaped by its parent) holds no file: count it as gone.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
