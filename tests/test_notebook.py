"""Results in a notebook (DESIGN.md §5 "The Python API"): `_repr_html_` / `_repr_markdown_` show what the
command line shows, escaped, with owner-only parts marked."""

from __future__ import annotations

import html

import duckdb
import pytest

import pcor_sql

Q = "SELECT salary FROM salaries WHERE id = 42"


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    pcor_sql.load_datasets(c)
    yield c
    c.close()


def test_an_explanation_shows_its_summary_context_and_privacy(con):
    e = pcor_sql.explain_outlier(con, Q, verifier="grubbs", by="job_title,year", seed=2)
    page = e._repr_html_()
    assert html.escape(e.summary, quote=True) in page
    assert html.escape(e.privacy_summary, quote=True) in page
    for attribute, values in e.context.items():
        assert f"<th style='text-align:left'>{attribute}</th>" in page
        assert html.escape(str(values[0]), quote=True) in page
    assert "seeded: not for real releases" in page and "NOT FOR RELEASE" not in page
    owner = pcor_sql.explain_outlier(con, Q, verifier="grubbs", by="job_title,year", seed=2, owner_view=True)
    assert "NOT FOR RELEASE" in owner._repr_html_() and "NOT FOR RELEASE" in owner._repr_markdown_()
    text = e._repr_markdown_()
    assert text.startswith(f"**{e.summary}**") and "| privacy |" in text
    # The record's key, the charged units and the privacy cost (DESIGN.md §2 "What is released"); no "None".
    assert "<th style='text-align:left'>record</th><td style='text-align:left'>id = 42</td>" in page
    assert "| record | id = 42 |" in text
    assert "<th style='text-align:left'>charged to</th><td style='text-align:left'>bundled:salaries" in page
    assert "| charged to | bundled:salaries (no budget limit set) |" in text and "None" not in page


def test_values_are_escaped():
    from pcor_sql.notebook import explanation_html
    from tests.test_readable import explanation

    page = explanation_html(explanation(context={"job_title": ["<b>x</b>", "a & b"]}, full_attributes=()))
    assert "<b>x</b>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "a &amp; b" in page


def test_coe_and_answers(con):
    [coe] = pcor_sql.coe(con, Q, verifier="grubbs", by="job_title,year")
    page = coe._repr_html_()
    assert "OWNER ONLY — NOT FOR RELEASE" in page and f"{coe.size:,} valid of {coe.admissible:,}" in page
    assert page.count("<tr>") == 1 + 20 and f"… {coe.size - 20:,} more" in page
    assert html.escape(coe.best().predicate, quote=True) in page
    answer = pcor_sql.identify_anomaly(con, Q, beta=5, radius=100, epsilon=0.5, seed=1)
    assert html.escape(answer.summary, quote=True) in answer._repr_html_()
    assert answer.privacy_summary in answer._repr_markdown_()
    assert "| charged to | bundled:salaries |" in answer._repr_markdown_()


def test_a_list_of_results_is_one_table_with_its_unreleased_rows(con):
    """`explain_outliers` returns a list a notebook shows as one table (HTML and Markdown), a
    row per record — a record not released included, with its reason."""
    results = pcor_sql.explain_outliers(con, "SELECT salary FROM salaries WHERE id IN (42, 1)", verifier="grubbs",
                                        epsilon=0.2, ledger=":memory:")
    assert isinstance(results, list) and sorted(r.released for r in results) == [False, True]
    page, text = results._repr_html_(), results._repr_markdown_()
    assert page.count("<table>") == 1 and page.count("<tr>") == 3
    assert "not released: " in page and "id = 42" in page and "id = 1" in page
    assert text.startswith("**2 results**") and text.count("\n| ") == 3


def test_each_result_kind_names_its_notebook_functions_directly():
    """Each kind of result is shown by the `notebook` functions it names (no name built from a
    string at display time: a reader and a type checker follow the call)."""
    from pcor_sql import notebook
    from pcor_sql.results import AnomalyResult, CoeResult, Explanation

    for cls, kind in ((Explanation, "explanation"), (CoeResult, "coe"), (AnomalyResult, "answer")):
        assert cls._html is getattr(notebook, f"{kind}_html")
        assert cls._markdown is getattr(notebook, f"{kind}_markdown")
