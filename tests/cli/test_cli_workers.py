"""`--workers N` on explain-outlier and identify-anomaly (DESIGN.md §10 "Seeded batches"): a batch searched in N
processes prints what one process prints; a bad count is one line and exit 2, before any charge."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_helpers import assert_error, invoke

BATCH = "SELECT salary FROM salaries WHERE id IN (42, 171, 1777, 1)"


def released(result):
    return [(r.get("record"), r.get("context"), r.get("predicate"), r.get("reason")) for r in json.loads(result.stdout)]


def test_a_seeded_batch_prints_the_same_releases_with_one_or_two_workers(db):
    runs = [invoke("explain-outlier", BATCH, "--verifier", "grubbs", "--seed", "3", "--allow-seeded", "--db", str(db),
                   "--format", "json", "--max-records", "4", "--workers", str(n)) for n in (1, 2)]
    for run in runs:
        assert run.exit_code == 3, run.stderr  # record 1 has no valid context: a partial batch
    assert released(runs[0]) == released(runs[1])
    assert [r[0]["id"] for r in released(runs[0])] == [42, 171, 1777, 1]  # the IN list's order (DESIGN.md §6)


@pytest.mark.parametrize("command, extra", [
    ("explain-outlier", ()),
    ("identify-anomaly", ("--beta", "5", "--radius", "1000", "--epsilon", "0.5")),
])
def test_a_bad_worker_count_is_one_line_and_charges_nothing(db, command, extra):
    for bad in ("0", "-3"):
        result = invoke(command, BATCH, *extra, "--db", str(db), "--max-records", "4", "--workers", bad)
        assert_error(result, "--workers must be a whole number from 1 to 1,024", "--workers 2")
    assert invoke("budget", "history", "--db", str(db)).stdout.count("salaries") == 0


def test_a_worker_count_that_is_not_a_number_is_refused_by_the_parser(db):
    result = invoke("explain-outlier", BATCH, "--db", str(db), "--workers", "two")
    assert result.exit_code == 2 and "--workers" in result.stderr and "Traceback" not in result.stderr
