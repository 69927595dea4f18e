"""The files `pcor-sql serve` writes (DESIGN.md §9 "Secrets on disk and in the browser", the
audit log), on a real service process: the runtime file, `--owner-token-file` and `--audit-log`
are regular 0600 files of ours afterwards, whatever was at their paths (a 0644 file, a symlink
to someone else's file); an audit log others may read is refused with one line, before anything
is served."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from pcor_sql.service import runtime_file
from tests.cli.test_cli_served_commands import make_db, serve

pytestmark = pytest.mark.slow


def private(path) -> bool:
    found = os.lstat(path)
    return stat.S_ISREG(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o600 and found.st_uid == os.geteuid()


def test_serve_writes_its_secrets_as_new_private_files(tmp_path):
    path = tmp_path / "pay.duckdb"
    make_db(path)
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file\n")
    victim.chmod(0o644)
    runtime_file.path_for(path).symlink_to(victim)  # planted where the runtime file goes
    token_file = tmp_path / "owner.token"
    token_file.write_text("an old token\n")
    token_file.chmod(0o644)
    audit = tmp_path / "audit.jsonl"
    served = serve(path, "--owner-token-file", str(token_file), "--audit-log", str(audit), "--workers", "1")
    try:
        found = runtime_file.live(path)
        assert found is not None and found["pid"] == served.process.pid
        assert private(runtime_file.path_for(path)) and private(token_file) and private(audit)
        assert token_file.read_text() == found["token"] + "\n"
        assert victim.read_text() == "someone's file\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    finally:
        served.stop()


@pytest.mark.parametrize("planted", ["readable", "symlink"])
def test_serve_refuses_an_audit_log_others_can_read_in_one_line(tmp_path, planted):
    path = tmp_path / "pay.duckdb"
    make_db(path)
    audit = tmp_path / "audit.jsonl"
    if planted == "readable":
        audit.write_text("")
        audit.chmod(0o644)
    else:
        audit.symlink_to(tmp_path / "elsewhere.jsonl")
    result = subprocess.run([sys.executable, "-m", "pcor_sql", "serve", "--db", str(path), "--port", "0",
                             "--owner-port", "1", "--audit-log", str(audit)],
                            capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: the audit log"), result.stderr
    assert not runtime_file.path_for(path).exists() and not (tmp_path / "elsewhere.jsonl").exists()
