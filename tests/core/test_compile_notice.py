"""The user is told when numba compiles (a cold cache), and only then."""

from __future__ import annotations

import numba
import numpy as np

from pcor_sql.core import compile_notice
from pcor_sql.core import jit  # noqa: F401 - importing it registers the listener for numba's compile events


def test_a_compile_is_heard_once_per_outermost_nest_and_a_loaded_function_is_silent():
    heard: list[bool] = []

    def fresh(x):  # a new function: numba compiles it (nothing cached for a test-local closure)
        return x + 1.0

    with compile_notice.listening(heard.append):
        kernel = numba.njit(fresh)
        assert kernel(np.float64(1.0)) == 2.0
        assert kernel(np.float64(2.0)) == 3.0  # compiled already: no event
    assert heard == [True, False]
    kernel2 = numba.njit(lambda x: x * 2.0)
    kernel2(1.0)  # nobody listening any more
    assert heard == [True, False]


def test_nested_notices_count_depth():
    heard: list[bool] = []
    with compile_notice.listening(heard.append):
        compile_notice.started()
        compile_notice.started()
        compile_notice.ended()
        assert heard == [True]
        compile_notice.ended()
    assert heard == [True, False]




def test_a_release_shows_the_compiling_phase_and_goes_back_to_searching(monkeypatch):
    import duckdb

    import pcor_sql
    from pcor_sql.engine import evaluator
    from pcor_sql.release_searches import COMPILING

    real = evaluator.compiled_check

    def compiling_check(*args):
        compile_notice.started()  # as numba's event on a cold cache
        try:
            return real(*args)
        finally:
            compile_notice.ended()

    monkeypatch.setattr(evaluator, "compiled_check", compiling_check)

    class Recorder:
        def __init__(self):
            self.phases: list[str] = []

        def __call__(self, done, total):
            pass

        def phase(self, label):
            self.phases.append(label)

    con = duckdb.connect()
    pcor_sql.load_datasets(con)
    progress = Recorder()
    pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 42", verifier="grubbs", seed=1,
                             ledger=":memory:", allow_seeded=True, warn=lambda m: None, progress=progress)
    at = progress.phases.index(COMPILING)
    assert progress.phases[at - 1] == "searching" and progress.phases[at + 1] == "searching"
