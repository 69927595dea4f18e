"""Telling a waiting user that numba is compiling: the first run on a machine compiles the
validity checks (10-35 s on 2 cores, by load), later runs load them from numba's cache.

`core.jit` forwards numba's "numba:compile" events — fired only when a function is compiled,
never when it is loaded from the cache — to `started`/`ended`; `listening` lets a caller (a
release with a progress display) hear the outermost compile begin and end. This module does not
import numba, so a run that compiles nothing pays nothing for listening.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

Hook = Callable[[bool], None]  # True: a compile began; False: the last one ended

_hooks: list[Hook] = []
_depth = threading.local()


def started() -> None:
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    if depth == 0:  # a kernel's helpers compile inside it: one notice for the whole nest
        for hook in list(_hooks):
            hook(True)


def ended() -> None:
    _depth.n = max(getattr(_depth, "n", 1) - 1, 0)
    if _depth.n == 0:
        for hook in list(_hooks):
            hook(False)


@contextmanager
def listening(hook: Hook) -> Iterator[None]:
    """Within the block, `hook(True)` when an outermost compile begins, `hook(False)` when it ends."""
    _hooks.append(hook)
    try:
        yield
    finally:
        _hooks.remove(hook)
