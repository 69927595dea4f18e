"""Pictures (DESIGN.md §2 "What is released"): an explanation drawn against its context and the whole table,
marked NOT FOR RELEASE, and the budget as a bar per unit — rendered to PNG with Agg and
checked as files: they exist, have the expected size, and are not blank."""

from __future__ import annotations

import warnings

import duckdb
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
import matplotlib.patches  # noqa: E402

import pcor_sql  # noqa: E402
from pcor_sql.errors import UserError  # noqa: E402
from pcor_sql.plots import DPI, SIZE, budget_figure, explanation_figure  # noqa: E402

WIDTH, HEIGHT = int(SIZE[0] * DPI), int(SIZE[1] * DPI)


def _picture(path):
    """The PNG's pixels (height × width × channels, floats in [0, 1])."""
    assert path.exists() and path.stat().st_size > 5_000
    pixels = matplotlib.image.imread(str(path))
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    return pixels


def _red(pixels):
    """How many pixels are the 'NOT FOR RELEASE' red (#d62728) or the record's line."""
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return int(((r > 0.75) & (g < 0.25) & (b < 0.25)).sum())


@pytest.fixture(scope="module")
def release():
    con = duckdb.connect()
    pcor_sql.load_dataset(con, "salaries")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = pcor_sql.explain_outlier(con, "SELECT salary FROM salaries WHERE id = 42", verifier="grubbs", epsilon=0.2,
                                     seed=1, allow_seeded=True, ledger=":memory:")
    yield r
    con.close()


def test_an_explanation_is_drawn_against_its_context_and_the_table(release, tmp_path):
    context, whole = release.values()
    assert len(whole) == 51_000 and 0 < len(context) <= len(whole)
    fig = release.plot(tmp_path / "e.png")
    pixels = _picture(tmp_path / "e.png")
    assert pixels[..., :3].std() > 0.05  # not blank
    assert _red(pixels) > 200  # the record's line and the NOT FOR RELEASE mark
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("NOT FOR RELEASE" in t for t in texts)
    assert any(t.startswith(f"released context ({len(context):,} rows)") for t in texts)
    assert any(t.startswith("whole table (51,000 rows)") for t in texts)
    assert any(t.startswith("the record: salary = 187,191") for t in texts)
    assert fig._repr_png_().startswith(b"\x89PNG")  # a notebook shows it inline, whatever its backend


def test_a_small_context_is_seen_on_its_own_zoomed_panel():
    """A context of 3% of the table on a long tail: drawn as a share of its own rows, on an axis
    zoomed to it and the record, it fills its panel (on the table's counts it was flat)."""
    import numpy as np

    rng = np.random.default_rng(0)
    context = rng.normal(5, 8, 9_831)
    whole = np.concatenate([rng.exponential(20, 317_000) - 30, context, [2_000.0]])
    fig = explanation_figure("arr_delay", 60.0, context, whole, "t")
    near = fig.axes[0]
    context_bars = [p for p in near.patches if isinstance(p, matplotlib.patches.Rectangle) and p.get_height() > 0]
    assert max(p.get_height() for p in context_bars) > 0.5 * near.get_ylim()[1]
    lo, hi = near.get_xlim()
    assert lo <= context.min() and hi >= 60.0 and hi < 200  # zoomed: not out to the table's 2,000
    assert fig.axes[1].get_xlim()[1] >= 2_000  # the whole table, for reference, on its own panel


def test_an_unmarked_picture_is_not_made(tmp_path):
    """Without the mark the red count drops: the check above can fail."""
    fig = explanation_figure("v", 1.0, [1.0, 2.0], [1.0, 2.0, 3.0], "t")
    fig.texts.clear()
    fig.savefig(tmp_path / "plain.png", dpi=DPI)
    assert _red(_picture(tmp_path / "plain.png")) < _red(_picture_of(tmp_path))


def _picture_of(tmp_path):
    explanation_figure("v", 1.0, [1.0, 2.0], [1.0, 2.0, 3.0], "t", tmp_path / "marked.png")
    return _picture(tmp_path / "marked.png")


def test_a_result_without_its_data_refuses_to_draw(release):
    import dataclasses

    with pytest.raises(UserError, match="no data to draw"):
        dataclasses.replace(release, values=None).plot()


def test_the_budget_is_a_bar_per_unit(tmp_path):
    rows = [{"unit": "bundled:salaries", "notion": "ocdp", "spent": 0.6, "limit": 2.0},
            {"unit": "memory.main.t", "notion": "dp", "spent": 0.5, "limit": None}]
    fig = budget_figure(rows, tmp_path / "b.png")
    pixels = _picture(tmp_path / "b.png")
    assert pixels[..., :3].std() > 0.05
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["bundled:salaries (ocdp)", "memory.main.t (dp)"]
    assert [round(p.get_width(), 6) for p in fig.axes[0].patches] == [2.0, 0.6, 0.5]  # the one limit, then spent
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["limit", "spent"]


def test_no_limit_no_limit_in_the_legend():
    fig = budget_figure([{"unit": "memory.main.t", "notion": "dp", "spent": 0.5, "limit": None}])
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["spent"]


def test_a_count_metrics_first_bin_starts_at_zero_not_below():
    """A metric whose values are all ≥ 0 (births per day): no bin and no axis below 0."""
    fig = explanation_figure("births", 5.0, [0, 0, 1, 2, 0], [0, 0, 1, 2, 3, 5, 0, 1], "t")
    near, far = fig.axes[0], fig.axes[1]
    assert near.get_xlim()[0] == 0.0 and far.get_xlim()[0] == 0.0
    assert min(p.get_x() for p in near.patches if hasattr(p, "get_x")) >= -1e-9  # edge arithmetic
    negative = explanation_figure("delay", -5.0, [-5, 0, 1], [-5, 0, 1, 2], "t")  # a signed metric keeps its pad
    assert negative.axes[0].get_xlim()[0] < -5.0
