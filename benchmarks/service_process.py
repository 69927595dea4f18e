"""`pcor-sql serve` in a child process on 127.0.0.1, for the service benchmark and the tests
that need a real process (kill -9): started on a free port, waited for, stopped at the end.

The child is the installed command line (`python -m pcor_sql serve --db FILE`), so what runs
is what an owner runs; its output goes to a log file (a pipe nobody reads would fill and stall
it), which `ServedProcess.log()` returns for error messages.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import httpx

#: Seconds to wait for the service to answer its OpenAPI document (imports + opening the file).
START_TIMEOUT = 90.0


@dataclass
class ServedProcess:
    """A running `pcor-sql serve`: its URL, its process and its log file."""

    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, nothing is flushed — a crash."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (uvicorn finishes the requests it holds), then SIGKILL if it does not end."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 (a race with other processes is possible, so
    `served` retries on another port if the child cannot bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(db: Path, *, args: Sequence[str] = (), log_path: Path | None = None, port: int | None = None,
          env: dict[str, str] | None = None, host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> ServedProcess:
    """Start `pcor-sql serve --db DB` and wait until it answers; raise RuntimeError (with its
    log) if it exits or does not answer in START_TIMEOUT seconds. `host`: the address it listens
    on (and is reached at); `prefix`: argv run before it (e.g. `ip netns exec NS`, which execs it:
    the process is still the service's)."""
    for attempt in range(3):
        chosen = port or free_port()
        log = log_path or Path(f"{db}.serve-{chosen}.log")
        command = [*prefix, sys.executable, "-m", "pcor_sql", "serve", "--db", str(db), "--host", host,
                   "--port", str(chosen), *args]
        with open(log, "ab") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, **(env or {})})
        served = ServedProcess(f"http://{host}:{chosen}", process, log)
        if _wait_until_up(served):
            return served
        served.stop()
        if "address already in use" not in served.log().lower() or port is not None:
            break
    raise RuntimeError(f"pcor-sql serve did not start (exit {process.poll()}):\n{served.log()[-3000:]}")


def _wait_until_up(served: ServedProcess) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            return False
        try:
            if httpx.get(served.url + "/openapi.json", timeout=2.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


@contextlib.contextmanager
def served(db: Path, **options: object) -> Iterator[ServedProcess]:
    """`start(db, ...)` for the block, stopped at its end (killed if it will not stop)."""
    process = start(db, **options)  # type: ignore[arg-type]
    try:
        yield process
    finally:
        process.stop()
