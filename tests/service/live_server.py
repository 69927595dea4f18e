"""A real uvicorn server for tests: on 127.0.0.1, on a port the OS picks, in a thread of the
test process (so a test can read the owner's ledger directly), stopped at the end.

A test of what the service answers (HTTP, tokens, refusals, the client, the page) serves with
`processes=False`: each search process starts its own interpreter and warms its summaries
(~5 s each on 2 cores, 38 s for eight), and where the search runs is not what it checks. Where it
is (the search processes, timing channels, the fuzzers, work bounds, admission, kill -9), the
default stays.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any, Iterator

import uvicorn

#: How long a server may take to start. Its start warms the search processes (numba's first
#: compile in a fresh checkout included), which took 65-141 s on a 2-core machine under a load of
#: 11: a short deadline failed tests there for no fault of theirs. A server that dies is seen at
#: once (its thread ends), so the deadline only bounds a hang.
START_TIMEOUT_S = 300.0


@contextlib.contextmanager
def live_server(app: Any, *, start_timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL (http://127.0.0.1:PORT)."""
    sock = _tcp_socket()
    sock.bind(("127.0.0.1", 0))  # loopback only; port 0: a free port, held from here on
    port = sock.getsockname()[1]
    with _running(app, [sock], start_timeout):
        yield f"http://127.0.0.1:{port}"


def _tcp_socket() -> socket.socket:
    # IPPROTO_TCP named, as `pcor-sql serve` does: asyncio turns Nagle off only on sockets that
    # say TCP, else every response on a kept-alive connection waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


@contextlib.contextmanager
def _running(app: Any, socks: list, start_timeout: float) -> Iterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": socks}, daemon=True, name="uvicorn-test")
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=start_timeout)
        for sock in socks:
            sock.close()


@contextlib.contextmanager
def live_listeners(analysts: Any, owner: Any, *, start_timeout: float = START_TIMEOUT_S) -> Iterator[tuple[str, str]]:
    """Both listeners of `pcor-sql serve` in one uvicorn (`owner_app.Listeners`): the analysts'
    app on one loopback port, the owner's on another; yields (analysts' URL, owner's URL)."""
    from pcor_sql.service.owner_app import Listeners

    socks = []
    for _ in range(2):
        sock = _tcp_socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
    ports = [s.getsockname()[1] for s in socks]
    with _running(Listeners(analysts, owner, ports[1]), socks, start_timeout):
        yield f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}"
