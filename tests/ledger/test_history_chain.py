"""The history chain's rules (DESIGN.md §11), without a database: the encoding, the hashes, and
what checking a chain against its history finds, names and would put back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcor_sql.ledger import history_chain as chain
from pcor_sql.ledger.history_chain import CHANGE, FIELDS, GENESIS, Anchor, Head

T0 = dt.datetime(2026, 12, 1, 12, 0, 0, 123456)


def row(n: int, epsilon: float = 0.1, spent_after: float | None = None, **extra) -> dict:
    out = {f: None for f in FIELDS}
    out.update(release_id=f"r{n}", unit="t", notion="ocdp", seq=n, released_at=T0 + dt.timedelta(seconds=n),
               mechanism="pcor/bfs/tight", epsilon=epsilon,
               spent_after=spent_after if spent_after is not None else n * epsilon,
               seeded=False, role="owner", outcome="running", refunded=False, pid=4242, host="h", process_token="p")
    out.update(extra)
    return out


def answered(r: dict) -> dict:
    return {**r, "outcome": "answered", "finished_at": r["released_at"] + dt.timedelta(milliseconds=5)}


def chained(rows: list[dict]) -> tuple[list[chain.Entry], Head, dict[str, dict]]:
    """The chain a ledger writes for `rows`: each charged, then answered; and the rows now."""
    events = []
    for r in rows:
        events += [chain.row_event("charge", r), chain.row_event(CHANGE, answered(r))]
    entries, head = chain.extend(None, "t", "ocdp", events)
    return entries, head, {r["release_id"]: answered(r) for r in rows}


def test_values_are_encoded_exactly_and_tagged_by_type():
    encoded = chain.encode(0.1)  # exact: the float read back from its text is the same float
    assert list(encoded) == ["float"] and isinstance(encoded["float"], str) and chain.decode(encoded) == 0.1
    assert chain.encode(-0.0) != chain.encode(0.0)
    assert len({json.dumps(chain.encode(v)) for v in (1, 1.0, True, "1", None)}) == 5
    assert chain.encode(T0) == {"timestamp": "2026-12-01T12:00:00.123456"}
    assert chain.encode(dt.datetime(2026, 1, 1)) == {"timestamp": "2026-01-01T00:00:00.000000"}
    for value in (0.1, 1e-300, 5e-324, T0, 7, "x", None, False):
        assert chain.decode(chain.encode(value)) == value
    with pytest.raises(TypeError):
        chain.encode([1])


def test_an_entry_is_the_sha256_of_its_canonical_content_and_its_link():
    r = row(1, 0.5)
    [entry], head = chain.extend(None, "t", "ocdp", [chain.row_event("charge", r)])
    body = {f: chain.encode(r[f]) for f in FIELDS}
    content = json.dumps({"v": 1, "kind": "charge", "unit": "t", "notion": "ocdp", "link": 1, "release_id": "r1",
                          "body": body}, sort_keys=True, separators=(",", ":"))
    assert entry.content == content and chain.decode(json.loads(content)["body"]["epsilon"]) == 0.5
    assert entry.content_hash == hashlib.sha256(content.encode()).hexdigest()
    assert entry.prev_hash == GENESIS == "0" * 64
    assert entry.entry_hash == hashlib.sha256(
        f"pcor-sql history chain v1\n{GENESIS}\n{entry.content_hash}".encode()).hexdigest()
    assert head == Head(1, entry.entry_hash)
    [second], head2 = chain.extend(head, "t", "ocdp", [chain.row_event(CHANGE, answered(r))])
    assert (second.link, second.prev_hash, head2) == (2, entry.entry_hash, Head(2, second.entry_hash))
    assert set(json.loads(second.content)["body"]) == set(chain.MUTABLE)


def test_a_chain_of_the_history_as_written_holds():
    entries, head, now = chained([row(1), row(2), row(3)])
    check = chain.check_chain("t", "ocdp", entries, head, now)
    assert (check.differences, check.restore, check.sound) == ([], {}, True)


def test_halving_every_epsilon_with_consistent_spent_after_is_named_and_put_back():
    rows = [row(1, 0.1), row(2, 0.2, 0.3), row(3, 0.25, 0.55)]
    entries, head, now = chained(rows)
    rewritten = {rid: {**r, "epsilon": r["epsilon"] / 2, "spent_after": r["spent_after"] / 2} for rid, r in now.items()}
    check = chain.check_chain("t", "ocdp", entries, head, rewritten)
    assert [(d.entry, d.problem) for d in check.differences] == [
        (f"release r{n} (seq {n})", "epsilon, spent_after differ from the chain") for n in (1, 2, 3)]
    assert check.sound and check.restore == now  # the chain is intact: every row as it was charged


def test_deleted_added_and_moved_rows_are_named():
    entries, head, now = chained([row(1), row(2)])
    del now["r1"]
    now["r9"] = answered(row(9))
    check = chain.check_chain("t", "ocdp", entries, head, now)
    assert [(d.entry, d.problem.split(" (")[0]) for d in check.differences] == [
        ("release r1 (seq 1)", "is missing from the history"), ("release r9 (seq 9)", "is not in the chain")]
    assert set(check.restore) == {"r1"} and not check.sound  # an unknown row: the chain is made again


def _edit_content(entries: list) -> None:
    entries[2] = dataclasses.replace(entries[2], content=entries[2].content.replace("0x1.999", "0x1.111"))


@pytest.mark.parametrize("tamper, named", [
    (_edit_content,
     ["chain entry 3 (release r2)", "chain entry 4 (release r2)", "release r2 (seq 2)"]),
    (lambda es: es.pop(2), ["chain entry 4 (release r2)", "chain entry 5 (release r3)", "chain entry 6 (release r3)",
                            "chain end", "release r2 (seq 2)", "release r3 (seq 3)"]),
    (lambda es: es.pop(), ["chain end", "release r3 (seq 3)"]),  # its outcome's entry is gone
])
def test_an_altered_chain_is_named_where_it_breaks(tamper, named):
    entries, head, now = chained([row(1), row(2), row(3)])
    tamper(entries)
    check = chain.check_chain("t", "ocdp", entries, head, now)
    assert [d.entry for d in check.differences] == named and not check.sound
    assert "r1" not in check.restore  # a row whose entries hold is left alone


def test_a_recomputed_chain_is_found_only_against_an_anchor():
    entries, head, now = chained([row(1), row(2)])
    kept = Anchor("t", "ocdp", head.link, head.hash)  # the owner keeps this outside the ledger
    forged, forged_head, forged_now = chained([row(1, 0.05), row(2, 0.05)])  # an attacker recomputes everything
    assert chain.check_chain("t", "ocdp", forged, forged_head, forged_now).differences == []
    check = chain.check_chain("t", "ocdp", forged, forged_head, forged_now, [kept])
    assert [d.entry for d in check.differences] == ["chain entry 4"] and not check.sound
    more, _ = chain.extend(head, "t", "ocdp", [chain.row_event("charge", row(3))])
    assert chain.check_chain("t", "ocdp", entries + more, Head(5, more[-1].entry_hash),
                             {**now, "r3": row(3)}, [kept]).differences == []  # appending keeps the anchor


def test_changed_events_chain_only_what_changed():
    r1, r2 = row(1), row(2)
    held = {"r1": chain.encoded_row(r1), "r2": chain.encoded_row(r2)}
    events = chain.changed_events([answered(r1), r2, row(3)], held)
    assert [(e.kind, e.release_id) for e in events] == [(CHANGE, "r1"), ("charge", "r3")]


def test_anchor_files_round_trip_and_a_bad_line_is_named():
    heads = {("t", "ocdp"): Head(3, "a" * 64), ("u", "dp"): Head(1, "b" * 64)}
    lines = [json.dumps(x) for x in chain.head_lines(heads)]
    assert chain.parse_anchors(["", *lines]) == [Anchor("t", "ocdp", 3, "a" * 64), Anchor("u", "dp", 1, "b" * 64)]
    for bad in ("{}", "[1]", '{"unit": "t", "notion": "ocdp", "link": true, "hash": "' + "a" * 64 + '"}', "x"):
        with pytest.raises(ValueError, match="line 2 is not a chain head"):
            chain.parse_anchors([lines[0], bad])
    assert chain.heads_digest(heads) != chain.heads_digest({**heads, ("t", "ocdp"): Head(4, "a" * 64)})


_VALUES = {
    "text": st.text(max_size=8), "int": st.integers(-2**62, 2**62), "float": st.floats(allow_nan=False),
    "bool": st.booleans(), "time": st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1)),
}
_KIND = {"release_id": "text", "unit": "text", "notion": "text", "seq": "int", "released_at": "time",
         "mechanism": "text", "epsilon": "float", "k": "int", "record_key": "text", "statement": "text",
         "spent_after": "float", "seeded": "bool", "role": "text", "dataset": "text", "analyst": "text",
         "outcome": "text", "reason": "text", "refunded": "bool", "finished_at": "time", "pid": "int", "host": "text",
         "process_token": "text"}


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2), st.sampled_from(FIELDS), st.data())
def test_any_single_field_change_of_any_row_is_found(which, name, data):
    assert set(_KIND) == set(FIELDS)
    entries, head, now = chained([row(1), row(2), row(3)])
    rid = f"r{which + 1}"
    value = data.draw(st.one_of(st.none(), _VALUES[_KIND[name]]).filter(
        lambda v: chain.encode(v) != chain.encode(now[rid][name])))
    changed = {**now[rid], name: value}
    rows = {k: v for k, v in now.items() if k != rid}
    if name in ("unit", "notion"):
        pass  # the row moved to another chain: this one misses it
    elif name == "release_id":
        rows[value] = changed  # type: ignore[index]
    else:
        rows[rid] = changed
    check = chain.check_chain("t", "ocdp", entries, head, rows)
    assert any(d.entry.startswith(f"release {rid} ") for d in check.differences), check.differences
    assert check.restore[rid] == now[rid]  # and a repair puts it back as charged
