"""Verdicts remembered across releases: validity of a context for a record, kept with the summary.

Whether record V is an outlier in context C is a deterministic function of the data, V's
value, the verifier (with its options) and C: f(D_C, V) (DESIGN.md §2). The per-cell summary
is a snapshot of the data, so while it lives, a verdict computed once is the verdict any later
check of the same (record, verifier, context) would compute. The Session keeps one summary per
relation and reuses it across releases; `VerdictCache` rides on that summary (one per
`CellSummary`, so it is dropped — invalidated — exactly when the summary is) and lets a repeated
release (an ε sweep, `reproduce`'s hundreds of releases per record, a warm benchmark) skip the
checks an earlier release already made.

Keys. A group is (record key, verifier): the record key is V's cell (its anchor mask, which
fixes the admissible lattice) and V's metric value (the only way V enters a verifier); the
verifier is the verifier object itself — the built-ins are frozen dataclasses equal exactly when
their options are equal. Within a group a verdict is keyed by the context's bitset (a Python
int over the declared domains). Only verifiers whose capabilities declare them deterministic
(`core.verifiers.capabilities`) are cached: the built-ins, and a user verifier that sets
`deterministic = True`. A user Python or SQL verifier is otherwise checked every time (its code
may read state the key does not hold).

A group also keeps its contexts' population sizes (the search's utilities read them; same
snapshot, same numbers) and the outcome of the deterministic start search with the verdicts it
read, so a repeated release does not sweep again.

Bound. At most `max_entries` items in all (default 2^19 = 524,288; a verdict, a size or one
verdict of a remembered start sweep is one item). Measured with
tracemalloc (tests/engine/test_verdicts.py holds it under 64 MiB): a verdict costs ~52 bytes
of dict slot plus its int key, 36 bytes up to 60 bits and 92 at 500 (the bool is shared), so
the default holds ≤ ~45 MiB on a 60-value space and ≤ ~75 MiB on a 500-value one — under the
76 MiB of sorted runs a 10M-row summary already holds — and ~90 BFS releases' worth of distinct
checks (≤ ~6,000 each on the scale benchmark's table). When a verdict would pass the
bound, the least recently used group (another record or verifier) is dropped whole; if the
group being filled is the only one left, it stops growing (the release still gets every
verdict right: a miss is simply recomputed).

Privacy: nothing new is released and no output law changes. A cached verdict equals the
verdict the verifier would return (same deterministic function, same snapshot), so every
search reads exactly the same sequence of validity answers and utilities, draws the same
coins, and a seeded release is bit-for-bit the same (`python -m benchmarks seeded-outputs` is held
to it). Validity is a function of COE(D, V), free under OCDP; remembering it spends nothing.
What changes is only how long a release takes, which depends on the asker's own earlier
releases; no search reads a clock, so no released context depends on it. Groups are kept per
asker (`core.work.partition`: the owner, or one analyst): DESIGN.md §8 "No cross-analyst
channels" — a hit would otherwise tell an analyst, by time alone, which keys another asked.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice
from typing import Hashable

from pcor_sql.core.work import partition
from pcor_sql.core.verifiers.base import Verifier
from pcor_sql.core.verifiers.capabilities import capabilities_of

DEFAULT_MAX_ENTRIES = 1 << 19


def cacheable(verifier: Verifier) -> bool:
    """True for verifiers whose verdict is a function of (data, V, options, context) alone."""
    return capabilities_of(verifier).deterministic


class _Group:
    """What one (record, verifier) group remembers: verdicts by context; population sizes by
    context (a function of the context and the snapshot alone); and the outcome of the
    deterministic start search (`core.start.find_start`) by its check limit, with the verdicts
    it read — (start or None, checks, {context: verdict}) — so a release that reuses it still
    reports the same contexts as verified. Every stored item counts toward the bound."""

    __slots__ = ("verdicts", "sizes", "starts")

    def __init__(self) -> None:
        self.verdicts: dict[int, bool] = {}
        self.sizes: dict[int, int] = {}
        self.starts: dict[int, tuple[int | None, int, dict[int, bool]]] = {}

    def entries(self) -> int:
        return len(self.verdicts) + len(self.sizes) + sum(len(s[2]) for s in self.starts.values())


class VerdictStore:
    """One (record, verifier) group: `get(mask)` → bool or None, `put`; `size`/`put_size`;
    `start`/`put_start` (see `_Group`)."""

    __slots__ = ("_cache", "_key", "_group")

    def __init__(self, cache: "VerdictCache", key: Hashable, group: _Group):
        self._cache, self._key, self._group = cache, key, group

    def get(self, mask: int) -> bool | None:
        return self._group.verdicts.get(mask)

    def put(self, mask: int, verdict: bool) -> None:
        if mask not in self._group.verdicts and self._cache._make_room(self._key, 1):
            self._group.verdicts[mask] = verdict

    def get_many(self, keys: list) -> list:
        """`get` of each of `keys`, in order (one `map`, not a method call a key)."""
        return list(map(self._group.verdicts.get, keys))

    def put_many(self, verdicts: dict) -> None:
        """`put` of each (context key → verdict) in `verdicts`: room is made for the new ones at
        once (the same groups dropped as one `put` after the other), else one at a time."""
        self._put_all(self._group.verdicts, verdicts)

    def put_sizes(self, sizes: dict) -> None:
        """`put_size` of each (context key → size) in `sizes`, as `put_many` does verdicts."""
        self._put_all(self._group.sizes, sizes)

    def _put_all(self, known: dict, items: dict) -> None:
        """`items` into `known` as one `put` after the other would leave them (a known key keeps
        its value). Where none is known and all fit, no group is dropped: one `update` — a BFS
        node's 5,000 fresh neighbours were filtered key by key in Python first (~0.5 s of a
        wide5000 release; `isdisjoint` is one pass in C). Once the group is alone and full
        nothing fits, as one `put` after the other would find."""
        cache = self._cache
        room = cache.max_entries - cache.entries
        if len(items) <= room and known.keys().isdisjoint(items.keys()):
            known.update(items)
            cache.entries += len(items)
            return
        if room <= 0 and cache.alone(self._key):
            return
        new = {k: v for k, v in items.items() if k not in known}
        if not new:
            return
        if cache._make_room(self._key, len(new)):
            known.update(new)
            return
        # `_make_room` failed having dropped every other group: one `put` after the other would
        # take the first ones, as many as fit.
        room = max(cache.max_entries - cache.entries, 0)
        known.update(islice(new.items(), room))
        cache.entries += min(room, len(new))

    def size(self, mask: int) -> int | None:
        return self._group.sizes.get(mask)

    def put_size(self, mask: int, n: int) -> None:
        if mask not in self._group.sizes and self._cache._make_room(self._key, 1):
            self._group.sizes[mask] = n

    def start(self, max_checks: int) -> tuple[int | None, int, dict[int, bool]] | None:
        return self._group.starts.get(max_checks)

    def put_start(self, max_checks: int, mask: int | None, checks: int, checked: dict[int, bool]) -> None:
        if max_checks not in self._group.starts and self._cache._make_room(self._key, len(checked)):
            self._group.starts[max_checks] = (mask, checks, dict(checked))

    def __len__(self) -> int:
        return len(self._group.verdicts)


class VerdictCache:
    """Verdicts by (record key, verifier), then by context bitset; bounded (see the module doc)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = int(max_entries)
        self.entries = 0
        self._groups: OrderedDict[Hashable, _Group] = OrderedDict()

    def store(self, anchor_mask: int, v: float, verifier: Verifier) -> VerdictStore | None:
        """The group of record (cell `anchor_mask`, value `v`) under `verifier`, most recently
        used from now on; None when the verifier is not known to be a pure function."""
        if not cacheable(verifier):
            return None
        # One partition per asker (`core.work.partition`): a verdict one analyst's request
        # computed never answers another's faster, so timing cannot tell who asked what.
        key = (partition(), int(anchor_mask), float(v), verifier)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
        else:
            self._groups.move_to_end(key)
        return VerdictStore(self, key, group)

    def _make_room(self, key: Hashable, items: int) -> bool:
        """Drop least recently used groups other than `key` until `items` more fit; count them in."""
        while self.entries + items > self.max_entries:
            oldest = next((k for k in self._groups if k != key), None)
            if oldest is None:
                return False  # the group being filled is the only one left: it stops growing
            self.entries -= self._groups.pop(oldest).entries()
        self.entries += items
        return True

    def alone(self, key: Hashable) -> bool:
        """Whether `key` is the only group held (or none is): no other group could make room."""
        return len(self._groups) <= (1 if key in self._groups else 0)

    def clear(self) -> None:
        self._groups.clear()
        self.entries = 0

    def __len__(self) -> int:
        return self.entries
