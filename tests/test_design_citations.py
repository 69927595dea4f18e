"""Every `DESIGN.md §N` citation in the repository resolves in docs/DESIGN.md: section N exists,
and a rule cited by name (`DESIGN.md §6 "Reserve, then read"`, or `§8 "Bounded work"` inside
such a citation) is the start of a heading of that section. A newcomer reading a comment can
then find the rule the line keeps."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "DESIGN.md"
SCANNED = ("pcor_sql", "tests", "benchmarks", "client")
SUFFIXES = (".py", ".md", ".sql", ".sh", ".toml")

# A line break inside a docstring or a comment, with the next line's indentation and `#`.
_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:#+[ \t]*)?")
_QUOTED = r"""(?:'s)?[,:]?[ ]*(?:["“']([^"”'\n]{1,80})["”'])?"""
# A citation: DESIGN[.md] §N [name], then more sections chained by "," or "and".
_CITATION = re.compile(r"DESIGN(?:\.md)?(?:'s)?[ ]+§(\d+)" + _QUOTED
                       + r"((?:[ ]*(?:,|and)?[ ]*§\d+" + _QUOTED + r")*)")
_CHAINED = re.compile(r"§(\d+)" + _QUOTED)
# A rule cited by name with no "DESIGN" before it (`(§8 "No cross-analyst channels")`): in this
# repository a section sign followed by a quoted name is always a design citation.
_NAMED = re.compile(r"""§(\d+)(?!'s)[,:]?[ ]*["“']([^"”'\n]{1,80})["”']""")


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def design_headings(text: str) -> dict[int, list[str]]:
    """Section number → the words of its title and of every heading inside it."""
    out: dict[int, list[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        section = re.match(r"##[ ]+(\d+)\.[ ]+(.+)", line)
        if section:
            current = int(section.group(1))
            out[current] = [_words(section.group(2))]
        elif line.startswith("###") and current is not None:
            out[current].append(_words(line.lstrip("#")))
    return out


def citations(text: str) -> list[tuple[int, str | None]]:
    """(section, name or None) of every design citation in `text`."""
    flat = _BREAK.sub(" ", text)
    found: list[tuple[int, str | None]] = []
    for m in _CITATION.finditer(flat):
        found.append((int(m.group(1)), m.group(2)))
        found += [(int(c.group(1)), c.group(2)) for c in _CHAINED.finditer(m.group(3))]
    found += [(int(m.group(1)), m.group(2)) for m in _NAMED.finditer(flat)]
    return found


def unresolved(cites: list[tuple[int, str | None]], headings: dict[int, list[str]]) -> list[str]:
    bad = []
    for section, name in cites:
        if section not in headings:
            bad.append(f"§{section}: no such section")
        elif name is not None and not any(h.startswith(_words(name)) for h in headings[section]):
            bad.append(f'§{section} "{name}": no heading of §{section} starts so')
    return bad


def _files() -> list[pathlib.Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", DESIGN, *sorted((ROOT / "docs").glob("*.md"))]
    for top in SCANNED:
        files += sorted(p for p in (ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file())
    here = pathlib.Path(__file__).resolve()  # this file's examples cite nowhere on purpose
    return [p for p in dict.fromkeys(files) if p.exists() and p.resolve() != here]


def test_the_design_has_its_eleven_sections_in_order():
    text = DESIGN.read_text(encoding="utf-8")
    numbers = [int(n) for n in re.findall(r"^##[ ]+(\d+)\.", text, re.MULTILINE)]
    assert numbers == list(range(1, 12)), numbers


def test_every_design_citation_resolves_to_a_heading():
    headings = design_headings(DESIGN.read_text(encoding="utf-8"))
    bad, count = [], 0
    for path in _files():
        cites = citations(path.read_text(encoding="utf-8", errors="replace"))
        count += len(cites)
        bad += [f"{path.relative_to(ROOT)}: {problem}" for problem in unresolved(cites, headings)]
    assert not bad, "\n".join(bad)
    assert count >= 80, count  # the scan finds the code's citations (81 when this test was written)


@pytest.mark.parametrize(("text", "expected"), [
    ('(DESIGN.md §6 "Reserve, then read")', [(6, "Reserve, then read")]),
    ("(DESIGN.md §6, §8) and the owner's plane (§9)", [(6, None), (8, None)]),
    ('DESIGN.md §6 "Only data\n    crosses the boundary", §8 "Inputs are exact"',
     [(6, "Only data crosses the boundary"), (8, "Inputs are exact")]),
    ("# a comment (DESIGN.md §8 \"No cross-analyst\n# channels\")", [(8, "No cross-analyst channels")]),
    ("DESIGN.md §7's order", [(7, None)]),
    ("DESIGN §2, \"Ordinal attributes\"", [(2, "Ordinal attributes")]),
    ("the paper, §4 and Alg. 5", []),
])
def test_the_scanner_reads_each_way_the_code_cites(text, expected):
    assert set(citations(text)) == set(expected)


def test_a_citation_that_lands_nowhere_is_reported():
    headings = {6: ["trust model", "reserve then read"], 8: ["the analyst service", "bounded work"]}
    assert unresolved([(6, "Reserve, then read"), (8, None), (6, "Trust")], headings) == []
    assert unresolved([(12, None), (8, "Unbounded work"), (6, "then read")], headings) == [
        "§12: no such section", '§8 "Unbounded work": no heading of §8 starts so',
        '§6 "then read": no heading of §6 starts so']
