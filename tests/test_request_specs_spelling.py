"""Every option with a fixed set of values is parsed once, by its spec, under one spelling rule
(DESIGN.md §6 "Notions are kept apart"): any mix of ASCII upper and lower case names its canonical
lower-case choice; nothing else is folded (spaces, Unicode look-alikes such as 'ſ' or the Kelvin
sign). The parse layer is property-tested heavily (the spec, the statement's `WITH (...)`, the HTTP
schema and its pattern, the request); the four interfaces — the CLI through CliRunner, the Python
API, a statement through the statement runner, HTTP on 127.0.0.1 — with a sampled set, checking
that they agree on accept/refuse and on the canonical value, and that an anomaly answer is charged
to the notion of the mechanism that ran."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pcor_sql
import pcor_sql.pipeline
from pcor_sql.core.verifiers.registry import default_registry
from pcor_sql.errors import UserError
from pcor_sql.frontend.option_lists import check_options, parse_option_list
from pcor_sql.request_specs import Job, specs_for, statement_specs
from pcor_sql.request_values import AnomalyRequest, OutlierRequest
from pcor_sql.service.request_schema import BadRequest, Limits, check, explain_schema, identify_schema
from pcor_sql.sqltext.tokens import significant, tokenize
from tests.cli.cli_helpers import invoke
import pcor_sql.service
from tests.client.served_dataset import Served, make_database, register
from tests.service.live_server import live_server

#: Every fixed-value option of a request, found from the specs (a new one is covered unasked).
FIXED = {spec.name: (job, spec) for job in Job for spec in specs_for(job).values() if spec.choices}
VERIFIERS = default_registry().names()
ANOMALY = dict(beta=5, radius=1, epsilon=0.5)


def test_the_fixed_value_options_are_found():
    assert {"privacy", "norm", "search", "utility", "accounting"} <= set(FIXED)
    assert set(VERIFIERS) >= {"grubbs", "lof"}


def _expected(text: str, choices) -> str | None:
    """The rule, written independently of the code: ASCII text whose lower case is a choice."""
    return text.lower() if text.isascii() and text.lower() in map(str, choices) else None


@st.composite
def case_variant(draw, choices):
    word = str(draw(st.sampled_from(choices)))
    flips = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    return "".join(c.upper() if f else c for c, f in zip(word, flips))


LOOK_ALIKES = {"s": "\u017f", "k": "\u212a", "i": "\u0131", "l": "\u217c", "p": "\u0440", "a": "\u0430"}


@st.composite
def near_miss(draw, choices, spaces=True):
    """A case variant changed by one thing the rule does not fold. (`spaces`: False for a verifier,
    whose name is the first word of a spec text such as `lof(k = 5)`, where spaces around words
    are the grammar's, alike in every interface.)"""
    word = draw(case_variant(choices))
    how = draw(st.sampled_from(["space", "newline", "look-alike", "fullwidth", "doubled"][0 if spaces else 2:]))
    if how == "space":
        return draw(st.sampled_from([" " + word, word + " ", word[:1] + " " + word[1:]]))
    if how == "newline":
        return word + "\n"
    if how == "doubled":
        return word + word[-1]
    if how == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in word)
    lowered = word.lower()
    at = [i for i, c in enumerate(lowered) if c in LOOK_ALIKES]
    if not at:
        return word + "\u00e9"
    i = draw(st.sampled_from(at))
    return word[:i] + LOOK_ALIKES[lowered[i]] + word[i + 1:]


def spellings(choices):
    return st.one_of(case_variant(choices), near_miss(choices), st.text(max_size=12))


def _outcome(fn):
    try:
        return fn()
    except UserError:  # BadRequest is a UserError too
        return None


def _statement(name: str, text: str, job: Job):
    quoted = "'" + text.replace("'", "''") + "'"
    raw = parse_option_list(significant(tokenize(f"{name} = {quoted}")), "WITH (...)")
    return check_options(raw, statement_specs(job), "WITH (...)")[name]


def _http(name: str, text: str, job: Job) -> str:
    schema = (explain_schema if job is Job.EXPLAIN else identify_schema)(Limits())["properties"][name]
    check(text, schema, name)
    return text


def _request(name: str, text: str, job: Job):
    if job is Job.IDENTIFY:
        request = AnomalyRequest(relation="t", columns=("v",), **ANOMALY, **{name: text})
        if name == "privacy":  # the request's privacy is the mechanism's, and so is its notion
            assert request.mechanism.privacy == request.privacy
            assert request.mechanism.answer_cost().notion == request.mechanism.notion == request.privacy
        return str(getattr(request, name))
    return str(getattr(OutlierRequest(relation="t", metric="v", selector="id = 1", **{name: text}), name))


@pytest.mark.parametrize("name", sorted(FIXED))
def test_every_layer_parses_a_fixed_value_option_by_the_one_rule(name):
    job, spec = FIXED[name]
    schema = (explain_schema if job is Job.EXPLAIN else identify_schema)(Limits())["properties"][name]

    @given(text=spellings(spec.choices))
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    def one(text):
        expected = _expected(text, spec.choices)
        assert _outcome(lambda: spec.check(text)) == expected
        assert _outcome(lambda: _request(name, text, job)) == expected
        assert _outcome(lambda: _http(name, text, job)) is (None if expected is None else text)
        assert (re.fullmatch(schema["pattern"], text) is not None) == (expected is not None)
        if "\x00" not in text and not any(0xD800 <= ord(c) < 0xE000 for c in text):
            assert _outcome(lambda: _statement(name, text, job)) == expected

    one()


def test_a_refusal_names_the_accepted_values():
    with pytest.raises(UserError) as refused:
        AnomalyRequest(relation="t", columns=("v",), **ANOMALY, privacy="\u017fp")
    assert str(refused.value) == "unknown privacy '\u017fp' — use one of: dp, sp (in any case)"
    with pytest.raises(BadRequest) as bad:
        _http("search", "BFS ", Job.EXPLAIN)
    assert "unknown search 'BFS '" in bad.value.problem and "random-walk" in bad.value.fix


@given(text=st.one_of(case_variant(VERIFIERS), near_miss(VERIFIERS, spaces=False), st.text(max_size=12)))
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
def test_a_verifier_name_follows_the_same_rule(text):
    registry = default_registry()
    expected = _expected(text, VERIFIERS)
    assert (text in registry) == (expected is not None)
    assert _outcome(lambda: registry.make(text).name) == expected


# ---- the four interfaces agree (a sampled set: each example runs a command, a call, a statement
# and an HTTP request) -------------------------------------------------------------------------

#: What each interface is asked, per option: an anomaly answer (run and charged) or a release
#: (stopped by the spy before the reservation: the request is what is compared).
IDENTIFY_SQL = "SELECT pay FROM staff WHERE id = 7"
EXPLAIN_SQL = "SELECT pay FROM staff WHERE id = 7"
STOP = "spy: stopped before the reservation"


class Spy:
    """Wraps `pipeline.run` (every interface's one release path): records each request and the
    notion its job would charge; lets anomaly answers run; runs a release's `pipeline.quote` (all
    that precedes the reservation: units, policy, the verifier's lookup, the cost) and stops there."""

    def __init__(self, run):
        self.run, self.seen = run, []

    def __call__(self, session, job, policy, **kw):
        if isinstance(job.request, OutlierRequest):
            pcor_sql.pipeline.quote(session, job, policy, **{k: kw[k] for k in ("keys", "single") if k in kw})
            self.seen.append((job.request, job.cost().notion))
            raise UserError(STOP, "nothing to fix: the test stops here")
        self.seen.append((job.request, job.cost().notion))
        return self.run(session, job, policy, **kw)


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """The CLI's file, the Python owner (also running statements) and the served dataset."""
    root = tmp_path_factory.mktemp("spelling")
    make_database(root / "cli.duckdb").close()
    con, served_con = make_database(root / "python.duckdb"), make_database(root / "served.duckdb")
    served_owner, tokens = register(served_con)
    # One worker in the server's own process: what is compared is how each interface parses a
    # request, not how the service schedules it (the worker pool's and search processes' tests do
    # that); the default four search processes took ~40 s of this module's ~60 s to start.
    with live_server(pcor_sql.service.app(served_owner, workers=1, processes=False), start_timeout=180) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            owner = pcor_sql.Owner(con, warn=lambda m: None)
            yield root / "cli.duckdb", owner, Served(url, served_owner, tokens), client
    con.close()
    served_con.close()


def _cli(path, name, text):
    if name == "verifier":
        args = ["explain-outlier", EXPLAIN_SQL, "--verifier", text]
    elif FIXED[name][0] is Job.EXPLAIN:
        args = ["explain-outlier", EXPLAIN_SQL, f"--{name}", text]
    else:
        args = ["identify-anomaly", IDENTIFY_SQL, "--beta", "5", "--radius", "1", "--epsilon", "0.01",
                f"--{name}", text, "--format", "json"]
    result = invoke(*args, "--db", str(path))
    return result.exit_code == 0 or STOP in result.stderr, result.stderr


def _python(owner, name, text):
    if name == "verifier" or FIXED[name][0] is Job.EXPLAIN:
        call = lambda: owner.explain_outlier(EXPLAIN_SQL, **{name: text})  # noqa: E731
    else:
        call = lambda: owner.identify_anomaly(  # noqa: E731
            IDENTIFY_SQL, beta=5, radius=1, epsilon=0.01, **{name: text})
    try:
        call()
        return True, ""
    except UserError as exc:
        return STOP in str(exc), str(exc)


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _statement_run(owner, name, text):
    if name == "verifier":  # a verifier is named in USING, as a word, quoted as an identifier if need be
        word = text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) else '"' + text.replace('"', '""') + '"'
        statement = f"EXPLAIN OUTLIER {EXPLAIN_SQL} USING {word}"
    elif FIXED[name][0] is Job.EXPLAIN:
        statement = f"EXPLAIN OUTLIER {EXPLAIN_SQL} WITH ({name} = {_sql_text(text)})"
    else:
        statement = (f"IDENTIFY ANOMALY {IDENTIFY_SQL} "
                     f"WITH (beta = 5, radius = 1, epsilon = 0.01, {name} = {_sql_text(text)})")
    try:
        owner.sql(statement)
        return True, ""
    except UserError as exc:
        return STOP in str(exc), str(exc)


def _over_http(served, client, name, text):
    token = {"Authorization": f"Bearer {served.tokens['alice']}"}
    if name == "verifier" or FIXED[name][0] is Job.EXPLAIN:
        body = {"dataset": "staff", "keys": [7], "epsilon": 0.01, name: text}
        response = client.post("/v1/explain", json=body, headers=token)
    else:
        body = {"dataset": "staff", "value": {"pay": 100.0}, "beta": 5, "radius": 1, "epsilon": 0.01, name: text}
        response = client.post("/v1/identify", json=body, headers=token)
    assert response.status_code in (200, 400), response.text
    error = response.json().get("error", "") if response.status_code == 400 else ""
    return response.status_code == 200 or STOP in error, error


def _canonical(request, name):
    return request.verifier.name if name == "verifier" else str(getattr(request, name))


OPTIONS = sorted(FIXED) + ["verifier"]


def _choices(name):
    return VERIFIERS if name == "verifier" else FIXED[name][1].choices


@st.composite
def interface_case(draw):
    name = draw(st.sampled_from(OPTIONS))
    text = draw(st.one_of(case_variant(_choices(name)), near_miss(_choices(name), spaces=name != "verifier")))
    return name, text


def test_the_four_interfaces_agree_and_charge_the_mechanisms_notion(four, monkeypatch):
    cli_path, owner, served, client = four
    spy = Spy(pcor_sql.pipeline.run)
    monkeypatch.setattr(pcor_sql.pipeline, "run", spy)
    ledgers = {"cli": None, "python": owner, "statement": owner, "http": served.owner}
    tally: set[tuple[str, bool]] = set()

    @given(case=interface_case())
    @example(case=("privacy", "SP"))  # the case: (ε, k)-SP charged as dp
    @example(case=("privacy", "\u017fP"))
    @example(case=("norm", "LInf"))
    @settings(max_examples=12, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def one(case):
        name, text = case
        expected = _expected(text, _choices(name))
        tally.add((FIXED[name][0] if name in FIXED else Job.EXPLAIN, expected is not None))
        for where, ask in (("cli", lambda: _cli(cli_path, name, text)), ("python", lambda: _python(owner, name, text)),
                           ("statement", lambda: _statement_run(owner, name, text)),
                           ("http", lambda: _over_http(served, client, name, text))):
            spy.seen.clear()
            before = _history(ledgers[where], cli_path)
            accepted, error = ask()
            assert accepted == (expected is not None), (where, name, text, error)
            if expected is None:  # refused before the reservation: no request reached the release path
                assert spy.seen == [] and f"{name}" in error.lower(), (where, name, text, error)
                assert _history(ledgers[where], cli_path) == before
                continue
            [(request, notion)] = spy.seen
            assert _canonical(request, name) == expected, (where, name, text)
            if isinstance(request, AnomalyRequest):  # answered and charged: to the mechanism's notion
                assert notion == request.mechanism.notion == str(request.mechanism.privacy)
                after = _history(ledgers[where], cli_path)
                assert len(after) == len(before) + 1 and after[-1] == (notion, request.mechanism.name)

    one()
    # The sample held answers and releases, each both accepted and refused (it cannot pass vacuously).
    assert tally == {(job, ok) for job in Job for ok in (True, False)}, tally


def _history(owner, cli_path) -> list[tuple[str, str]]:
    if owner is not None:
        return [(row.notion, row.mechanism) for row in owner.ledger.history()]
    result = invoke("budget", "history", "--db", str(cli_path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    return [(row["notion"], row["mechanism"]) for row in json.loads(result.stdout)]


def test_a_registered_accounting_is_parsed_by_its_spec(tmp_path):
    con = make_database(tmp_path / "r.duckdb")
    owner = pcor_sql.Owner(con, warn=lambda m: None)
    registered = owner.register("staff", "staff", key="id", metric="pay", by="dept,year", accounting="PAPER")
    assert registered.accounting == "paper" == owner.dataset("staff").accounting
    with pytest.raises(UserError, match="unknown accounting 'pap\u0435r'"):  # a Cyrillic е
        owner.register("other", "staff", key="id", metric="pay", by="dept", accounting="pap\u0435r")
    con.close()


def test_the_schema_lists_the_canonical_words_that_the_analyst_page_offers():
    from pcor_sql.service import analyst_page

    search = explain_schema(Limits())["properties"]["search"]
    assert search["x-choices"] == [str(c) for c in FIXED["search"][1].choices] and "enum" not in search
    assert 'props.search["x-choices"]' in analyst_page.SCRIPT
