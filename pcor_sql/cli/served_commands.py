"""Owner commands on a file a running service holds (DESIGN.md §9): carried out by the service.

DuckDB lets one process open a file read-write, and while `pcor-sql serve --db FILE` runs that
process is the service. So an owner command naming FILE (`analyst add|list|revoke|rotate|quota`,
`dataset add|list|show|remove`, `budget status|history|verify|repair|set-limit|default-limit|
public`) looks for the service's runtime file (`pcor_sql.service.runtime_file`); when a live
service holds FILE, the command's arguments go to its owner listener (POST /v1/owner/command,
with the owner token from that file), the service runs the very same command on its own open
Owner, and its exit code, stdout and stderr come back as they are: the same output, formats and
exit codes as without a service. Otherwise the command opens the file itself, as always.

A command racing a stop runs once: the service refuses a command once it is stopping (before
running it), and a refused or unreachable service means the command opens the file directly —
waiting for the stopping process to let go of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Sequence

#: The owner commands a service runs for the file it holds.
FORWARDED = frozenset({
    *(("analyst", c) for c in ("add", "list", "revoke", "rotate", "quota")),
    *(("dataset", c) for c in ("add", "list", "show", "remove")),
    *(("budget", c) for c in ("status", "history", "verify", "repair", "set-limit", "default-limit", "public")),
})
#: Options whose value is a path the service must read as the caller meant it (its cwd differs).
PATH_OPTIONS = ("--db", "--plot")
#: Seconds a command waits for a stopping service to release the file before opening it.
RELEASE_WAIT_S = 20.0

#: In the service's process: (the served file, its Owner) — `open_owner` yields that Owner.
SERVED: contextvars.ContextVar[tuple[Path, Any] | None] = contextvars.ContextVar("pcor_sql_served", default=None)
_ONE_AT_A_TIME = threading.Lock()


def command_of(argv: Sequence[str]) -> tuple[str, str] | None:
    """(group, command) of an argv like `analyst add ana --db f`, skipping global options."""
    words = [a for a in argv if not a.startswith("-")]
    return (words[0], words[1]) if len(words) >= 2 else None


def db_of(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--db" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--db="):
            return arg[len("--db="):]
    return None


def absolute(argv: Sequence[str]) -> list[str]:
    """`argv` with the values of PATH_OPTIONS made absolute (the service's cwd is not ours)."""
    out = list(argv)
    for i, arg in enumerate(out):
        for option in PATH_OPTIONS:
            if arg == option and i + 1 < len(out):
                out[i + 1] = str(Path(out[i + 1]).expanduser().resolve())
            elif arg.startswith(option + "="):
                out[i] = f"{option}={Path(arg[len(option) + 1:]).expanduser().resolve()}"
    return out


def forward_if_served(argv: Sequence[str]) -> int | None:
    """Run `argv` through the service holding its --db file, if one does: write what it printed
    and return its exit code. None: run it here (no service holds the file, or it is stopping)."""
    if SERVED.get() is not None or "--help" in argv or "-h" in argv:
        return None
    command, db = command_of(argv), db_of(argv)
    if command not in FORWARDED or db is None:
        return None
    from pcor_sql.service import runtime_file

    found = runtime_file.live(db)
    if found is None:
        return None
    request = urllib.request.Request(
        found["owner_url"].rstrip("/") + "/v1/owner/command", method="POST",
        data=json.dumps({"argv": absolute(argv)}).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {found['token']}"})
    context = None
    if found["owner_url"].startswith("https://"):
        import ssl

        # Loopback only, and the token authenticates: the service's certificate names its public host.
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=600, context=context) as response:  # noqa: S310 - loopback
            answer = json.loads(response.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        _wait_for_release(found)  # refused (stopping) or gone: the file is ours once it lets go
        return None
    sys.stdout.write(answer.get("stdout", ""))
    sys.stderr.write(answer.get("stderr", ""))
    sys.stdout.flush()
    return int(answer.get("exit_code", 1))


def _wait_for_release(found: dict[str, Any]) -> None:
    from pcor_sql.service import runtime_file

    deadline = time.monotonic() + RELEASE_WAIT_S
    while time.monotonic() < deadline and runtime_file.live(found["database"]) is not None:
        time.sleep(0.1)


def run_served(group: Any, owner: Any, db: Path, argv: list[str]) -> tuple[int, str, str]:
    """In the service: run the owner command `argv` of the CLI's click `group` on the service's
    own Owner (`SERVED`), one at a time, capturing what it prints. Only FORWARDED commands
    naming the served file."""
    from typer.testing import CliRunner

    if command_of(argv) not in FORWARDED:
        return 2, "", "error: this service runs only the owner's analyst, dataset and budget commands\n"
    named = db_of(argv)
    if named is None or Path(named).expanduser().resolve() != db:
        return 2, "", f"error: this service holds {db}, not {named} — run the command on that file\n"
    with _ONE_AT_A_TIME, serving(owner, db), CliRunner().isolation() as (out, err, _):
        # The CLI's own group: its errors become one line and an exit code, as on a terminal.
        code = group.main(args=argv, prog_name="pcor-sql", standalone_mode=False)
        sys.stdout.flush()
        sys.stderr.flush()
        return int(code or 0), out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


@contextlib.contextmanager
def serving(owner: Any, db: Path) -> Iterator[None]:
    token = SERVED.set((db, owner))
    try:
        yield
    finally:
        SERVED.reset(token)


def served_owner(db: Path | None) -> Any:
    """The service's Owner when this command runs inside the service for `db`, else None."""
    held = SERVED.get()
    if held is None or db is None:
        return None
    return held[1] if Path(db).expanduser().resolve() == held[0] else None
