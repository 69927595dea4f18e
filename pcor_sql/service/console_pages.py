"""The owner console's pages (DESIGN.md §9) as HTML text: plain functions from the owner plane's
data (`owner_plane.OwnerPlane`) to a page, so they can be rendered and timed without a server.

One rule holds everywhere: every value from the ledger (an analyst's name, a dataset, a key, a
statement, an audit line) is written through `esc`, so a hostile name is text, never markup. The
pages use no script and load nothing: the CSS is inline and the charts are inline SVG.
"""

from __future__ import annotations

import re

from html import escape
from typing import Any, Iterable, Sequence
from urllib.parse import urlencode

from pcor_sql.service.console_charts import budget_bar, number, step_chart

#: The session's pages, under its base path (`/console/<key>`: `console_app`).
NAV = (("overview", "", "Overview"), ("datasets", "/datasets", "Datasets"), ("analysts", "/analysts", "Analysts"),
       ("history", "/history", "History"), ("spending", "/spending", "Spending"), ("audit", "/audit", "Audit log"))
#: The base path of the pages when none is given (a page rendered outside a session, for timing).
BASE = "/console"
NOTIONS = ("ocdp", "dp", "sp")

CSS = """
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1d232a;background:#f5f6f8}header{background:#1f3a5f;color:#fff;padding:0 24px;display:flex;
align-items:center;gap:24px;height:52px}header b{font-size:16px;letter-spacing:.3px}nav{display:flex;gap:4px;flex:1}
nav a{color:#d7e3f4;text-decoration:none;padding:6px 10px;border-radius:4px}nav a:hover{background:#2d4f7c}
nav a.on{background:#fff;color:#1f3a5f;font-weight:600}header form{margin:0}main{padding:20px 24px;max-width:1400px}
h1{font-size:20px;margin:4px 0 14px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;box-shadow:0 1px 2px rgba(0,0,0,.08)}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e4e7eb;vertical-align:top}
th{background:#eef1f5;font-weight:600;font-size:13px}td.n{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.asked{max-width:520px;overflow-wrap:anywhere}.muted{color:#68717d}.empty{color:#68717d;font-style:italic}
.flash{padding:10px 14px;border-radius:4px;margin:0 0 14px;background:#e8f5e9;border:1px solid #a5d6a7}
.error{background:#fdecea;border-color:#f5b7b1}.token{font-size:15px;padding:10px;background:#fff8e1;
border:1px dashed #f9a825;display:block;margin:8px 0;user-select:all;overflow-wrap:anywhere}
button,input,select{font:inherit}button{padding:4px 10px;border:1px solid #9aa5b1;border-radius:4px;
background:#fff;cursor:pointer}button.warn{border-color:#c62828;color:#c62828}button.main{background:#1f3a5f;color:#fff}
header button{background:transparent;color:#fff;border-color:#7f9cc0}
form.inline{display:inline-flex;gap:4px;align-items:center;margin:0 6px 4px 0}input[type=text],input[type=password],
input[type=number]{padding:4px 6px;border:1px solid #9aa5b1;border-radius:4px}input.small{width:96px}
.filters{display:flex;gap:10px;align-items:end;margin-bottom:12px;flex-wrap:wrap}.filters label{display:flex;
flex-direction:column;font-size:12px;color:#3e4651}.pager{margin:10px 0;display:flex;gap:14px;align-items:center}
.nw,.tag{white-space:nowrap}.tag{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e4e7eb}
.tag.answered{background:#e8f5e9}.tag.failed{background:#fdecea}.tag.interrupted,.tag.running{background:#fff8e1}
.tag.revoked{background:#fdecea}figure{margin:0 0 18px;background:#fff;padding:12px;
box-shadow:0 1px 2px rgba(0,0,0,.08)}.chart .grid{stroke:#e4e7eb}.chart .axis{stroke:#68717d}
.chart .tl{font-size:11px;fill:#3e4651}.chart .ct{font-size:13px;font-weight:600;fill:#1d232a}
ul.legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 18px}
.sw{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px;border-radius:2px}
.cards{display:flex;gap:12px;margin-bottom:10px}.card{background:#fff;padding:10px 16px;
box-shadow:0 1px 2px rgba(0,0,0,.08);min-width:140px}.card b{display:block;font-size:20px}
.login{max-width:380px;margin:80px auto;background:#fff;padding:24px;box-shadow:0 1px 3px rgba(0,0,0,.15)}
.login input{width:100%;margin:6px 0 12px}.q{display:grid;grid-template-columns:max-content 120px max-content;
gap:3px 8px;align-items:center;white-space:nowrap}.q svg{display:block}.chart{width:100%;height:auto}.note{font-size:12px;color:#68717d}
"""


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def document(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport"'
            f' content="width=device-width,initial-scale=1"><meta name="referrer" content="same-origin">'
            f"<title>{esc(title)} · pcor-sql console</title><style>{CSS}</style></head><body>{body}</body></html>")


def hidden(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(csrf)}">'


def layout(title: str, active: str, csrf: str, body: str, flash: tuple[str, str] | None = None,
           base: str = BASE) -> str:
    links = "".join(f'<a href="{esc(base)}{href}"{" class=on" if key == active else ""}>{label}</a>' for key, href, label in NAV)
    note = ""
    if flash:
        kind, text = flash
        note = f'<div class="flash{" error" if kind == "error" else ""}">{esc(text)}</div>'
    head = (f'<header><b>pcor-sql · owner</b><nav>{links}</nav><form method="post" action="{esc(base)}/logout">'
            f'{hidden(csrf)}<button type="submit">Log out</button></form></header>')
    return document(title, f"{head}<main><h1>{esc(title)}</h1>{note}{body}</main>")


def login_page(error: str | None = None) -> str:
    message = f'<div class="flash error">{esc(error)}</div>' if error else ""
    return document("Log in", (
        '<div class="login"><h1>pcor-sql owner console</h1>'
        f'{message}<form method="post" action="/console/login"><label for="token">Owner token</label>'
        '<input id="token" name="token" type="password" autocomplete="off" autofocus required>'
        '<button class="main" type="submit">Log in</button></form><p class="note">The owner token is in the'
        " service's runtime file beside the database (or the file named by --owner-token-file)."
        " Analysts' tokens do not open the console.</p></div>"))


def message_page(title: str, text: str, status_hint: str = "") -> str:
    return document(title, f'<div class="login"><h1>{esc(title)}</h1><p>{esc(text)}</p>{status_hint}'
                           '<p><a href="/console">Back to the console</a></p></div>')


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of already-escaped cells (`numeric`: the right-aligned columns)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{cell}</td>'
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="empty">none</td></tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def unit_rows(units: Sequence[dict[str, Any]]) -> tuple[list[list[str]], int]:
    """Per unit and notion: spent against limit (rows with no limit and nothing spent are left
    out; their count is returned)."""
    rows, idle = [], 0
    for s in units:
        if s["limit"] is None and not s["spent"] and not s["releases"]:
            idle += 1
            continue
        limit = f'{number(s["limit"])} <span class="muted">({esc(s["limit_source"])})</span>' \
            if s["limit"] is not None else '<span class="muted">none</span>'
        rows.append([f'<code>{esc(s["unit"])}</code>' + (' <span class="tag">public</span>' if s["public"] else ""),
                     esc(s["notion"]), budget_bar(float(s["spent"]), s["limit"]), number(s["spent"]), limit,
                     esc(s["releases"])])
    return rows, idle


def units_table(units: Sequence[dict[str, Any]]) -> str:
    rows, idle = unit_rows(units)
    note = f'<p class="note">{idle} unit × notion pairs with no limit and nothing spent are not shown.</p>' if idle else ""
    return table(["Unit", "Notion", "Spent against limit", "Spent ε", "Limit ε", "Releases"], rows, (3, 5)) + note


def quota_text(usage: Sequence[dict[str, Any]]) -> str:
    """An analyst's quotas as a grid: where, a bar of spent against the quota (none without
    one), and the figures."""
    parts = []
    for u in usage:
        if u["limit"] is None and not u["spent"]:
            continue
        where = esc(u["notion"]) + (f' on {esc(u["dataset"])}' if u.get("dataset") else "")
        if u["limit"] is None:
            parts.append(f'<span>{where}</span><span class="muted">no quota</span><span>{number(u["spent"])} spent</span>')
        else:
            parts.append(f'<span>{where}</span>{budget_bar(float(u["spent"]), u["limit"], 120)}'
                         f'<span>{number(u["spent"])} / {number(u["limit"])}</span>')
    return f'<div class="q">{"".join(parts)}</div>' if parts else '<span class="muted">nothing spent, no quota</span>'


def requests_text(requests: dict[str, int]) -> str:
    if not requests:
        return '<span class="muted">none</span>'
    return " ".join(f'<span class="tag {esc(k)}">{esc(k)} {esc(v)}</span>' for k, v in sorted(requests.items()))


def status_tag(analyst: dict[str, Any]) -> str:
    if analyst["revoked"]:
        return f'<span class="tag revoked">revoked</span> <span class="muted">{esc(analyst["revoked_at"])}</span>'
    return '<span class="tag answered">active</span>'


_USING = re.compile(r"\bUSING (.+?)(?: WITH \(|$)")


def verifier_of(statement: str) -> str | None:
    """The verifier a request used, from its history statement (`EXPLAIN OUTLIER ... USING
    lof(k=10, threshold=1.5) WITH (...)`, every option resolved); None for an anomaly answer."""
    found = _USING.search(statement or "")
    return found.group(1).strip() if found else None


def history_rows(rows: Sequence[dict[str, Any]], *, short: bool = False) -> str:
    cells = []
    for r in rows:
        who = esc(r["analyst"]) if r.get("analyst") else f'<span class="muted">{esc(r.get("role") or "owner")}</span>'
        outcome = r.get("outcome") or ""
        asked = [f'<b>{esc(r.get("dataset") or r.get("unit"))}</b>']
        if r.get("record_key"):
            asked.append(f'<code>{esc(r["record_key"])}</code>')
        asked.append(f'<span class="muted">{esc(r.get("mechanism"))}</span>')
        text = r.get("asked") or r.get("statement") or ""
        verifier = verifier_of(text)
        if verifier:
            asked.append(f'<span class="verifier">verifier {esc(verifier)}</span>')
        if text and not short:
            asked.append(f'<div class="mono muted">{esc(text[:600])}{"…" if len(text) > 600 else ""}</div>')
        cells.append([f'<span class="nw">{esc(str(r["released_at"])[:19].replace("T", " "))}</span>', who, " ".join(asked), esc(r["notion"]),
                      number(r["epsilon"]), f'<span class="tag {esc(outcome)}">{esc(r.get("shown_outcome"))}</span>'])
    return table(["Time (UTC)", "Who", "What was asked", "Notion", "ε", "Outcome"], cells, (4,))


def overview_page(data: dict[str, Any], csrf: str, flash: tuple[str, str] | None = None, base: str = BASE) -> str:
    analysts = data["analysts"]
    active = sum(1 for a in analysts if not a["revoked"])
    spent = {n: sum(float(s["spent"]) for s in data["units"] if s["notion"] == n) for n in NOTIONS}
    cards = "".join(f'<div class="card"><span class="muted">{label}</span><b>{value}</b></div>' for label, value in (
        ("analysts (active)", f"{active} / {len(analysts)}"),
        *((f"ε spent ({n})", number(spent[n])) for n in NOTIONS if spent[n])))
    who = table(["Analyst", "Status", "Quota and spent (all datasets)", "Requests"],
                [[esc(a["name"]), status_tag(a), quota_text([u for u in a["usage"] if not u.get("dataset")]),
                  requests_text(a["requests"])]
                 for a in analysts])
    body = (f'<div class="cards">{cards}</div><h2>Budgets per unit and notion</h2>{units_table(data["units"])}'
            f'<h2>Analysts</h2>{who}<h2>Latest requests</h2>{history_rows(data["latest"], short=True)}'
            f'<p><a href="{esc(base)}/history">All requests →</a></p>')
    return layout("Overview", "overview", csrf, body, flash, base)


def datasets_page(datasets: Sequence[dict[str, Any]], csrf: str, base: str = BASE) -> str:
    rows = []
    for d in datasets:
        attributes = ", ".join(f'{esc(a)} <span class="muted">({len(d["domains"].get(a, []))})</span>'
                               for a in d["attributes"])
        releasable = '<span class="muted">none declared: no key may be asked (identify only)</span>' \
            if d["releasable_keys"] is None else \
            f'{number(d["releasable_keys"])} <span class="muted">({esc(d.get("releasable_source"))})</span>'
        limits = "".join(f'<div>{esc(s["notion"])} {budget_bar(float(s["spent"]), s["limit"], 140)}'
                         f' {number(s["spent"])} / {number(s["limit"]) if s["limit"] is not None else "∞"}</div>'
                         for s in d["limits"] if s["limit"] is not None or s["spent"])
        rows.append([f'<b>{esc(d["name"])}</b><div class="muted mono">{esc(d["relation"])}</div>',
                     f'<code>{esc(d["key"])}</code>', esc(", ".join(d["metrics"])), attributes or "—", releasable,
                     "<br>".join(f"<code>{esc(u)}</code>" for u in d["units"]),
                     limits or '<span class="muted">no limit, nothing spent</span>',
                     esc(d.get("accounting") or "default")])
    body = table(["Dataset", "Key", "Metrics", "Attributes (domain size)", "Releasable keys", "Units",
                  "Limits (spent / limit ε)", "Accounting"], rows)
    return layout("Datasets", "datasets", csrf, body, base=base)


def analysts_page(analysts: Sequence[dict[str, Any]], datasets: Sequence[str], csrf: str,
                  flash: tuple[str, str] | None = None, base: str = BASE) -> str:
    to = esc(base)
    notions = "".join(f'<option value="{n}">{n}</option>' for n in NOTIONS)
    scopes = '<option value="">all datasets</option>' + "".join(
        f'<option value="{esc(d)}">{esc(d)}</option>' for d in datasets)
    rows = []
    for a in analysts:
        name = esc(a["name"])
        forms = ""
        if not a["revoked"]:
            forms += (f'<form class="inline" method="post" action="{to}/analysts/revoke">{hidden(csrf)}'
                      f'<input type="hidden" name="name" value="{name}"><button class="warn" type="submit">'
                      "Revoke</button></form>")
        forms += (f'<form class="inline" method="post" action="{to}/analysts/rotate">{hidden(csrf)}'
                  f'<input type="hidden" name="name" value="{name}"><button type="submit">'
                  f'{"Reinstate with a new token" if a["revoked"] else "Rotate token"}</button></form>'
                  f'<form class="inline" method="post" action="{to}/analysts/quota">{hidden(csrf)}'
                  f'<input type="hidden" name="name" value="{name}"><input class="small" type="number" step="any"'
                  f' min="0" name="epsilon" placeholder="quota ε" title="empty: remove the quota"><select name="notion">{notions}</select>'
                  f'<select name="dataset">{scopes}</select><button type="submit">Set quota</button></form>')
        allowed = "all" if a["datasets"] is None else ", ".join(map(esc, a["datasets"])) or "none"
        rows.append([f"<b>{name}</b>", status_tag(a), allowed, quota_text(a["usage"]), requests_text(a["requests"]),
                     forms])
    add = (f'<h2>Add an analyst</h2><form class="inline" method="post" action="{to}/analysts/add">{hidden(csrf)}'
           '<input type="text" name="name" placeholder="name" required maxlength="128"><input class="small"'
           f' type="number" step="any" min="0" name="quota" placeholder="quota ε"><select name="notion">'
           f'<option value="">every notion</option>{notions}</select><input type="text" name="datasets"'
           ' placeholder="datasets (empty: all)" title="comma-separated"><button class="main" type="submit">Add</button>'
           '</form><p class="note">The new token is shown once, on the next page.</p>')
    body = table(["Analyst", "Status", "Datasets", "Quota and spent (ε)", "Requests", "Actions"], rows) + add
    return layout("Analysts", "analysts", csrf, body, flash, base)


def token_page(csrf: str, name: str, token: str, verb: str, base: str = BASE) -> str:
    body = (f"<p>{esc(verb)} <b>{esc(name)}</b>. Their token, shown this once (it is stored only as a hash):</p>"
            f'<code class="token">{esc(token)}</code><p class="note">Give it to the analyst over a private'
            ' channel. The page is not cached; reloading it does not show the token again.</p>'
            f'<p><a href="{esc(base)}/analysts">Back to the analysts</a></p>')
    return layout("New token", "analysts", csrf, body, base=base)


def history_page(page: dict[str, Any], choices: dict[str, Sequence[str]], chosen: dict[str, str], csrf: str,
                 base: str = BASE) -> str:
    to = esc(base)
    selects = []
    for field, label in (("analyst", "Analyst"), ("dataset", "Dataset"), ("outcome", "Outcome")):
        options = '<option value="">any</option>' + "".join(
            f'<option value="{esc(v)}"{" selected" if v == chosen.get(field) else ""}>{esc(v)}</option>'
            for v in choices[field])
        selects.append(f'<label>{label}<select name="{field}">{options}</select></label>')
    filters = (f'<form class="filters" method="get" action="{to}/history">{"".join(selects)}'
               f'<button type="submit">Filter</button><a href="{to}/history">clear</a></form>')
    total, offset, limit = page["total"], page["offset"], page["limit"]
    chosen_now = {k: v for k, v in chosen.items() if v}

    def link(to: int, text: str) -> str:
        return f'<a href="{esc(base)}/history?{esc(urlencode({**chosen_now, "offset": to}))}">{text}</a>'

    shown = f"{offset + 1}–{offset + len(page['rows'])} of {total}" if page["rows"] else f"0 of {total}"
    pager = [f"<span>rows {shown}</span>"]
    if offset > 0:
        pager.insert(0, link(0, "« newest") + " " + link(max(0, offset - limit), "‹ newer"))
    if offset + limit < total:
        last = (total - 1) // limit * limit
        pager.append(link(offset + limit, "older ›") + " " + link(last, "oldest »"))
    nav = f'<div class="pager">{" ".join(pager)}</div>'
    return layout("History", "history", csrf, filters + nav + history_rows(page["rows"]) + nav, base=base)


def spending_page(by_unit: dict[str, Any], by_analyst: dict[str, Any], csrf: str, base: str = BASE) -> str:
    body = (step_chart(by_unit["series"], title="ε spent over time, per unit and notion")
            + step_chart(by_analyst["series"], title="ε spent over time, per analyst and notion")
            + '<p class="note">Charged requests only: a refunded request gave its ε back. An analyst\'s request'
              " that read several units is counted once for the analyst and once per unit.</p>")
    return layout("Spending", "spending", csrf, body, base=base)


AUDIT_FIELDS = ("time", "analyst", "endpoint", "dataset", "epsilon", "outcome", "status", "latency_ms")


def audit_page(entries: Sequence[dict[str, Any]], csrf: str, base: str = BASE) -> str:
    extra = sorted({k for e in entries for k in e} - set(AUDIT_FIELDS))
    fields = [f for f in AUDIT_FIELDS if any(f in e for e in entries)] + extra or list(AUDIT_FIELDS)
    rows = [[number(e[f]) if f == "epsilon" and type(e.get(f)) in (int, float) else esc(e.get(f)) for f in fields]
            for e in entries]
    body = ('<p class="note">The latest requests to the service, newest first (one line each; never a token).'
            " The full log is the file given to <code>--audit-log</code>.</p>" + table(list(map(esc, fields)), rows))
    return layout("Audit log", "audit", csrf, body, base=base)
