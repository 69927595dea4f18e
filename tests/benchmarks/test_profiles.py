"""The reproduction profiles: the paper's start (up from V's cell), the cells each profile runs,
and merging the shards of a run."""

from __future__ import annotations

from collections import Counter

from benchmarks.experiments import GROUPS, Cell, cell_of
from benchmarks.profiles import profile, request_default, start_down, start_up
from benchmarks.reproduce import merge_results
from pcor_sql.core.space import Attribute, ContextSpace

SPACE = ContextSpace([Attribute("a", ("a0", "a1", "a2")), Attribute("b", ("b0", "b1", "b2", "b3"))], [0, 1])


class SetOracle:
    def __init__(self, valid):
        self.space = SPACE
        self.valid = set(valid)
        self.asked = Counter()

    def is_valid(self, mask):
        self.asked[mask] += 1
        return mask in self.valid


def test_start_up_is_vs_cell_when_valid_else_the_first_valid_context_above_it():
    full = SPACE.full
    assert start_up(SetOracle({SPACE.v_mask, full})) == (SPACE.v_mask, 1)
    one_up = SPACE.v_mask | (1 << SPACE.free_bits[3])
    two_up = one_up | (1 << SPACE.free_bits[0])
    oracle = SetOracle({two_up, one_up, full})
    mask, checks = start_up(oracle)
    # V's cell, then its one-value supersets in bit order: free bit 3 is the fourth of them
    assert mask == one_up and checks == 1 + 4
    assert all(n == 1 for n in oracle.asked.values())  # each context checked once
    assert start_up(SetOracle(set())) == (None, SPACE.n_admissible)
    assert start_up(SetOracle({full}), max_checks=3) == (None, 3)


def test_start_down_is_a_fixed_random_descent_per_record():
    valid = {SPACE.v_mask, SPACE.full & ~(1 << SPACE.free_bits[1]), SPACE.full & ~(1 << SPACE.free_bits[4])}
    firsts = {start_down(SetOracle(valid), record) for record in range(40)}
    assert firsts <= valid and len(firsts) > 1  # the coins differ between records
    assert all(start_down(SetOracle(valid), 7) == start_down(SetOracle(valid), 7) for _ in range(3))
    assert start_down(SetOracle(set()), 7) is None


def _group(key):
    return next(g for g in GROUPS if g.key == key)


def _row(group, search):
    return next(r for r in group.rows if r.changes.get("search") == search)


def test_paper_profile_runs_algorithm_5_with_paper_accounting_from_vs_cell():
    paper = profile("paper")
    sampling = _group("sampling")
    cells = [cell_of(sampling, row, "salaries", paper) for row in sampling.rows]
    assert [c.search for c in cells if c] == ["uniform", "random-walk", "dfs", "bfs"]
    assert cells[-1] is None  # explore is not the paper's: the paper profile does not run it
    cells = cells[:-1]
    for c in cells:
        assert (c.accounting, c.start, c.table, c.samples, c.epsilon) == ("paper", "cell", "full", 50, 0.2)
        assert c.descents == 0
    overlap = _group("overlap")
    assert {cell_of(overlap, r, "salaries", paper).start for r in overlap.rows if "paper" in r.profiles} == {"descent"}
    verifiers = _group("verifiers")
    for row in verifiers.rows:
        c = cell_of(verifiers, row, "salaries", paper)
        want = paper.lof if row.changes["verifier"] == "lof" else row.changes["verifier"]  # the profile's LOF rule
        assert (c.search, c.table, c.verifier) == ("bfs", "reduced", want)


def test_a_rows_lof_runs_with_the_profiles_rule_for_duplicates():
    sampling, duplicates = _group("sampling"), _group("duplicates")
    for prof in (profile("paper"), profile("engine")):
        assert cell_of(sampling, _row(sampling, "bfs"), "salaries", prof).verifier == prof.lof
        # The duplicates group names its rules itself, under both profiles.
        assert [cell_of(duplicates, r, "salaries", prof).verifier for r in duplicates.rows] == [
            "lof(duplicates='distinct')", "lof(duplicates='plain')"]
    assert profile("engine").lof == "lof"  # the engine's default: the distinct rule


def test_engine_profile_takes_the_engines_defaults():
    engine = profile("engine")
    sampling, samples = _group("sampling"), _group("samples")
    bfs = cell_of(sampling, _row(sampling, "bfs"), "homicides", engine)
    assert bfs.accounting == request_default("accounting") and bfs.start == "engine"
    assert bfs.descents == request_default("descents")
    uniform = cell_of(sampling, sampling.rows[0], "homicides", engine)
    assert uniform.search == "uniform" and uniform.descents == 0
    eps = cell_of(_group("epsilon"), _group("epsilon").rows[0], "homicides", engine)
    assert eps.search == request_default("search") and eps.epsilon == 0.05
    # Tables 10–11 vary BFS's n: BFS whatever the default search
    assert {cell_of(samples, r, "homicides", engine).search for r in samples.rows} == {"bfs"}
    explore = cell_of(sampling, _row(sampling, "explore"), "homicides", engine)
    assert (explore.samples, explore.descents) == (10_000, 0)


def test_the_deviations_change_one_setting_of_the_paper_profile_at_a_time():
    paper, dev = profile("paper"), _group("deviations")
    base = cell_of(_group("sampling"), _row(_group("sampling"), "bfs"), "salaries", paper)
    cells = [cell_of(dev, r, "salaries", paper) for r in dev.rows]
    assert cells[0] == base
    for c in cells[1:4]:
        assert sum(getattr(c, f) != getattr(base, f) for f in ("start", "descents", "accounting")) == 1
    assert all(cell_of(dev, r, "salaries", profile("engine")) is None for r in dev.rows)


def _result(prof, cells, groups, match=()):
    return {"config": {"profiles": [prof], "groups": groups, "datasets": ["salaries"]},
            "profiles": {prof: {"salaries": {"cells": cells}}}, "datasets": {"salaries": {"full": {"records": [1]}}},
            "match": list(match), "wall_s": 2.0, "complete": True, "started": "2026-01-01T00:00:00+00:00",
            "machine": {"code": "abc1234"}}


def test_merge_results_joins_shards_and_recomputes_targets():
    a = {"cell": Cell("salaries", search="uniform").key, "releases": 1}
    bfs = cell_of(_group("sampling"), _row(_group("sampling"), "bfs"), "salaries", profile("paper"))
    b = {"cell": bfs.key, "releases": 1, "utility_mean": 0.93, "ratios": [0.93], "records": [1]}
    merged = merge_results([_result("paper", [a], ["sampling"]), _result("paper", [b, a], ["epsilon"], [{"m": 1}])])
    assert [c["cell"] for c in merged["profiles"]["paper"]["salaries"]["cells"]] == [a["cell"], b["cell"]]
    assert merged["config"]["groups"] == ["sampling", "epsilon"] and merged["match"] == [{"m": 1}]
    assert merged["wall_s"] == 4.0
    assert [src["command"] for src in merged["sources"]] == [
        "python -m benchmarks reproduce --profile paper --datasets salaries --groups sampling",
        "python -m benchmarks reproduce --profile paper --datasets salaries --groups epsilon"]
    paper_target = merged["targets"][0]
    assert "paper profile" in paper_target["name"] and paper_target["met"] is True and paper_target["value"] == 0.93


def test_verifier_texts_become_verifier_specs():
    from benchmarks.profiles import verifier_of
    from pcor_sql.request_values import VerifierSpec

    assert verifier_of("grubbs") == VerifierSpec("grubbs")
    assert verifier_of("lof(duplicates='plain')") == VerifierSpec("lof", (("duplicates", "plain"),))
    assert verifier_of(profile("paper").lof).name == "lof"


def test_start_up_and_start_down_stay_on_runs_of_bins():
    """On an ordinal attribute a context is one run of bins holding V's: start_up grows the run
    at its ends and start_down shrinks it there, so neither asks about, nor returns, a run with
    a gap. Only the runs [1, 4] (four bins) and V's bin 2 alone are valid; a gapped context
    is "valid" too, to be found if a sweep stepped on it."""
    space = ContextSpace([Attribute.binned("age", [0, 10, 20, 30, 40, 50, 60]), Attribute("c", ("x", "y"))], [2, 0])
    o = space.offsets[1]
    run_1_4 = 0b011110 | (0b11 << o)
    gapped = 0b100110 | (1 << o)  # bins 1, 2 and 5
    single = space.v_mask

    class RunOracle(SetOracle):
        def __init__(self, valid):
            super().__init__(valid)
            self.space = space

    up = RunOracle({run_1_4, gapped})
    mask, _ = start_up(up)
    assert mask == run_1_4 and all(space.is_admissible(m) for m in up.asked)
    for record in range(30):
        down = RunOracle({single, gapped})
        assert start_down(down, record) == single
        assert all(space.is_admissible(m) for m in down.asked)
