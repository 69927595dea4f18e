"""The scale benchmark's goals at width: every row of the goals table is printed, measured or not,
and a measured one is judged against its goal with the load beside it."""

from __future__ import annotations

from benchmarks.scale import plan, ScaleConfig
from benchmarks.scale_width import per_check_table, width_targets


def test_the_births_cases_are_planned_alone_and_release_as_the_issue_states():
    cases = plan(ScaleConfig(cases=("births",), wide_repeats=2))
    assert [(c.verifier, c.search) for c in cases] == [("lof", "bfs"), ("histogram", "bfs"), ("grubbs", "bfs"),
                                                       ("lof", "explore")]
    assert all(c.rows == 51 * 7305 and c.epsilon == 0.5 and c.fresh == 2 and c.warm == 0 for c in cases)
    [uniform] = plan(ScaleConfig(cases=("births-uniform",)))
    assert (uniform.verifier, uniform.search, uniform.record) == ("zscore", "uniform", 1)


def test_every_goal_is_printed_and_a_measured_one_judged():
    case = {"name": "births", "verifier": "grubbs", "search": "bfs", "reference_s": [0.02, 0.02],
            "reference_load": [0.5, 0.6], "fresh_s": [0.1, 0.3], "fresh_load": [0.7, 0.8]}
    uniform = {"name": "births-uniform", "verifier": "zscore", "search": "uniform", "fresh_s": [3.0],
               "fresh_load": [1.0], "reference_s": [0.02], "outcomes": ["no valid context"]}
    per_check = {"births": {"rows": [{"verifier": "lof", "values": [51, 20, 12, 7], "cells": 85_680, "move_us": 40.0,
                                      "jump_us": 60.0, "valid": True, "load": 0.5}]},
                 "narrow": {"lof": {"us": 13.0, "load": 0.5}}}
    result = {"cases": [case, uniform], "per_check": per_check}
    goals = {t.name: t for t in width_targets(result)}
    assert len(goals) == 14  # the issue's table: 4 births, 2 one-check, 2 flights, 2 wide5000, uniform, 3 no-regression
    grubbs = goals["births shape, grubbs + bfs"]
    assert grubbs.met and grubbs.measured == "10.0× the sort (load 0.5–0.8)"
    no_valid = next(t for name, t in goals.items() if "no valid context" in name)
    assert no_valid.met is False and "no valid context" in no_valid.measured
    assert next(t for name, t in goals.items() if name.startswith("one lof check")).met
    assert next(t for name, t in goals.items() if "narrow per check lof" in name).met is False
    assert goals["births shape, lof + explore"].met is None  # not measured in this run
    assert per_check_table(result).rows[0][2] == "85,680"
