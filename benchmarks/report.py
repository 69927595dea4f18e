"""Writers: the bench's tables, Markdown and JSON files, and BENCHMARKS.md's generated sections.

BENCHMARKS.md holds one section per command between marker comments
(`<!-- pcor-sql bench:begin -->` … `<!-- pcor-sql bench:end -->`); regenerating a section
replaces only the text between its markers and keeps the rest of the file.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Sequence

from benchmarks.measure import machine_line
from benchmarks.tables import Table, make_table, markdown, mib, percent, ratio, seconds

BENCHMARKS_TITLE = "# pcor-sql benchmarks"
BENCHMARKS_INTRO = (
    "Generated from a checkout by `python -m benchmarks bench`, `python -m benchmarks reproduce` and\n"
    "`python -m benchmarks explore` (each regenerates its own section with `--update-benchmarks`); do\n"
    "not edit the sections by hand. Every figure was measured by the command line shown above it, on\n"
    "the machine described there.\n"
)


def _ms(t: dict[str, Any] | None) -> str:
    if not t:
        return "—"
    mark = "≥ " if t.get("stopped_at_limit") else ""
    return f"{mark}{seconds(t['median_s'])} ({seconds(t['min_s'])}–{seconds(t['max_s'])})"


def bench_tables(result: dict[str, Any]) -> list[Table]:
    """The bench's tables, in the order they are printed and written."""
    tables = [_release_table(result), _summary_table(result)]
    if result.get("per_context"):
        tables.append(_per_context_table(result["per_context"]))
    if result.get("direct"):
        tables.append(_direct_table(result["direct"]))
    if result.get("big"):
        tables.append(_big_table(result["big"]))
    tables.append(target_table(result["targets"]))
    return tables


def _release_table(result: dict[str, Any]) -> Table:
    cfg = result["config"]
    rows = []
    for e in result["releases"]:
        if "error" in e:
            rows.append((e["dataset"], e["record"], e["search"], e["verifier"], "error: " + e["error"], *[""] * 6))
            continue
        naive = e.get("naive")
        verified = e.get("contexts_verified") or []
        naive_verified = e.get("naive_contexts_verified") or []
        rows.append((
            e["dataset"], e["record"], e["search"], e["verifier"],
            _ms(e["end_to_end"]), seconds(e["engine"]["median_s"]),
            _ms(naive) + (f" [{naive['repeats']}×]" if naive else "") if naive else e.get("naive_error", "—"),
            ratio(e.get("speedup_end_to_end"), bool(e.get("speedup_lower_bound"))),
            ratio(e.get("speedup_engine"), bool(e.get("speedup_lower_bound"))),
            f"{e['same_release']}/{e['compared_releases']}" if naive else "—",
            f"{min(verified)}–{max(verified)}"
            + (f" / {min(naive_verified)}–{max(naive_verified)}" if naive_verified else ""),
        ))
    limit = cfg.get("naive_limit_s")
    notes = [
        f"ε = {cfg['epsilon']}, n = {cfg['samples']}, `{cfg['accounting']}` accounting; seeds {cfg['seed']}…"
        f"{cfg['seed'] + cfg['repeats'] - 1} ({cfg['repeats']} repeats); the naive baseline runs the first "
        f"{cfg['naive_repeats']} of those seeds" + (" (fewer repeats: --quick)" if cfg["quick"] else "") + ".",
        "end to end = `explain_outlier` with a `Session` whose per-cell summary is already built (parse, record "
        "lookup, start search, search, in-memory ledger charge); engine = `OutlierRun.release` alone (the "
        "`Session.prepare` hook). Times: median (min–max). Each repeat starts with an empty Grubbs critical-value "
        "cache (cold).",
        "naive = one DuckDB query per context fetching the population, verifier in numpy/SciPy/scikit-learn "
        "(benchmarks/naive.py), same `run_search` and seed; it remembers each context's answer, so it never queries "
        "a context twice. speed-up = median over seeds of naive time / end-to-end (or engine) time on the same "
        "seed; the end-to-end one is the target's (it carries ~20 ms of parsing and ledger work per release).",
        "same release = seeds on which the naive baseline released the very context the engine did "
        "(scikit-learn's LOF breaks ties at a k-distance arbitrarily where DESIGN.md counts every tie, so "
        "LOF paths can part on metrics with duplicates). contexts verified: engine / naive, over the seeds.",
    ]
    if limit:
        notes.append(
            f"--quick stops a naive run after {limit:g} s (except salaries bfs+lof and bfs+grubbs, the target "
            "cells, which always run to completion): '≥' marks a stopped run, whose speed-up is a lower bound."
        )
    return make_table(
        "Releases: end to end, engine only, naive baseline",
        ("dataset", "record", "search", "verifier", "end to end", "engine", "naive", "speed-up (end to end)",
         "speed-up (engine)", "same release", "contexts verified"),
        rows, notes)


def _summary_table(result: dict[str, Any]) -> Table:
    srows = []
    for s in result["summary"]:
        srows.append((s["dataset"], f"{s['rows']:,}", f"{s['cells']:,}", _ms(s["build_summary"]),
                      _ms(s["sorted_index"]), s["build_summary"]["repeats"]))
    return make_table(
        "Per-cell summary build", ("dataset", "rows", "cells", "build_summary (GROUP BY moments)",
                                   "sorted index (LOF / histogram)", "repeats"),
        srows, ("Times: median (min–max). build_summary: the summary's own build time in a fresh "
                "`Session.prepare`. The sorted index is loaded once, on the first LOF or histogram check; timed as "
                "`OutlierRun.preload`, which also builds the cell-membership tables.",))


def _per_context_table(per_context: Sequence[dict[str, Any]]) -> Table:
    prow = []
    for p in per_context:
        prow.append((p["verifier"], f"{p['median_us']:.0f} µs", f"{p['p90_us']:.0f} µs", f"{p['contexts']:,}",
                     percent(p["valid_share"]),
                     f"{p['naive_median_us'] / 1000:.1f} ms" if "naive_median_us" in p else "—",
                     f"{p['naive_agreement']:.0%} of {p['naive_contexts']}" if "naive_agreement" in p else "—"))
    first = per_context[0]
    return make_table(
        f"Time to verify one context ({first['dataset']} record {first['record']}, summary path)",
        ("verifier", "median", "p90", "contexts", "valid", "naive median", "naive agrees"),
        prow,
        ("Contexts drawn uniformly among the 2^22 admissible ones (seeded); each `is_valid` call of the "
         "oracle (`OutlierRun.oracle`) timed alone with an empty verdict cache: cell membership, population "
         "moments and the verifier.",))


def _direct_table(d: dict[str, Any]) -> Table:
    return make_table(
        "Direct: exact enumeration with grubbs",
        ("dataset", "record", "admissible contexts", "valid (|COE|)", "pcor_sql.coe enumeration",
         "direct release (end to end)"),
        [(d["dataset"], d["record"], f"{d['admissible']:,}", f"{d['coe_size']:,}", _ms(d["enumeration"]),
          _ms(d["direct_release"]))],
        ("Times: median (min–max) over the repeats.",))


def _big_table(b: dict[str, Any]) -> Table:
    return make_table(
        "bfs + grubbs on a 10-million-row table (salaries shape)",
        ("rows", "end to end incl. summary", "engine: summary build + release", "of which the summary build",
         "peak memory", "generation (not timed in the figures)"),
        [(f"{b['rows']:,}",
          f"{seconds(statistics.median(b['end_to_end_s']))} ("
          + ", ".join(seconds(x) for x in b["end_to_end_s"]) + ")",
          f"{seconds(statistics.median(b['engine_s']))}",
          f"{seconds(statistics.median(b['summary_build_s']))}",
          mib(b["peak_rss_bytes"]),
          seconds(b["generation"]["generation_s"]))],
        (f"Memory: {b['memory_method']}; after imports alone: {mib(b['rss_after_imports_bytes'])}.",
         "Each repeat uses a new Session, so the summary is rebuilt every time; the table is read from a "
         "DuckDB file just written (in the OS page cache). Times in parentheses: each repeat, in order."))


def target_table(targets: Sequence[dict[str, Any]]) -> Table:
    return make_table(
        "Targets", ("target", "goal", "measured", "verdict"),
        [(t["name"], t["goal"], t["measured"], _verdict(t["met"])) for t in targets])


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "MISSED")


def header(title: str, command: str, result: dict[str, Any]) -> str:
    if result.get("sources"):
        return sources_header(title, command, result["sources"])
    load = result.get("load") or {}
    text = (
        f"## {title}\n\n"
        f"- command: `{command}`\n"
        f"- date: {result['started']}\n"
        f"- machine: {machine_line(result['machine'])}\n"
        f"- code: pcor_sql at commit {result['machine'].get('code') or 'unknown (not a git checkout)'}\n"
        f"- wall time of the whole command: {seconds(result['wall_s'])}\n"
    )
    if load:
        text += (f"- load average (1, 5, 15 min; other processes on the same cores) at start {load.get('start')}, "
                 f"at end {load.get('end')}\n")
    return text


def source_of(result: dict[str, Any], command: str) -> dict[str, Any]:
    """Where a saved result came from — the command that measured it (`command` for results saved
    before they recorded one), date, machine and code, wall time, load, finished or not — as
    `sources_header` lays it out."""
    return {"command": result.get("command") or command, "started": result["started"], "machine": result["machine"],
            "wall_s": result.get("wall_s", 0.0), "load": result.get("load", {}),
            "complete": result.get("complete", True)}


def sources_header(title: str, command: str, sources: Sequence[dict[str, Any]]) -> str:
    """The header of a section laid out from saved results: each measuring run, then the layout command."""
    lines = [f"## {title}", ""]
    for src in sources:
        load = src.get("load") or {}
        done = "" if src.get("complete", True) else " — NOT FINISHED when laid out: the cells it had measured"
        wall = seconds(src.get("wall_s")) if src.get("complete", True) else "— (still running or stopped)"
        lines.append(f"- measured by `{src['command']}`{done}: started {src['started']}, wall time "
                     f"{wall}, pcor_sql at commit {src['machine'].get('code') or 'unknown'}; "
                     f"load average at start {load.get('start')}, at end {load.get('end')}")
    machines = list(dict.fromkeys(machine_line(s["machine"]) for s in sources))
    lines += [f"- machine: {m}" for m in machines]
    lines.append(f"- laid out by: `{command}`")
    return "\n".join(lines) + "\n"


def document(title: str, command: str, result: dict[str, Any], tables: Sequence[Table], extra: str = "") -> str:
    parts = [header(title, command, result)]
    if extra:
        parts.append(extra.rstrip() + "\n")
    parts.extend(markdown(t) for t in tables)
    return "\n".join(parts)


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=_json_default) + "\n", encoding="utf-8")


def write_outputs(out_dir: Path, stem: str, markdown_text: str, result: dict[str, Any]) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
    md.write_text(markdown_text, encoding="utf-8")
    write_json(js, result)
    return md, js


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "as_dict"):
        return obj.as_dict()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def update_section(path: Path, name: str, body: str) -> None:
    """Replace (or append) the section `name` of BENCHMARKS.md with `body`."""
    begin, end = f"<!-- pcor-sql {name}:begin -->", f"<!-- pcor-sql {name}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else f"{BENCHMARKS_TITLE}\n\n{BENCHMARKS_INTRO}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
