"""Pictures (issue 21, item 3): an explanation drawn against its context and the whole table,
marked NOT FOR RELEASE, and the budget as a bar per unit — rendered to PNG with Agg and
checked as files: they exist, have the expected size, and are not blank."""

from __future__ import annotations

import warnings

import duckdb
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.image  # noqa: E402

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
    assert f"released context ({len(context):,} rows)" in texts and "whole table (51,000 rows)" in texts
    assert any(t.startswith("the record: salary = 187,191") for t in texts)


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
    assert [round(p.get_width(), 6) for p in fig.axes[0].patches] == [2.0, 0.0, 0.6, 0.5]  # limits, then spent
