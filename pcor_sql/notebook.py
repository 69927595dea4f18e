"""How results look in a notebook: `_repr_html_` and `_repr_markdown_` of an Explanation, a
CoeResult and an AnomalyResult — the same content as the CLI's text, as a small table.

Owner-only content (an Explanation's `.owner`, every CoeResult, an answer's owner fields) is
marked NOT FOR RELEASE, as on the command line.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from pcor_sql.readable import certificate_words, round_epsilon, selector_key, selector_words, start_words

#: At most this many valid contexts in a CoeResult's table (the rest is counted).
COE_ROWS = 20
_NOT_FOR_RELEASE = "OWNER ONLY — NOT FOR RELEASE"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _values(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _rows(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f"<tr><th style='text-align:left'>{_e(k)}</th><td style='text-align:left'>{_e(v)}</td></tr>"
                   for k, v in pairs)


def _charged(units: Sequence[str], dataset: str | None) -> str:
    """`bundled:salaries (dataset payroll)`: the privacy units a result was charged to."""
    return (", ".join(units) or "—") + (f" (dataset {dataset})" if dataset else "")


def _explanation_pairs(e: Any) -> list[tuple[str, str]]:
    key = selector_key(e.selector, e.record)
    pairs = [("record", f"{key[0]} = {key[1]}" if key else selector_words(e.selector))]
    # An ordinal attribute shows its run of bins as one range, `[18, 35)`.
    pairs += [(attribute, e.ranges[attribute] if attribute in e.ranges else "{" + _values(values) + "}")
              for attribute, values in e.context.items()]
    pairs += [
        ("explanation", e.explanation_sql),
        ("privacy", e.privacy_summary),
        ("search", f"{e.search}, {e.samples} samples; verifier {e.verifier}; utility {e.utility}"),
        ("start", start_words(e.start_source)),
    ]
    if e.budget_limit is not None:
        pairs.append(("charged to", f"{_charged(e.units, e.dataset)}: spent ε = {round_epsilon(e.budget_spent):g} "
                                    f"of limit {e.budget_limit:g}"))
    else:
        pairs.append(("charged to", f"{_charged(e.units, e.dataset)} (no budget limit set)"))
    return pairs


def _owner_pairs(e: Any) -> list[tuple[str, str]]:
    if e.owner is None:
        return []
    owner = dict(e.owner.as_dict())
    owner.pop("not_for_release", None)
    notes = owner.pop("notes", [])
    shown = owner.pop("certificate", None)
    pairs = [(k.replace("_", " "), str(v)) for k, v in owner.items()] + [("note", n) for n in notes]
    return pairs + ([("verdict", certificate_words(shown))] if shown is not None else [])


def explanation_html(e: Any) -> str:
    parts = [f"<div><p><b>{_e(e.summary)}</b></p><table>{_rows(_explanation_pairs(e))}</table>"]
    if e.seeded:
        parts.append("<p><b>seeded: not for real releases</b></p>")
    owner = _owner_pairs(e)
    if owner:
        parts.append(f"<p style='color:#b00'><b>NOT FOR RELEASE — owner diagnostics</b></p><table>{_rows(owner)}</table>")
    return "".join(parts) + "</div>"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(pairs: Sequence[tuple[str, str]]) -> str:
    return "| | |\n|---|---|\n" + "".join(f"| {_md(k)} | {_md(v)} |\n" for k, v in pairs)


def explanation_markdown(e: Any) -> str:
    out = f"**{_md(e.summary)}**\n\n{_md_table(_explanation_pairs(e))}"
    if e.seeded:
        out += "\n**seeded: not for real releases**\n"
    owner = _owner_pairs(e)
    if owner:
        out += f"\n**NOT FOR RELEASE — owner diagnostics**\n\n{_md_table(owner)}"
    return out


def _coe_head(r: Any) -> str:
    return (
        f"{r.size:,} valid of {r.admissible:,} admissible contexts; largest utility "
        f"{r.max_utility if r.max_utility is not None else '—'}; {r.verifier}; utility {r.utility}"
    )


def coe_html(r: Any) -> str:
    shown = r.ranked(COE_ROWS)
    body = "".join(
        f"<tr><td>{rank}</td><td>{_e(c.utility)}</td><td style='text-align:left'>{_e(c.predicate)}</td></tr>"
        for rank, c in enumerate(shown, start=1)
    )
    more = f"<p>… {r.size - len(shown):,} more</p>" if r.size > len(shown) else ""
    record = ", ".join(f"{k}={v}" for k, v in r.record.items())
    return (
        f"<div><p style='color:#b00'><b>{_NOT_FOR_RELEASE}</b></p><p><b>Valid contexts of record {_e(record)}</b>"
        f"<br>{_e(_coe_head(r))}</p><table><tr><th>#</th><th>utility</th><th>context</th></tr>{body}</table>{more}</div>"
    )


def coe_markdown(r: Any) -> str:
    shown = r.ranked(COE_ROWS)
    rows = "".join(f"| {rank} | {c.utility:g} | {_md(c.predicate)} |\n" for rank, c in enumerate(shown, start=1))
    more = f"\n… {r.size - len(shown):,} more\n" if r.size > len(shown) else ""
    return f"**{_NOT_FOR_RELEASE}**\n\n{_md(_coe_head(r))}\n\n| # | utility | context |\n|---|---|---|\n{rows}{more}"


def _answer_pairs(a: Any) -> list[tuple[str, str]]:
    pairs = [(str(k), str(v)) for k, v in a.record.items()]
    pairs += [("answer", a.summary), ("privacy", a.privacy_summary), ("charged to", _charged(a.units, a.dataset))]
    if a.seeded:
        pairs.append(("seeded", "not for real releases"))
    return pairs


def answer_html(a: Any) -> str:
    out = f"<div><table>{_rows(_answer_pairs(a))}</table>"
    if a.owner is not None:
        owner = [(k, str(v)) for k, v in a.owner.items() if k != "not_for_release"]
        out += f"<p style='color:#b00'><b>NOT FOR RELEASE — owner fields</b></p><table>{_rows(owner)}</table>"
    return out + "</div>"


def answer_markdown(a: Any) -> str:
    out = _md_table(_answer_pairs(a))
    if a.owner is not None:
        owner = [(k, str(v)) for k, v in a.owner.items() if k != "not_for_release"]
        out += f"\n**NOT FOR RELEASE — owner fields**\n\n{_md_table(owner)}"
    return out


# ---- a list of results: one table, a row per result ---------------------------------------

def _row(item: Any) -> list[tuple[str, str]] | None:
    """An explanation's, an answer's or a record not released's row (its summary first), else
    None (shown on its own)."""
    if getattr(item, "released", True) is False:
        return [("summary", item.summary), ("record", str(item.key))]
    if hasattr(item, "explanation_sql") and hasattr(item, "start_source"):
        pairs = [("summary", item.summary), *_explanation_pairs(item)]
    elif hasattr(item, "anomaly") and hasattr(item, "record"):
        pairs = _answer_pairs(item)
    else:
        return None
    if hasattr(item, "explanation_sql") and item.seeded:
        pairs.append(("seeded", "not for real releases"))
    if getattr(item, "owner", None) is not None:
        pairs.append(("owner diagnostics", "NOT FOR RELEASE — show this result alone to see them"))
    return pairs


def _grid(items: Sequence[Any]) -> tuple[list[str], list[dict[str, str]]] | None:
    """The columns (every row's names, in first-seen order) and the rows, or None when an item
    is not an explanation or an answer."""
    rows = [_row(item) for item in items]
    if not rows or any(r is None for r in rows):
        return None
    columns: list[str] = []
    for pairs in rows:
        columns.extend(k for k, _ in pairs if k not in columns)  # type: ignore[union-attr]
    return columns, [dict(pairs) for pairs in rows]  # type: ignore[arg-type]


def results_html(items: Sequence[Any]) -> str:
    grid = _grid(items)
    if grid is None:  # COE results, or nothing: each shown its own way
        shown = [item._repr_html_() if hasattr(item, "_repr_html_") else f"<pre>{_e(repr(item))}</pre>" for item in items]
        return "<div>" + ("".join(shown) or "<p>no results</p>") + "</div>"
    columns, rows = grid
    head = "".join(f"<th style='text-align:left'>{_e(c)}</th>" for c in ["#", *columns])
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{_e(v)}</td>"
                                    for v in [str(i), *(row.get(c, "") for c in columns)]) + "</tr>"
                   for i, row in enumerate(rows))
    return f"<div><p><b>{len(rows):,} results</b></p><table><tr>{head}</tr>{body}</table></div>"


def results_markdown(items: Sequence[Any]) -> str:
    grid = _grid(items)
    if grid is None:
        return "\n\n".join(item._repr_markdown_() if hasattr(item, "_repr_markdown_") else _md(repr(item))
                           for item in items) or "no results"
    columns, rows = grid
    out = f"**{len(rows):,} results**\n\n| # | " + " | ".join(_md(c) for c in columns) + " |\n"
    out += "|---" * (len(columns) + 1) + "|\n"
    out += "".join(f"| {i} | " + " | ".join(_md(row.get(c, "")) for c in columns) + " |\n" for i, row in enumerate(rows))
    return out
