"""A randomness source that returns chosen 64-bit words, to test exact draws case by case.

It has `bytes` only (no bit generator), so `random_words` reads it as little-endian words, and
it fails the test if asked for more words than scripted, or for anything else.
"""

from __future__ import annotations


class ScriptedWords:
    def __init__(self, words):
        self.words = [int(w) for w in words]
        self.read = 0

    def bytes(self, length):
        assert length % 8 == 0, "exact draws read whole 64-bit words"
        count = length // 8
        assert self.read + count <= len(self.words), f"asked for more than the {len(self.words)} scripted words"
        chunk = self.words[self.read : self.read + count]
        self.read += count
        return b"".join(w.to_bytes(8, "little") for w in chunk)

    def random(self, size=None):
        raise AssertionError("exact draws must not use 53-bit uniforms")

    def integers(self, low, high=None):
        raise AssertionError("exact draws must not use integers")


ONES = (1 << 64) - 1
