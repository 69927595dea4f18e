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

The owner's own releases and COE (`explain-outlier`, `identify-anomaly`, `coe`) on the served file
are forwarded too: the service makes them on its own Owner — charged to its ledger and audited
like every owner command — and prints what a direct run prints. What is the caller's stays with
the caller: standard output is checked open and a `--plot` path writable here, before anything is
sent (so before any charge), and a picture drawn in the service comes back as bytes that the CLI
writes at the path as given (`served_files`). `--workers N` (N > 1) cannot cross — it would fork
the service's own process — and is one line naming the service (pid, owner listener) and what to
do, before anything runs.

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
from typing import TYPE_CHECKING, Any, Iterator, Sequence

if TYPE_CHECKING:
    from pcor_sql.owner import Owner

#: The owner's releases (and COE), which read the served data: made by the service on its Owner.
RELEASES = frozenset({("explain-outlier",), ("identify-anomaly",), ("coe",)})
#: The owner commands a service runs for the file it holds.
FORWARDED = frozenset({
    *(("analyst", c) for c in ("add", "list", "revoke", "rotate", "quota")),
    *(("dataset", c) for c in ("add", "list", "show", "remove")),
    *(("budget", c) for c in ("status", "history", "verify", "repair", "set-limit", "default-limit", "public")),
    *RELEASES,
})
#: Options whose value is a path the service must read as the caller meant it (its cwd differs).
#: (A `--plot` path is the caller's: written by the CLI, relative to its folder — `served_files`.)
PATH_OPTIONS = ("--db",)
PATH_PARAMS = ("db",)
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
    if parsed.path not in FORWARDED or db is None or any(p.is_eager for p in parsed.root) or not _duckdb(parsed):
        return None
    from pcor_sql.service import runtime_file

    found = runtime_file.live(db)
    if found is None:
        return None
    sent = _absolute(group, parsed)  # the words from the command on: --debug and the like stay here
    if sent is None:
        return None
    if parsed.path in RELEASES:
        try:
            _check_here(parsed)  # what is the caller's, before anything is sent (and charged)
        except UserError as exc:
            from pcor_sql.cli.error_report import report

            return report(exc, debug=False)
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
    return _show(answer)


def _show(answer: dict[str, Any]) -> int:
    """Write what the service's run printed, and the files it drew (`served_files`): stdout, the
    files, then stderr — the order of a direct run. A release whose stdout or picture cannot be
    written here was charged: its text goes to stderr, then one error line (as `show_charged`)."""
    from pcor_sql.cli.error_report import report
    from pcor_sql.cli.served_files import write_returned
    from pcor_sql.errors import UserError

    out, err = answer.get("stdout", ""), answer.get("stderr", "")
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        sys.stderr.write(out + err)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return report(UserError(f"the command ran, but standard output failed ({reason}): its output is written "
                                "on stderr above", "give the command an output it can write"), debug=False)
    try:
        write_returned(answer.get("files"))
    except UserError as exc:
        sys.stderr.write(err)
        return report(exc, debug=False)
    sys.stderr.write(err)
    sys.stderr.flush()
    return int(answer.get("exit_code", 1))


def _duckdb(parsed: Any) -> bool:
    """Whether the command reads the file through DuckDB (`--engine spark` is run here, as ever)."""
    engine = parsed.params.get("engine")
    return engine is None or getattr(engine, "value", engine) == "duckdb"


def _check_here(parsed: Any) -> None:
    """A forwarded release's checks of what is the caller's (DESIGN.md §9): its standard output
    is open, its `--plot` path writable — here, before anything is sent, so nothing is charged."""
    from pcor_sql.cli.charged_output import check_plot_target, check_stdout

    plot = parsed.params.get("plot")
    if plot is not None:
        from pcor_sql.plots import require_pyplot

        require_pyplot()
        check_plot_target(Path(plot))
    check_stdout()


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


def run_served(group: Any, owner: Owner, db: Path, argv: list[str]) -> dict[str, Any]:
    """In the service: run the owner command `argv` of the CLI's click `group` on the service's
    own Owner (`SERVED`), one at a time, capturing what it prints and the files it draws. `argv`
    is read by the CLI's own parser (`command_parsing`): only FORWARDED commands, with their own
    options, naming the served file (any path to it: the same device and inode) — anything else
    is a UserError (HTTP 400), and nothing runs. Returns {exit_code, stdout, stderr, files} and,
    for the audit line (DESIGN.md §9: the owner's command, its name and target), `command` and
    `epsilon`."""
    from typer.testing import CliRunner

    from pcor_sql.cli.served_files import collected

    parsed = check_forwarded(group, db, argv)
    with _ONE_AT_A_TIME, serving(owner, db), collected() as files:
        with CliRunner().isolation() as (out, err, _):
            # The CLI's own group: its errors become one line and an exit code, as on a terminal.
            try:
                code = group.main(args=argv, prog_name="pcor-sql", standalone_mode=False)
            except SystemExit as exc:  # never ends a worker thread of the service
                code = exc.code if isinstance(exc.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
            printed = out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")
    epsilon = parsed.params.get("epsilon")
    return {"exit_code": int(code or 0), "stdout": printed[0], "stderr": printed[1], "files": files,
            "command": described(group, parsed), "epsilon": epsilon if type(epsilon) in (int, float) else None}


def described(group: Any, parsed: Any, most: int = 200) -> str:
    """The command's name and target for the audit log (`analyst revoke bob`, `explain-outlier
    SELECT ...`): its path and its arguments' values as the parser read them — never an option's."""
    command = group
    for name in parsed.path:
        command = command.commands[name]
    values = [parsed.params.get(p.name) for p in command.params if p.param_type_name == "argument"]
    text = " ".join([*parsed.path, *(str(v) for v in values if v is not None)])
    return text if len(text) <= most else text[:most - 1] + "…"


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
        raise UserError(f"this service runs only the owner's analyst, dataset and budget commands and"
                        f" releases (explain-outlier, identify-anomaly, coe), not"
                        f" '{' '.join(parsed.path)}'", "run that command yourself")
    named = parsed.params.get("db")
    if named is None or not same_file(named, db):
        raise UserError(f"this service holds {db}, not {named}", "run the command on that file (--db)")
    if not _duckdb(parsed):
        raise UserError("this service reads its file through DuckDB, not --engine spark", "run that command yourself")
    workers = parsed.params.get("workers")
    if parsed.path in RELEASES and type(workers) is int and workers > 1:
        from pcor_sql.service import runtime_file

        found = runtime_file.live(db) or {}
        raise UserError(f"--workers {workers} cannot cross to the running service that holds {db} (pid "
                        f"{found.get('pid', os.getpid())}, owner listener {found.get('owner_url', '?')}): it makes "
                        "the owner's release in its own process, so it never forks itself",
                        "drop --workers (the release is the same, seeded or not, only one search at a time), or "
                        "stop that service and run the command with --workers")
    return parsed


def same_file(path: Path | str, other: Path | str) -> bool:
    """Whether two paths name one file (its device and inode: a hard link, a symlink or another
    spelling of the path is the same file)."""
    try:
        return os.path.samefile(Path(path).expanduser(), Path(other).expanduser())
    except OSError:
        return False


@contextlib.contextmanager
def serving(owner: Owner, db: Path) -> Iterator[None]:
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
