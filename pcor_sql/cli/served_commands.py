"""Owner commands on a file a running service holds (DESIGN.md §9): carried out by the service.

DuckDB lets one process open a file read-write, and while `pcor-sql serve --db FILE` runs that
process is the service. So an owner command naming FILE (`analyst add|list|revoke|rotate|quota`,
`dataset add|list|show|remove`, `budget status|history|verify|repair|set-limit|default-limit|
public`) looks for the service's runtime file (`pcor_sql.service.runtime_file`); when a live
service holds FILE, the command's arguments go to its owner listener (POST /v1/owner/command,
with the owner token from that file), the service runs the very same command on its own open
Owner, and its exit code, stdout and stderr come back as they are: the same output, formats and
exit codes as without a service. Otherwise the command opens the file itself, as always.

What is forwarded, and what the service runs, is decided by the CLI's own parser
(`command_parsing`), never by scanning argv: the command path and every value (the last `--db`
when it is given twice) are those the command would run with. The service runs only the listed
commands with their own options, on the file it holds (any path to it: its device and inode), on
its own open Owner; a global option (`--install-completion`, `--help`, `--version`, …), another
command or another file is a 400 with {error, fix}, and nothing runs.

A command racing a stop runs once: the service refuses a command once it is stopping (before
running it), and a refused or unreachable service means the command opens the file directly —
waiting for the stopping process to let go of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
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
PATH_PARAMS = ("db", "plot")
#: Seconds a command waits for a stopping service to release the file before opening it.
RELEASE_WAIT_S = 20.0

#: In the service's process: (the served file, its Owner) — `open_owner` yields that Owner.
SERVED: contextvars.ContextVar[tuple[Path, Any] | None] = contextvars.ContextVar("pcor_sql_served", default=None)
_ONE_AT_A_TIME = threading.Lock()


def forward_if_served(group: Any, argv: Sequence[str]) -> int | None:
    """Run `argv` through the service holding its --db file, if one does: write what it printed
    and return its exit code. None: run it here (no service holds the file, it is stopping, or
    `argv` is not a forwarded command as the CLI's parser reads it — then the CLI says why)."""
    if SERVED.get() is not None:
        return None
    from pcor_sql.cli.command_parsing import parse_command
    from pcor_sql.errors import UserError

    try:
        parsed = parse_command(group, argv)
    except UserError:
        return None  # a usage error, --help: the CLI itself says what it says
    db = parsed.params.get("db")
    if parsed.path not in FORWARDED or db is None or any(p.is_eager for p in parsed.root):
        return None
    from pcor_sql.service import runtime_file

    found = runtime_file.live(db)
    if found is None:
        return None
    sent = _absolute(group, parsed)  # the words from the command on: --debug and the like stay here
    if sent is None:
        return None
    request = urllib.request.Request(
        found["owner_url"].rstrip("/") + "/v1/owner/command", method="POST",
        data=json.dumps({"argv": sent}).encode("utf-8"),
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
    except urllib.error.HTTPError as exc:
        refusal = _refusal(exc)
        if refusal is None:
            _wait_for_release(found)  # refused (stopping) or gone: the file is ours once it lets go
            return None
        from pcor_sql.cli.error_report import report

        return report(refusal, debug=False)  # the service's one line: it will not run this command
    except (urllib.error.URLError, OSError, ValueError):
        _wait_for_release(found)
        return None
    sys.stdout.write(answer.get("stdout", ""))
    sys.stderr.write(answer.get("stderr", ""))
    sys.stdout.flush()
    return int(answer.get("exit_code", 1))


def _absolute(group: Any, parsed: Any) -> list[str] | None:
    """The command's words with the values of PATH_OPTIONS made absolute (the service's cwd is
    not ours), checked by parsing them again: the same command, every value the same but the
    paths, now absolute — else None (not forwarded)."""
    from pcor_sql.cli.command_parsing import parse_command
    from pcor_sql.errors import UserError

    out = list(parsed.argv)
    for i, arg in enumerate(out):
        for option in PATH_OPTIONS:
            if arg == option and i + 1 < len(out):
                out[i + 1] = str(Path(out[i + 1]).expanduser().resolve())
            elif arg.startswith(option + "="):
                out[i] = f"{option}={Path(arg[len(option) + 1:]).expanduser().resolve()}"
    expected = {name: Path(value).expanduser().resolve() if name in PATH_PARAMS and value is not None else value
                for name, value in parsed.params.items()}
    try:
        again = parse_command(group, out)
    except UserError:
        return None
    return out if again.path == parsed.path and again.params == expected and not again.root else None


def _refusal(exc: Any) -> Exception | None:
    """The service's 400 {error, fix} for a command it will not run, as the UserError it is."""
    from pcor_sql.errors import UserError

    if exc.code != 400:
        return None
    try:
        body = json.loads(exc.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return None
    return UserError(body["error"], body.get("fix") if isinstance(body.get("fix"), str) else None)


def _wait_for_release(found: dict[str, Any]) -> None:
    from pcor_sql.service import runtime_file

    deadline = time.monotonic() + RELEASE_WAIT_S
    while time.monotonic() < deadline and runtime_file.live(found["database"]) is not None:
        time.sleep(0.1)


def run_served(group: Any, owner: Any, db: Path, argv: list[str]) -> tuple[int, str, str]:
    """In the service: run the owner command `argv` of the CLI's click `group` on the service's
    own Owner (`SERVED`), one at a time, capturing what it prints. `argv` is read by the CLI's
    own parser (`command_parsing`): only FORWARDED commands, with their own options, naming the
    served file (any path to it: the same device and inode) — anything else is a UserError
    (HTTP 400), and nothing runs."""
    from typer.testing import CliRunner

    check_forwarded(group, db, argv)
    with _ONE_AT_A_TIME, serving(owner, db), CliRunner().isolation() as (out, err, _):
        # The CLI's own group: its errors become one line and an exit code, as on a terminal.
        try:
            code = group.main(args=argv, prog_name="pcor-sql", standalone_mode=False)
        except SystemExit as exc:  # never ends a worker thread of the service
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        return int(code or 0), out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


def check_forwarded(group: Any, db: Path, argv: Sequence[str]) -> Any:
    """`argv` as the CLI's parser reads it, if it is an owner command this service runs on `db`;
    else a UserError saying why (a global option, another command, another file)."""
    from pcor_sql.cli.command_parsing import parse_command
    from pcor_sql.errors import UserError

    parsed = parse_command(group, argv)
    if parsed.root:
        raise UserError(f"{', '.join(parsed.root_names)}: a global option is not run by the service",
                        "send the owner command and its own options only")
    if parsed.path not in FORWARDED:
        raise UserError(f"this service runs only the owner's analyst, dataset and budget commands, not"
                        f" '{' '.join(parsed.path)}'", "run that command yourself")
    named = parsed.params.get("db")
    if named is None or not same_file(named, db):
        raise UserError(f"this service holds {db}, not {named}", "run the command on that file (--db)")
    return parsed


def same_file(path: Path | str, other: Path | str) -> bool:
    """Whether two paths name one file (its device and inode: a hard link, a symlink or another
    spelling of the path is the same file)."""
    try:
        return os.path.samefile(Path(path).expanduser(), Path(other).expanduser())
    except OSError:
        return False


@contextlib.contextmanager
def serving(owner: Any, db: Path) -> Iterator[None]:
    token = SERVED.set((db, owner))
    try:
        yield
    finally:
        SERVED.reset(token)


def served_owner(db: Path | None) -> Any:
    """The service's Owner when this command runs inside the service for `db` (any path to the
    served file), else None."""
    held = SERVED.get()
    if held is None or db is None:
        return None
    return held[1] if same_file(db, held[0]) else None
