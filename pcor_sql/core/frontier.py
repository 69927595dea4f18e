"""bfs's frontier C_M (PCOR paper Alg. 5, DESIGN.md §7): its members in the order they joined,
each with its utility read once when it joined, as arrays that an EM call reads without a
Python step per member.

On a 5,000-value attribute the frontier holds ~200,000 contexts after a few expansions; an
insertion-ordered dict of (context, utility) pairs rebuilt the candidate and utility lists of
every EM call member by member (~25 ms a call, the most of bfs's own time after the neighbours:
`python -m benchmarks profile-release wide5000 100000 zscore`). Here members are appended and
a chosen one is only marked gone: the live members, in joining order, are one `flatnonzero`,
their utilities one gather — the same candidates, in the same order, with the same utilities
as the dict gave, so the same EM draws.
"""

from __future__ import annotations

from typing import Hashable

import numpy as np


class Members:
    """The live members in joining order, as a read-only sequence of contexts (for `_em`)."""

    __slots__ = ("_masks", "_at")

    def __init__(self, masks: list[int], at: np.ndarray):
        self._masks, self._at = masks, at

    def __len__(self) -> int:
        return int(self._at.size)

    def __getitem__(self, i: int) -> int:
        return self._masks[int(self._at[i])]


class Frontier:
    """Contexts by key, in joining order, each with its utility; a member joins at most once."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._masks: list[int] = []
        self._utilities = np.empty(64, dtype=np.float64)
        self._live = np.zeros(64, dtype=bool)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def add(self, key: Hashable, mask: int, utility: float) -> None:
        """Join `mask` (keyed `key`) with its utility; a key already here keeps its first place."""
        if key in self._index:
            return
        n = len(self._masks)
        if n == self._utilities.size:
            self._utilities = np.concatenate([self._utilities, np.empty(n, dtype=np.float64)])
            self._live = np.concatenate([self._live, np.zeros(n, dtype=bool)])
        self._index[key] = n
        self._masks.append(mask)
        self._utilities[n] = utility
        self._live[n] = True

    def add_many(self, keys: list[Hashable], masks: list[int], utilities: list[float]) -> None:
        """`add` of each (key, mask, utility), in order."""
        if len(set(keys)) < len(keys) or any(k in self._index for k in keys):
            for k, m, u in zip(keys, masks, utilities):
                self.add(k, m, u)
            return
        n, more = len(self._masks), len(keys)
        while n + more > self._utilities.size:
            size = self._utilities.size
            self._utilities = np.concatenate([self._utilities, np.empty(size, dtype=np.float64)])
            self._live = np.concatenate([self._live, np.zeros(size, dtype=bool)])
        self._index.update(zip(keys, range(n, n + more)))
        self._masks.extend(masks)
        self._utilities[n: n + more] = utilities
        self._live[n: n + more] = True

    def remove(self, key: Hashable) -> None:
        self._live[self._index.pop(key)] = False

    def members(self) -> tuple[Members, np.ndarray]:
        """(the live members in joining order, their utilities in that order)."""
        at = np.flatnonzero(self._live[: len(self._masks)])
        return Members(self._masks, at), self._utilities[at]
