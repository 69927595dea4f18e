"""A network namespace of a test's own, as a second host (DESIGN.md §11 "Faults": one host cut
off from PostgreSQL): two veth pairs join it to this host — one the analysts reach its service
by (`service_ip`), one it reaches PostgreSQL by (`ledger_ip`, this side's address) — so that
`cut()` (that pair's link down) takes PostgreSQL away from it while its analysts still reach it.

Needs root and `ip` (iproute2) with network namespaces; `missing()` says why not, else None.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Iterator


def _ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30, check=check)


def missing() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    name = f"pcorprobe{os.getpid() % 100000}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
    _ip("netns", "del", name, check=False)
    return None


@dataclass(frozen=True)
class Host:
    """The namespace `name`; `prefix` runs a command in it."""

    name: str
    service_ip: str
    ledger_ip: str
    ledger_link: str

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def cut(self) -> None:
        """Its link to PostgreSQL down (this side's end of the pair)."""
        _ip("link", "set", self.ledger_link, "down")


@contextlib.contextmanager
def second_host() -> Iterator[Host]:
    n = os.getpid() % 250 + 1
    name = f"pcorhost{n}"
    links = [(f"pcs{n}", f"pcs{n}n", f"10.231.{n}"), (f"pcl{n}", f"pcl{n}n", f"10.232.{n}")]
    _ip("netns", "add", name)
    try:
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        for here, there, net in links:
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", there, "netns", name)
            _ip("addr", "add", f"{net}.1/24", "dev", here)
            _ip("link", "set", here, "up")
            _ip("netns", "exec", name, "ip", "addr", "add", f"{net}.2/24", "dev", there)
            _ip("netns", "exec", name, "ip", "link", "set", there, "up")
        yield Host(name, f"{links[0][2]}.2", f"{links[1][2]}.1", links[1][0])
    finally:
        for here, _, _ in links:
            _ip("link", "del", here, check=False)  # its peer goes with it
        _ip("netns", "del", name, check=False)
