"""Progress and order as an owner's Python code meets them (the API's `progress=` and batches):
one release ticks its search too (in EM calls, out of the most its accounting allows); a
callback with a third parameter hears which work the counts measure; a batch selected by
`key IN (...)` comes back in the list's order, as an analyst's does (DESIGN.md §6); off a
terminal the CLI says once on stderr that numba compiles."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import pcor_sql
from pcor_sql.core import compile_notice
from tests.cli.cli_helpers import QUERY, invoke

OPTIONS = dict(verifier="grubbs", epsilon=0.3, seed=1, ledger=":memory:")


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    pcor_sql.load_dataset(c, "salaries")
    yield c
    c.close()


def quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def test_one_release_ticks_its_search(con):
    seen: list[tuple[int, int]] = []
    quiet(pcor_sql.explain_outlier, con, QUERY, progress=lambda done, total: seen.append((done, total)), **OPTIONS)
    searching = [s for s in seen if s[1] == 51]  # bfs, 50 samples: at most 51 EM calls
    assert searching[0] == (0, 51) and searching[-1] == (51, 51)
    assert len({d for d, _ in searching}) > 10  # it moves, not only 0 and the end


def test_a_three_parameter_callback_hears_the_phase(con):
    seen: list[tuple[int, int, str]] = []
    quiet(pcor_sql.explain_outliers, con, "SELECT salary FROM salaries WHERE id IN (42, 7, 13)", max_records=3,
          progress=lambda done, total, phase: seen.append((done, total, phase)), **OPTIONS)
    phases = {phase for *_, phase in seen}
    assert "releasing records" in phases, phases
    assert [(d, t) for d, t, p in seen if p == "releasing records"][-1] == (3, 3)


def test_seeded_outputs_do_not_depend_on_listening(con):
    plain = quiet(pcor_sql.explain_outlier, con, QUERY, **OPTIONS)
    heard = quiet(pcor_sql.explain_outlier, con, QUERY, progress=lambda d, t, p: None, **OPTIONS)
    assert heard.predicate == plain.predicate


def test_an_in_list_batch_comes_back_in_the_lists_order(con):
    results = quiet(pcor_sql.explain_outliers, con, "SELECT salary FROM salaries WHERE id IN (42, 7, 13)",
                    max_records=3, **OPTIONS)
    assert [(r.record or {}).get("id", getattr(r, "key", None)) for r in results] == [42, 7, 13]
    alone = quiet(pcor_sql.explain_outliers, con, "SELECT salary FROM salaries WHERE id IN (42, 7, 13)",
                  max_records=3, **OPTIONS)
    # Each record's release is the one of its own seeded search, whatever the order shown.
    assert [r.predicate for r in results if r.released] == [r.predicate for r in alone if r.released]


def test_off_a_terminal_the_compile_is_said_once_on_stderr(monkeypatch):
    import pcor_sql.release_searches as release_searches

    original = release_searches._release_all

    def compiling(*args, **kwargs):
        for _ in range(2):  # two compiles: one line
            compile_notice.started()
            compile_notice.ended()
        return original(*args, **kwargs)

    monkeypatch.setattr(release_searches, "_release_all", compiling)
    result = invoke("explain-outlier", QUERY, "--verifier", "grubbs", "--seed", "1", "--ledger", ":memory:")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "compiling the validity checks" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: "), result.stderr
