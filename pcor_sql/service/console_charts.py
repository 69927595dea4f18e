"""The owner console's charts (DESIGN.md §9), drawn by the server as inline SVG: a bar of ε spent
against a limit, and cumulative spending over time as step lines with labelled axes.

Inline SVG needs no script, no image request and no outside resource, so the console's
Content-Security-Policy can forbid all of them. Every label goes through `html.escape`.
"""

from __future__ import annotations

import datetime as _dt
import math
from html import escape
from typing import Sequence

#: Colour-blind-safe series colours (Okabe–Ito), cycled.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: The most series one chart draws (the largest by total); the rest are listed under it.
MAX_SERIES = 8


def number(value: float | None, digits: int = 4) -> str:
    """ε as people read it: 0.2, 12.5, 1,234 — never 0.20000000000000001."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def budget_bar(spent: float, limit: float | None, width: int = 220) -> str:
    """ε spent against a limit as a bar (green, amber past 70 %, red past 90 % or over); with
    no limit, a grey track and the words "no limit"."""
    height = 14
    if limit is None or limit <= 0:
        label = f"{number(spent)} ε spent, no limit" if limit is None else f"{number(spent)} of 0 ε"
        fill = "#bbb" if limit is None else "#c62828"
        return (f'<svg class="bar" width="{width}" height="{height}" role="img" aria-label="{escape(label)}">'
                f'<rect width="{width}" height="{height}" rx="3" fill="#eee"/>'
                f'<rect width="{width if limit is not None else 0}" height="{height}" rx="3" fill="{fill}"/>'
                f'<title>{escape(label)}</title></svg>')
    share = spent / limit
    fill = "#2e7d32" if share < 0.7 else "#f9a825" if share < 0.9 else "#c62828"
    drawn = max(0.0, min(1.0, share)) * width
    label = f"{number(spent)} of {number(limit)} ε ({share:.0%})"
    return (f'<svg class="bar" width="{width}" height="{height}" role="img" aria-label="{escape(label)}">'
            f'<rect width="{width}" height="{height}" rx="3" fill="#eee"/>'
            f'<rect width="{drawn:.1f}" height="{height}" rx="3" fill="{fill}"/>'
            f'<title>{escape(label)}</title></svg>')


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top` (1, 2 or 5 times a power of ten apart)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def time_label(at: _dt.datetime, span: float) -> str:
    if span < 2 * 86400:
        return at.strftime("%H:%M" if span > 120 else "%H:%M:%S")
    if span < 200 * 86400:
        return at.strftime("%b %d")
    return at.strftime("%Y-%m")


def _parse(at: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(at.replace("Z", "+00:00").replace(" ", "T"))


def step_chart(series: dict[str, Sequence[Sequence[object]]], *, title: str, width: int = 1200,
               height: int = 300) -> str:
    """Cumulative ε over time, one step line per series ({label: [[ISO time, total], ...]}), with
    time and ε axes and a legend. Points within one pixel are merged (the last total wins),
    so a ledger of many thousand rows draws a path of at most `width` steps per series."""
    if not series:
        return f'<p class="empty">{escape(title)}: nothing spent yet.</p>'
    ordered = sorted(series.items(), key=lambda item: (-float(item[1][-1][1]), item[0]))
    drawn, left_out = ordered[:MAX_SERIES], ordered[MAX_SERIES:]
    parsed = {label: [(_parse(str(at)), float(total)) for at, total in points] for label, points in drawn}
    times = [at for points in parsed.values() for at, _ in points]
    start, end = min(times), max(times)
    span = (end - start).total_seconds()
    if span <= 0:  # one instant: widen so the step shows
        start, end, span = start - _dt.timedelta(minutes=1), end + _dt.timedelta(minutes=1), 120.0
    top = max(total for points in parsed.values() for _, total in points)
    ticks = nice_ticks(top)
    top = ticks[-1]
    left, right, upper, lower = 64, 40, 28, 44
    plot_w, plot_h = width - left - right, height - upper - lower

    def x(at: _dt.datetime) -> float:
        return left + (at - start).total_seconds() / span * plot_w

    def y(total: float) -> float:
        return upper + plot_h - total / top * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img"'
           f' aria-label="{escape(title)}"><title>{escape(title)}</title>',
           f'<text x="{left}" y="16" class="ct">{escape(title)}</text>']
    for tick in ticks:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" class="tl">{number(tick)}</text>')
    for i in range(6):
        at = start + _dt.timedelta(seconds=span * i / 5)
        out.append(f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{upper + plot_h}" y2="{upper + plot_h + 4}"'
                   f' class="axis"/><text x="{x(at):.1f}" y="{upper + plot_h + 18}" text-anchor="middle"'
                   f' class="tl">{escape(time_label(at, span))}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{upper}" y2="{upper + plot_h}" class="axis"/>'
               f'<line x1="{left}" x2="{width - right}" y1="{upper + plot_h}" y2="{upper + plot_h}" class="axis"/>'
               f'<text x="14" y="{upper + plot_h / 2:.0f}" class="tl" transform="rotate(-90 14'
               f' {upper + plot_h / 2:.0f})" text-anchor="middle">ε spent (cumulative)</text>'
               f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" class="tl" text-anchor="middle">time (UTC,'
               f' {escape(start.strftime("%Y-%m-%d %H:%M"))} to {escape(end.strftime("%Y-%m-%d %H:%M"))})</text>')
    for index, (label, points) in enumerate(parsed.items()):
        colour = PALETTE[index % len(PALETTE)]
        steps: list[tuple[float, float]] = []
        for at, total in points:
            px = float(round(x(at)))
            if steps and steps[-1][0] == px:
                steps[-1] = (px, total)
            else:
                steps.append((px, total))
        path = [f"M{steps[0][0]:.1f},{y(0):.1f}"]
        for px, total in steps:
            path.append(f"H{px:.1f}V{y(total):.1f}")
        path.append(f"H{width - right}")
        out.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="2">'
                   f'<title>{escape(label)}: {number(points[-1][1])} ε</title></path>')
    out.append("</svg>")
    legend = "".join(f'<li><span class="sw" style="background:{PALETTE[i % len(PALETTE)]}"></span>{escape(label)}:'
                     f' {number(float(points[-1][1]))} ε</li>' for i, (label, points) in enumerate(drawn))
    more = ""
    if left_out:
        more = (f'<p class="note">{len(left_out)} smaller series not drawn: '
                + ", ".join(f"{escape(label)} ({number(float(points[-1][1]))} ε)" for label, points in left_out)
                + "</p>")
    return f'<figure>{"".join(out)}<ul class="legend">{legend}</ul>{more}</figure>'
