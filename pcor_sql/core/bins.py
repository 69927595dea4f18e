"""Declared bins of ordinal attributes (DESIGN.md §2, "Ordinal attributes").

A numeric or date column becomes a context attribute through edges e_1 < … < e_{B+1}: B
ordered bins [e_j, e_{j+1}), the last one closed, −inf/+inf allowed at the ends. The
attribute's domain is the bin list (one label per bin, e.g. `[25, 35)`); a context keeps a
contiguous run of bins holding the record's bin (`core.space`), released as a range over the
column (`engine.context_sql`).

`Bins` is what a caller declares: edges (numbers, dates or their text — the engine converts
text to the column's type), or `auto` quantile bins from the data, which the engine computes
only on request and with a PrivacyWarning (quantiles, min and max are data).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pcor_sql.errors import UserError

#: Most bins `auto:K` may ask for (a context lattice over K bins has K(K+1)/2 intervals).
MAX_AUTO_BINS = 64
_AUTO = re.compile(r"\s*auto\s*:\s*(\d+)\s*\Z", re.IGNORECASE)
_INF = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
        "-inf": -math.inf, "-infinity": -math.inf}
EXAMPLE = "age=18,25,35,45,55,65,81"


@dataclass(frozen=True)
class Bins:
    """Declared bins of one attribute: `edges` as given, or `auto` = K quantile bins."""

    edges: tuple[Any, ...] = ()
    auto: int | None = None

    def __post_init__(self) -> None:
        if self.auto is not None:
            if self.edges or type(self.auto) is not int or not 1 <= self.auto <= MAX_AUTO_BINS:
                raise UserError(f"auto bins need a count from 1 to {MAX_AUTO_BINS}, got {self.auto!r}",
                                "write e.g. auto:5")
            return
        if len(self.edges) < 2:
            raise UserError(f"bins need at least two edges, got {len(self.edges)}", f"declare e.g. {EXAMPLE}")
        numbers = [e for e in self.edges if _is_number(e)]
        if len(numbers) == len(self.edges):
            check_edges(self.edges)

    def text(self) -> str:
        """The declaration as the command line writes it: `18,25,35` or `auto:5`."""
        return f"auto:{self.auto}" if self.auto is not None else ",".join(edge_text(e) for e in self.edges)


def parse_bins(value: Any, name: str) -> Bins:
    """A caller's declaration for attribute `name`: a Bins, a list of edges, `"auto:K"`, or
    edges as comma-separated text (`"18,25,35"`). Text edges that read as numbers (or ±inf)
    become numbers; other text (dates) is left for the engine to convert."""
    if isinstance(value, Bins):
        return value
    if isinstance(value, str):
        auto = _AUTO.match(value)
        if auto:
            return Bins(auto=int(auto.group(1)))
        value = [part for part in value.split(",")]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Sequence):
        raise UserError(f"the bins of {name!r} must be a list of edges or 'auto:K', got {value!r}",
                        f"declare e.g. {{{name!r}: [18, 25, 35, 45]}}")
    return Bins(tuple(_edge(e, name) for e in value))


def declared_bins(bins: Any, domains: Any) -> tuple[tuple[tuple[str, Bins], ...] | None, Any]:
    """(bins as (attribute, Bins) pairs or None, the domains without bins).

    `bins` maps attributes to declarations (`parse_bins`), as a mapping or pairs. A `domains`
    entry whose values are a `Bins` — the SQL form `DOMAIN (age BINS (...))` — joins the bins;
    the other entries come back as pairs (None if none is left and none was given). An
    attribute declared twice, or given both bins and a domain, is an error."""
    out: dict[str, Bins] = {}

    def add(name: Any, value: Any) -> None:
        if not isinstance(name, str) or not name.strip():
            raise UserError(f"a bins attribute must be a name, got {name!r}", f"declare e.g. {EXAMPLE}")
        if name in out:
            raise UserError(f"the bins of {name!r} are declared twice", "declare each attribute's bins once")
        out[name] = parse_bins(value, name)

    try:
        for name, value in (bins.items() if isinstance(bins, Mapping) else bins or ()):
            add(name, value)
    except (TypeError, ValueError):
        raise UserError("bins must map attribute names to edges", "pass e.g. {'age': [18, 25, 35, 45]}") from None
    if domains is None or not out and not _any_bins(domains):
        return (tuple(out.items()) or None), domains
    rest = []
    for pair in domains.items() if isinstance(domains, Mapping) else domains:
        if isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], Bins):
            add(*pair)
        else:
            rest.append(pair)
    for pair in rest:
        if isinstance(pair, tuple) and len(pair) == 2 and pair[0] in out:
            raise UserError(f"{pair[0]!r} is given both bins and a domain",
                            "declare bins (ordered ranges) or a domain (labels), not both")
    return tuple(out.items()), rest


def _any_bins(domains: Any) -> bool:
    try:
        pairs = list(domains.items() if isinstance(domains, Mapping) else domains)
    except TypeError:
        return False
    return any(isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], Bins) for p in pairs)


def check_edges(edges: Sequence[Any]) -> None:
    """Edges strictly increasing, ±inf only at the ends (as the first / last edge)."""
    for k, e in enumerate(edges):
        if isinstance(e, float) and math.isnan(e):
            raise UserError("a bin edge is NaN", "declare numbers or dates")
        if _is_number(e) and math.isinf(e) and not (k == 0 and e < 0 or k == len(edges) - 1 and e > 0):
            raise UserError("an infinite bin edge is allowed only as the first (-inf) or the last (inf) edge",
                            f"declare e.g. -inf,25,35,inf")
    try:
        increasing = all(a < b for a, b in zip(edges, edges[1:]))
    except TypeError:
        raise UserError("bin edges of different kinds cannot be ordered", "declare numbers, or dates, only") from None
    if not increasing:
        raise UserError(f"bin edges must increase strictly, got {', '.join(edge_text(e) for e in edges)}",
                        f"declare them in increasing order, each once: {EXAMPLE}")


def bin_labels(edges: Sequence[Any]) -> tuple[str, ...]:
    """One label per bin: `[18, 25)` … `[65, 81]` (the last closed), `(-inf, 25)`, `[65, inf)`."""
    return tuple(run_label(edges, j, j) for j in range(len(edges) - 1))


def run_label(edges: Sequence[Any], first: int, last: int) -> str:
    """Bins first..last as one interval label: `[18, 35)`, `[65, 81]`, `(-inf, 25)`."""
    lo, hi = edges[first], edges[last + 1]
    opening = "(" if is_infinite(lo) else "["
    closing = "]" if last == len(edges) - 2 and not is_infinite(hi) else ")"
    return f"{opening}{edge_text(lo)}, {edge_text(hi)}{closing}"


def bin_of(edges: Sequence[Any], value: Any) -> int | None:
    """The bin holding `value` (the last bin closed), or None outside the edges (and for NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        if value < edges[0] or value > edges[-1]:
            return None
        return min(bisect.bisect_right(edges, value) - 1, len(edges) - 2)
    except TypeError:
        return None


def is_infinite(edge: Any) -> bool:
    return _is_number(edge) and math.isinf(edge)


def edge_text(edge: Any) -> str:
    """An edge as a label writes it: `25`, `2.5`, `inf`, `2020-01-01`."""
    if isinstance(edge, float):
        if math.isinf(edge):
            return "inf" if edge > 0 else "-inf"
        return str(int(edge)) if edge.is_integer() and abs(edge) < 1e15 else repr(edge)
    if hasattr(edge, "isoformat"):
        return edge.isoformat()
    return str(edge)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _edge(value: Any, name: str) -> Any:
    if isinstance(value, bool) or value is None:
        raise UserError(f"invalid bin edge {value!r} for {name!r}", "declare numbers or dates")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise UserError(f"an empty bin edge for {name!r} (two commas, or one at an end)", f"declare e.g. {EXAMPLE}")
        if text.lower() in _INF:
            return _INF[text.lower()]
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return text  # a date (or a typo): the engine converts it to the column's type
    return value
