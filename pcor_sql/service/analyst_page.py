"""The analyst page (DESIGN.md §9): `GET /` on the analysts' listener, one HTML page whose inline
script speaks the same JSON API as any client (`http_app`): the analyst pastes their token, sees
the datasets they may use, their remaining quota and their own history, previews what a request
would cost and asks it (explain or identify).

The token lives in one JavaScript variable only: never in a URL, a cookie, the page's storage or
a form the browser could submit (there is no <form>: the fields are read by the script, so a page
whose script did not run submits nothing). It goes out only as `Authorization: Bearer` to this
page's own origin. Everything the API answers is written with `textContent`, never as markup.

The page loads nothing else. Its Content-Security-Policy allows exactly its own script and style
(by hash), requests to its own origin, and nothing from any other.
"""

from __future__ import annotations

import base64
import hashlib

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES
from pcor_sql.request_specs import SEARCH, VERIFIER

CSS = """
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1d232a;background:#f5f6f8}header{background:#174d3a;color:#fff;padding:10px 24px;display:flex;gap:16px;
align-items:center}header b{font-size:16px}header .who{margin-left:auto}main{padding:16px 24px;max-width:1300px}
section{background:#fff;padding:12px 16px;margin:0 0 14px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;
border-bottom:1px solid #e4e7eb;vertical-align:top}th{background:#eef1f5;font-size:13px}td.n{text-align:right}
input,select,button{font:inherit;padding:4px 6px;border:1px solid #9aa5b1;border-radius:4px;background:#fff}
button{cursor:pointer}button.main{background:#174d3a;color:#fff;border-color:#174d3a}
.row{display:flex;gap:10px;flex-wrap:wrap;align-items:end;margin:6px 0}.row label{display:flex;flex-direction:column;
font-size:12px;color:#3e4651}.cols{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.error{background:#fdecea;border:1px solid #f5b7b1;padding:8px 12px;border-radius:4px;margin:8px 0}
.error b{display:block}.ok{background:#e8f5e9;border:1px solid #a5d6a7;padding:8px 12px;border-radius:4px;margin:8px 0}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
.muted{color:#68717d}.result{border-left:3px solid #174d3a;padding:4px 10px;margin:8px 0}
#token{width:420px}
"""

SCRIPT = r"""
"use strict";
let token = null;
const $ = (id) => document.getElementById(id);
let schema = {};

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function fmt(x) {
  if (x === null || x === undefined) return "\u2014";
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(4)));
  return typeof x === "object" ? JSON.stringify(x) : String(x);
}
function fillTable(id, headers, rows) {
  const t = $(id); t.replaceChildren();
  const head = el("tr"); headers.forEach((h) => head.append(el("th", h))); t.append(head);
  if (!rows.length) { const r = el("tr"); const c = el("td", "none", "muted"); c.colSpan = headers.length; r.append(c); t.append(r); }
  rows.forEach((cells) => { const r = el("tr"); cells.forEach((c) => r.append(el("td", fmt(c)))); t.append(r); });
}
function showError(where, body, status) {
  const box = $(where); box.replaceChildren();
  const e = el("div", null, "error");
  e.append(el("b", (status ? status + ": " : "") + (body && body.error ? body.error : "the request failed")));
  if (body && body.fix) e.append(el("span", body.fix));
  box.append(e);
}
async function api(method, path, body) {
  const init = {method, cache: "no-store", credentials: "omit", redirect: "error",
                headers: {"Authorization": "Bearer " + token}};
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  let response;
  try { response = await fetch(path, init); } catch (err) { return {ok: false, status: 0, body: {error: "the service did not answer", fix: "is it running?"}}; }
  let data = null;
  try { data = await response.json(); } catch (err) { data = {error: "not a JSON answer", fix: ""}; }
  return {ok: response.ok, status: response.status, body: data};
}
async function refresh() {
  const [me, sets, hist] = await Promise.all([api("GET", "/v1/me"), api("GET", "/v1/datasets"), api("GET", "/v1/history?limit=50")]);
  if (!me.ok) { showError("status", me.body, me.status); if (me.status === 401) forget(false); return; }
  $("status").replaceChildren();
  $("who").textContent = "signed in as " + me.body.analyst;
  $("app").hidden = false; $("signin").hidden = true;
  fillTable("quota", ["Notion", "On", "Quota \u03b5", "Spent \u03b5", "Remaining \u03b5", "Requests"],
    me.body.usage.map((u) => [u.notion, u.dataset || "all datasets", u.limit === null ? "no quota" : u.limit, u.spent,
                              u.remaining === null ? "\u2014" : u.remaining, u.releases]));
  $("limits").textContent = "Smallest \u03b5 per request: " + fmt(me.body.min_epsilon) + " \u00b7 at most " +
    fmt(me.body.max_keys) + " keys per request";
  if (sets.ok) {
    fillTable("datasets", ["Dataset", "Key", "Metrics", "Attributes", "Releasable keys"],
      sets.body.datasets.map((d) => [d.name, d.key, d.metrics.join(", "), d.attributes.join(", "),
                                     d.releasable_keys === null ? "none (identify only)" : d.releasable_keys]));
    window.datasets = sets.body.datasets;
    for (const id of ["x-dataset", "i-dataset", "r-dataset"]) {
      const s = $(id), keep = s.value; s.replaceChildren();
      sets.body.datasets.forEach((d) => s.append(new Option(d.name, d.name)));
      if (keep) s.value = keep;
    }
    metricsChanged();
  }
  if (hist.ok) {
    fillTable("history", ["Asked (UTC)", "Dataset", "What", "Mechanism", "Notion", "\u03b5", "Outcome"],
      hist.body.history.slice().reverse().map((h) => [h.requested_at, h.dataset, h.key, h.mechanism, h.notion, h.epsilon, h.outcome]));
  }
}
function metricsChanged() {
  const find = (id) => (window.datasets || []).find((x) => x.name === $(id).value);
  const box = $("i-value"), point = find("i-dataset");
  if (box.dataset.shown !== (point ? point.name : "")) {  // keep what was typed unless the dataset changed
    box.replaceChildren(); box.dataset.shown = point ? point.name : "";
    (point ? point.metrics : []).forEach((m) => {
      // The value asked about is a point of the metric space, in the data or not (DESIGN.md §6).
      const label = el("label", "value of " + m + " to test"); const input = el("input"); input.type = "number"; input.step = "any";
      input.title = "a point of " + m + "'s space: the answer says whether a record there would be an anomaly, whether or not one is in the data";
      input.dataset.metric = m; input.required = true; label.append(input); box.append(label);
    });
  }
  const xm = $("x-metric"), keep = xm.value, keyed = find("x-dataset");
  xm.replaceChildren(new Option("default", ""));
  (keyed ? keyed.metrics : []).forEach((m) => xm.append(new Option(m, m)));
  xm.value = keep;
}
async function releasable(offset) {
  const name = $("r-dataset").value, box = $("r-out");
  const r = await api("GET", "/v1/releasable-keys?dataset=" + encodeURIComponent(name) + "&limit=100&offset=" + offset);
  if (!r.ok) { showError("r-out", r.body, r.status); return; }
  box.replaceChildren();
  if (r.body.total === null) { box.append(el("div", "The data owner declared no releasable keys for " + name + ": ask identify questions about a value instead.", "muted")); return; }
  const shown = r.body.keys.length;
  box.append(el("div", r.body.total + " releasable keys of " + name + (shown ? "; " + (offset + 1) + "–" + (offset + shown) + " shown" : "; none from there"), "muted"));
  box.append(el("div", r.body.keys.map((k) => fmt(k)).join(", "), "mono"));
  const row = el("div", null, "row");
  if (offset > 0) { const b = el("button", "Previous 100"); b.type = "button"; b.id = "r-prev"; b.addEventListener("click", () => releasable(Math.max(0, offset - 100))); row.append(b); }
  if (offset + shown < r.body.total) { const b = el("button", "Next 100"); b.type = "button"; b.id = "r-next"; b.addEventListener("click", () => releasable(offset + shown)); row.append(b); }
  box.append(row);
}
function parseKeys(text) {
  text = text.trim();
  if (text.startsWith("[")) return JSON.parse(text);
  return text.split(",").map((k) => k.trim()).filter((k) => k).map((k) => /^-?\d{1,15}$/.test(k) ? Number(k) : k);
}
function number(id) { const v = $(id).value.trim(); return v === "" ? undefined : Number(v); }
function explainBody() {
  const body = {dataset: $("x-dataset").value, keys: parseKeys($("x-keys").value), epsilon: number("x-epsilon")};
  for (const f of ["verifier", "search", "metric"]) { const v = $("x-" + f).value.trim(); if (v) body[f] = v; }
  return body;
}
function identifyBody() {
  const value = {};
  document.querySelectorAll("#i-value input").forEach((i) => { if (i.value.trim() !== "") value[i.dataset.metric] = Number(i.value); });
  const body = {dataset: $("i-dataset").value, value, beta: number("i-beta"), radius: number("i-radius"),
                epsilon: number("i-epsilon"), privacy: $("i-privacy").value};
  const k = number("i-k"); if (k !== undefined) body.k = k;
  return body;
}
async function cost(kind) {
  const out = kind === "x" ? "x-out" : "i-out";
  let body; try { body = kind === "x" ? explainBody() : identifyBody(); } catch (err) { showError(out, {error: "the keys are not a list", fix: "e.g. 10, 41 or [\"a\", \"b\"]"}); return; }
  const r = await api("POST", "/v1/cost", body);
  if (!r.ok) { showError(out, r.body, r.status); return; }
  const box = $(out); box.replaceChildren();
  box.append(el("div", "This request would charge " + fmt(r.body.total) + " \u03b5 (" + r.body.notion + ": " + r.body.count +
    " \u00d7 " + fmt(r.body.epsilon) + (r.body.k ? ", k = " + r.body.k : "") + "). Nothing was charged.", "ok"));
}
async function ask(kind) {
  const out = kind === "x" ? "x-out" : "i-out";
  let body; try { body = kind === "x" ? explainBody() : identifyBody(); } catch (err) { showError(out, {error: "the keys are not a list", fix: "e.g. 10, 41"}); return; }
  const box = $(out); box.replaceChildren(el("div", "asking\u2026", "muted"));
  const r = await api("POST", kind === "x" ? "/v1/explain" : "/v1/identify", body);
  if (!r.ok) { showError(out, r.body, r.status); refresh(); return; }
  box.replaceChildren();
  r.body.results.forEach((res) => {
    const card = el("div", null, "result");
    card.append(el("b", res.summary), el("div", res.privacy_summary, "muted"));
    if (res.predicate) card.append(el("div", "context: " + res.predicate, "mono"));
    if (res.explanation_sql) card.append(el("div", res.explanation_sql, "mono muted"));
    if (res.anomaly !== undefined) card.append(el("div", "anomaly: " + (res.anomaly ? "yes" : "no")));
    box.append(card);
  });
  refresh();
}
function forget(clearStatus) {
  token = null; $("app").hidden = true; $("signin").hidden = false; $("who").textContent = "";
  ["quota", "datasets", "history", "x-out", "i-out", "r-out"].forEach((id) => $(id).replaceChildren());
  if (clearStatus) $("status").replaceChildren();
}
function signIn() {
  const t = $("token").value.trim(); $("token").value = "";
  if (!t) { showError("status", {error: "paste your token first", fix: "the data owner gave it to you"}); return; }
  token = t; refresh();
}
async function loadSchema() {
  try {
    const doc = await (await fetch("/openapi.json", {credentials: "omit"})).json();
    const props = doc.components.schemas.ExplainRequest.properties;
    props.search["x-choices"].forEach((s) => $("x-search").append(new Option(s, s)));
  } catch (err) { /* the fields still take free text defaults */ }
}
document.addEventListener("DOMContentLoaded", () => {
  $("go").addEventListener("click", signIn);
  $("token").addEventListener("keydown", (e) => { if (e.key === "Enter") signIn(); });
  $("forget").addEventListener("click", () => forget(true));
  $("reload").addEventListener("click", refresh);
  $("x-dataset").addEventListener("change", metricsChanged);
  $("i-dataset").addEventListener("change", metricsChanged);
  $("x-cost").addEventListener("click", () => cost("x"));
  $("x-ask").addEventListener("click", () => ask("x"));
  $("i-cost").addEventListener("click", () => cost("i"));
  $("i-ask").addEventListener("click", () => ask("i"));
  $("r-show").addEventListener("click", () => releasable(0));
  loadSchema();
});
"""

BODY = """
<header><b>pcor-sql · analyst</b><span class="muted">private explanations and anomaly answers</span>
<span class="who" id="who"></span></header><main>
<section id="signin"><h2>Your token</h2><div class="row"><input id="token" type="password" autocomplete="off"
spellcheck="false" placeholder="paste the token the data owner gave you" aria-label="token">
<button class="main" id="go" type="button">Use this token</button></div>
<p class="muted">The token stays in this page's memory: it is sent only in the Authorization header to this service,
never stored. Reloading the page forgets it.</p></section>
<div id="status"></div>
<div id="app" hidden>
<section><h2>Your quota</h2><table id="quota"></table><p class="muted" id="limits"></p>
<button id="reload" type="button">Refresh</button> <button id="forget" type="button">Forget the token</button></section>
<section><h2>Datasets you may use</h2><table id="datasets"></table>
<h2>Keys you may ask about</h2><p class="muted">The releasable keys are public: the data owner declared them when
registering the dataset.</p><div class="row"><label>Dataset<select id="r-dataset"></select></label>
<button id="r-show" type="button">Show the releasable keys</button></div><div id="r-out"></div></section>
<div class="cols">
<section><h2>Explain outliers</h2>
<div class="row"><label>Dataset<select id="x-dataset"></select></label><label>Keys (comma-separated)
<input id="x-keys" placeholder="e.g. 10, 41"></label><label>ε each<input id="x-epsilon" type="number" step="any"
value="0.2" min="0"></label></div>
<div class="row"><label>Metric<select id="x-metric"><option value="">default</option></select></label>
<label>Verifier<input id="x-verifier" list="verifiers" placeholder="default (@VERIFIER@)"></label>
<label>Search<select id="x-search"><option value="">default (@SEARCH@)</option></select></label></div>
<datalist id="verifiers">@VERIFIERS@</datalist><div class="row"><button id="x-cost" type="button">Preview cost</button>
<button class="main" id="x-ask" type="button">Explain</button></div><div id="x-out"></div></section>
<section><h2>Identify an anomaly</h2>
<div class="row"><label>Dataset<select id="i-dataset"></select></label><span id="i-value" class="row"></span></div>
<div class="row"><label>β<input id="i-beta" type="number" step="any" value="2"></label><label>radius
<input id="i-radius" type="number" step="any" value="1"></label><label>ε<input id="i-epsilon" type="number"
step="any" value="0.1"></label><label>Privacy<select id="i-privacy"><option value="sp">sp</option>
<option value="dp">dp</option></select></label><label>k<input id="i-k" type="number" min="1" placeholder="1">
</label></div><div class="row"><button id="i-cost" type="button">Preview cost</button>
<button class="main" id="i-ask" type="button">Identify</button></div><div id="i-out"></div></section>
</div>
<section><h2>Your history (latest 50)</h2><table id="history"></table></section>
</div></main>
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The verifiers to suggest and the defaults, from their declarations (the built-ins' tuple, the
# option specs), never typed here; the search menu is filled from the schema's choices.
BODY = (BODY.replace("@VERIFIERS@", "".join(f'<option value="{name}">' for name in BUILTIN_NAMES))
        .replace("@VERIFIER@", str(VERIFIER.default)).replace("@SEARCH@", str(SEARCH.default)))
PAGE = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport"'
        f' content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer">'
        f"<title>pcor-sql · analyst</title><style>{CSS}</style><script>{SCRIPT}</script></head>"
        f"<body>{BODY}</body></html>")
CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(CSS)}; connect-src 'self';"
       " img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Cache-Control": "no-store", "Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


async def _page(request: Request) -> Response:
    return HTMLResponse(PAGE, headers=HEADERS)


def analyst_page_route() -> Route:
    """`GET /`: the analyst page (see the module docstring), for the analysts' app."""
    return Route("/", _page, methods=["GET"])
