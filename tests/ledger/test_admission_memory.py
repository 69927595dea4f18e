"""The admissions' memory (`ledger.admission_memory`): a kept state admits without reading, is
raised by every ε this process charged since, and never refuses — a refusal always comes from a
fresh read, so with limits that never fall the memory answers exactly as a fresh check does."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pcor_sql.core.accounting import OcdpCost
from pcor_sql.errors import BudgetExceeded
from pcor_sql.ledger import admission_memory
from pcor_sql.ledger.admission_memory import AdmissionMemory, charged_now
from pcor_sql.ledger.store import ChargeItem, Ledger
from ledger_helpers import charge, ledger_rows, raw


def item(epsilon: float) -> list[ChargeItem]:
    return [ChargeItem("check", OcdpCost(epsilon), "bfs")]


def test_a_kept_state_admits_without_reading(ledger, ledger_reads):
    ledger.set_limit("d", 1.0)
    memory = AdmissionMemory()
    ledger.check_fit("d", item(0.4), memory=memory)
    assert ledger_reads[0] == 1
    for _ in range(5):
        ledger.check_fit("d", item(0.4), memory=memory)
    assert ledger_reads[0] == 1
    ledger.check_fit("e", item(0.4), memory=memory)  # another unit: its own state, read once
    assert ledger_reads[0] == 2


def test_what_this_process_charged_since_raises_the_kept_state(ledger, ledger_reads):
    ledger.set_limit("d", 1.0)
    memory = AdmissionMemory()
    ledger.check_fit("d", item(0.5), memory=memory)
    before = charged_now()
    charge(ledger, "d", 0.3)
    charge(ledger, "d", 0.3)
    assert charged_now() - before == pytest.approx(0.6)
    ledger_reads[0] = 0
    with pytest.raises(BudgetExceeded):  # kept 0 + 0.6 charged since + 0.5 > 1: read afresh, refused
        ledger.check_fit("d", item(0.5), memory=memory)
    assert ledger_reads[0] == 1
    ledger.check_fit("d", item(0.4), memory=memory)  # the fresh state (0.6) was kept: 1.0 fits
    assert ledger_reads[0] == 1


def test_a_refusal_is_never_answered_from_memory(ledger, ledger_reads):
    ledger.set_limit("d", 0.5)
    memory = AdmissionMemory()
    ledger.check_fit("d", item(0.4), memory=memory)
    ledger.set_limit("d", 2.0)  # the owner raises the limit: the kept state still says 0.5
    ledger.check_fit("d", item(1.0), memory=memory)  # kept: refused; fresh: fits — and it is admitted
    assert ledger_reads[0] == 2


def test_a_kept_admission_after_a_lowered_limit_only_delays_the_refusal(con, ledger):
    """What the memory trades: the owner lowers a limit after it was read, the memory still admits,
    and the reservation — which alone decides — refuses; nothing is charged."""
    ledger.set_limit("d", 1.0)
    memory = AdmissionMemory()
    ledger.check_fit("d", item(0.5), memory=memory)
    ledger.set_limit("d", 0.2)
    ledger.check_fit("d", item(0.5), memory=memory)  # admitted from memory
    before = ledger_rows(ledger)
    with pytest.raises(BudgetExceeded):
        charge(ledger, "d", 0.5)
    assert ledger_rows(ledger) == before


def test_a_failed_reservation_adds_nothing_to_what_was_charged(ledger):
    ledger.set_limit("d", 0.1)
    before = charged_now()
    with pytest.raises(BudgetExceeded):
        charge(ledger, "d", 0.5)
    assert charged_now() == before


def test_the_memory_keeps_at_most_its_size(ledger, monkeypatch):
    monkeypatch.setattr(admission_memory, "SIZE", 3)
    memory = AdmissionMemory()
    for unit in "abcd":
        ledger.check_fit(unit, item(0.1), memory=memory)
    assert len(memory._checks) == 1  # full at the fourth: started empty again


def test_the_releasable_set_is_kept_and_read_afresh_for_a_key_outside_it(monkeypatch):
    memory = AdmissionMemory()
    sets = iter([frozenset({"1", "2"}), frozenset({"1", "2", "9"}), None, frozenset({"1"})])
    asked: list[int] = []

    def read():
        asked.append(1)
        return next(sets)

    assert memory.releasable("ana", "d", ["1", "2"], read)
    assert memory.releasable("ana", "d", ["2"], read)  # kept: not read
    assert len(asked) == 1
    assert memory.releasable("ana", "d", ["2", "9"], read)  # 9 is outside the kept set: read, now in it
    assert memory.releasable("ana", "d", ["9"], read) and len(asked) == 2
    memory.forget("ana")
    assert not memory.releasable("ana", "d", ["1"], read)  # none declared now: refused on a fresh read
    assert memory.releasable("bob", "d", ["1"], read)  # per analyst
    assert len(asked) == 4
    monkeypatch.setattr(admission_memory, "KEYS_SIZE", 1)
    big = AdmissionMemory()
    assert big.releasable("ana", "d", ["1"], lambda: frozenset({"1", "2"}))
    assert big._keys == {}  # a set past KEYS_SIZE is not kept


# One step: charge ε to a unit, raise or lower its limit, or check ε against it with and without memory.
STEPS = st.lists(st.tuples(st.sampled_from(["charge", "charge", "raise", "lower", "check", "check"]), st.sampled_from("ab"),
                           st.sampled_from([0.05, 0.1, 0.25, 0.5])), max_size=25)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
@example(steps=[("check", "a", 0.1), ("charge", "a", 0.25), ("charge", "a", 0.25), ("check", "a", 0.05)])
def test_the_memory_never_refuses_what_a_fresh_check_admits(steps):
    """With limits that never fall it answers exactly as a fresh check; once one falls, it may admit
    what a fresh check refuses (the reservation then refuses), never the other way round."""
    import duckdb

    con = duckdb.connect()
    try:
        ledger = Ledger(con, warn=lambda message: None)
        limits = {"a": 0.5, "b": 0.3}
        for unit, limit in limits.items():
            ledger.set_limit(unit, limit)
        memory, lowered = AdmissionMemory(), False
        for step, unit, epsilon in steps:
            if step == "charge":
                try:
                    charge(ledger, unit, epsilon)
                except BudgetExceeded:
                    pass
            elif step in ("raise", "lower"):
                limits[unit] += epsilon if step == "raise" else -min(epsilon, limits[unit] / 2)
                lowered = lowered or step == "lower"
                ledger.set_limit(unit, limits[unit])
            else:
                outcomes = []
                for kept in (memory, None):
                    try:
                        ledger.check_fit(unit, item(epsilon), memory=kept)
                        outcomes.append(True)
                    except BudgetExceeded:
                        outcomes.append(False)
                with_memory, fresh = outcomes
                assert with_memory or not fresh  # a refusal with memory is a fresh one
                if not lowered:
                    assert with_memory == fresh
    finally:
        con.close()


def test_within_kept_only_a_read_raises_not_kept_and_nothing_is_kept():
    """`kept_only()`: the memory answers what it keeps; where it would read (and wherever the
    ledger would run a statement) it raises NotKept — a BaseException, which no `except Exception`
    takes for the request's fault — and keeps nothing."""
    from pcor_sql.ledger.admission_memory import NotKept, kept_only, refuse_reads

    memory = AdmissionMemory()
    reads: list[str] = []
    with kept_only(), pytest.raises(NotKept):
        memory.dataset("ann", "staff", lambda: reads.append("staff") or "row")
    assert reads == [] and not issubclass(NotKept, Exception)
    assert memory.dataset("ann", "staff", lambda: reads.append("staff") or "row") == "row"
    with kept_only():
        assert memory.dataset("ann", "staff", lambda: reads.append("again") or "other") == "row"
        with pytest.raises(NotKept):
            memory.releasable("ann", "staff", ["7"], lambda: frozenset({"7"}))
        with pytest.raises(NotKept):
            memory.check("ann", "quota", lambda: 1.0, lambda state, raised: None)
    assert reads == ["staff"]
    refuse_reads()  # outside: nothing happens


def test_within_kept_only_the_ledger_and_a_reading_nothing_session_run_no_statement():
    import duckdb

    from pcor_sql.ledger.admission_memory import NotKept, kept_only
    from pcor_sql.session import Session

    con = duckdb.connect()
    ledger = Ledger(con, warn=lambda message: None)
    session = Session(con.cursor(), ledger=ledger, warn=lambda message: None)
    twin = session.reading_nothing()
    assert twin.ledger() is ledger and twin.registry is session.registry
    with kept_only():
        with pytest.raises(NotKept):
            raw(ledger, "SELECT 1")
        with pytest.raises(NotKept):
            twin.access.parser
    assert raw(ledger, "SELECT 1") == [(1,)] and session.access.parser is not None
    con.close()
