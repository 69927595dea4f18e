"""Files that receive a token or the audit log (DESIGN.md §9 "Secrets on disk and in the
browser"), on real files: afterwards a regular 0600 file of ours, whatever was at the path — a
0644 file, a symlink to someone's file, a dangling symlink — never written through a link, or
refused with one line."""

from __future__ import annotations

import os
import stat

import pytest

from pcor_sql.errors import UserError
from pcor_sql.service import runtime_file
from pcor_sql.service.owner_plane import AuditLog
from pcor_sql.service.private_files import open_private_append, write_private


def private(path) -> bool:
    found = os.lstat(path)
    return stat.S_ISREG(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o600 and found.st_uid == os.geteuid()


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("someone's file\n")
    path.chmod(0o644)
    return path


def test_an_existing_readable_file_is_replaced_by_a_new_private_one(tmp_path):
    path = tmp_path / "owner.token"
    path.write_text("old\n")
    path.chmod(0o644)
    with open(path, encoding="utf-8") as reader:  # someone who opened it before
        runtime_file.write_token(path, "pcor_owner_secret")
        assert reader.read() == "old\n"  # the old inode never saw the token
    assert private(path) and path.read_text() == "pcor_owner_secret\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_at_the_path_is_replaced_never_followed(tmp_path, victim, dangling):
    path = tmp_path / "owner.token"
    target = tmp_path / "nowhere" if dangling else victim
    path.symlink_to(target)
    runtime_file.write_token(path, "pcor_owner_secret")
    assert private(path) and path.read_text() == "pcor_owner_secret\n"
    assert victim.read_text() == "someone's file\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not (tmp_path / "nowhere").exists()


def test_the_runtime_file_is_private_whatever_was_there(tmp_path, victim):
    db = tmp_path / "data.duckdb"
    runtime_file.path_for(db).symlink_to(victim)
    written = runtime_file.write(db, owner_url="http://127.0.0.1:1", analyst_url="http://127.0.0.1:2", token="t0k")
    assert private(written) and runtime_file.live(db)["token"] == "t0k"
    assert victim.read_text() == "someone's file\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary left


def test_a_tight_umask_still_gives_0600(tmp_path):
    old = os.umask(0o277)
    try:
        path = write_private(tmp_path / "t", "x")
    finally:
        os.umask(old)
    assert private(path)


@pytest.mark.parametrize("case", ["folder", "missing folder"])
def test_a_path_that_cannot_hold_the_file_is_one_line(tmp_path, case):
    path = tmp_path / "dir" if case == "folder" else tmp_path / "no" / "such" / "t"
    if case == "folder":
        path.mkdir()
    with pytest.raises(UserError) as caught:
        runtime_file.write_token(path, "secret")
    assert "owner token file" in caught.value.problem and caught.value.fix
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_a_new_audit_log_is_0600(tmp_path):
    old = os.umask(0o022)
    try:
        log = AuditLog(tmp_path / "audit.jsonl")
        log.write({"time": "now", "status": 200})
        log.close()
    finally:
        os.umask(old)
    assert private(tmp_path / "audit.jsonl")
    again = AuditLog(tmp_path / "audit.jsonl")  # a private one of ours is appended to across runs
    again.write({"time": "later", "status": 401})
    again.close()
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602])
def test_an_audit_log_others_may_read_or_write_is_refused(tmp_path, mode):
    path = tmp_path / "audit.jsonl"
    path.write_text("")
    path.chmod(mode)
    with pytest.raises(UserError) as caught:
        AuditLog(path)
    assert "read or written by others" in caught.value.problem and "chmod 600" in caught.value.fix
    assert stat.S_IMODE(path.stat().st_mode) == mode and path.read_text() == ""


def test_an_audit_log_that_is_a_symlink_is_refused(tmp_path, victim):
    path = tmp_path / "audit.jsonl"
    path.symlink_to(victim)
    with pytest.raises(UserError) as caught:
        open_private_append(path)
    assert "symbolic link" in caught.value.problem
    assert victim.read_text() == "someone's file\n"
