"""No test or benchmark pins floating-point bits.

A computed double depends on summation order, and numpy's order depends on the CPU's SIMD
width: LOF values recorded on one machine differed by one ulp on another. Tests
compare floats with a tolerance that says why it is what it is, or compute order-independently
(integers, exact cases). This test scans the sources of tests/ and benchmarks/ for the ways a
test pins bits, and names each hit with the fix.

What is refused (Python source, comments included — a pinned value in a comment invites
pinning it again):
- hex-float literals, in code or strings: `0x1.7ac1p+59`, `0x1p-52`;
- `float.fromhex(...)` and `float.hex(...)`;
- `.hex()` on a line that compares (`==`, `!=`): `got.hex() == want.hex()`;
- `struct.pack(...)` / `.tobytes()` on a line that compares: bytes of floats compared.
A `.hex()` that prints or hashes bytes (no comparison on the line) is allowed.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ("tests", "benchmarks")
THIS = pathlib.Path(__file__).resolve()  # holds the patterns themselves, as examples

_COMPARES = re.compile(r"==|!=")
RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # (what, pattern, only on a line that compares)
    ("a hex-float literal", re.compile(r"\b0x[0-9a-f]*\.?[0-9a-f]*p[+-]?\d+", re.IGNORECASE), False),
    ("float.fromhex / float.hex", re.compile(r"\bfloat\s*\.\s*(?:from)?hex\s*\("), False),
    ("a .hex() comparison", re.compile(r"\.hex\s*\(\s*\)"), True),
    ("compared bytes of floats (struct.pack / .tobytes())", re.compile(r"\bstruct\s*\.\s*pack\s*\(|\.tobytes\s*\("), True),
)
FIX = ("compare with a stated tolerance (math.isclose(got, want, rel_tol=...) with a comment deriving it), "
       "or compute the expected value order-independently")


def pinned_bits(text: str) -> list[tuple[int, str, str]]:
    """(line number, rule, line) for every line of `text` that pins floating-point bits."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern, needs_compare in RULES:
            if pattern.search(line) and (not needs_compare or _COMPARES.search(line)):
                hits.append((number, what, line.strip()))
    return hits


def scanned_files() -> list[pathlib.Path]:
    files = []
    for top in SCANNED:
        files.extend(p for p in sorted((ROOT / top).rglob("*.py")) if p.resolve() != THIS)
    return files


def test_no_source_under_tests_or_benchmarks_pins_float_bits():
    files = scanned_files()
    assert len(files) > 50  # the scan really reads the suite
    problems = [
        f"{path.relative_to(ROOT)}:{number}: {what}: {line}"
        for path in files
        for number, what, line in pinned_bits(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "tests pin floating-point bits (they fail on other CPUs) — " + FIX + ":\n" + "\n".join(problems)


def test_the_scan_finds_each_way_of_pinning_bits(tmp_path):
    pinned = {
        "assert got == 0x1.959dd62f25477p+3": "a hex-float literal",
        "WANT = float.fromhex('0x1.7ac106e06d1f6p+59')": "a hex-float literal",
        "x = 0x1p-52": "a hex-float literal",
        "assert got == float.fromhex(text)": "float.fromhex / float.hex",
        "assert [g.hex() for g in got] == [w.hex() for w in WANT]": "a .hex() comparison",
        "assert got.hex() != want.hex()": "a .hex() comparison",
        "assert struct.pack('<d', got) == struct.pack('<d', want)": "compared bytes of floats (struct.pack / .tobytes())",
        "assert a.tobytes() == b.tobytes()": "compared bytes of floats (struct.pack / .tobytes())",
    }
    for line, rule in pinned.items():
        assert rule in [what for _, what, _ in pinned_bits(line)], line
    # Through a file, as the scan reads the suite: the message names the file and line.
    bad = tmp_path / "test_recorded.py"
    bad.write_text("import math\n\n\ndef test_recorded():\n    assert (0.1 + 0.2).hex() == '0x1.3333333333334p-2'\n")
    assert [n for n, _, _ in pinned_bits(bad.read_text())] == [5, 5]
    for allowed in ("token = secrets.token_bytes(8).hex()", "assert math.isclose(got, want, rel_tol=1e-9)",
                    "n = 0x10  # a plain hex integer", "print(digest.hex())", "mask = 0xFF == flags"):
        assert pinned_bits(allowed) == [], allowed
