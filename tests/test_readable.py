"""Results in plain words (DESIGN.md §5 "The Python API"): the sentences use released values only, the
privacy line adds up, the glossary is docs/cli.md's, and ε prints without float noise."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from pcor_sql.readable import (
    GLOSSARY,
    anomaly_sentence,
    conditions_words,
    outlier_privacy_sentence,
    round_epsilon,
    selector_words,
    verifier_words,
)
from pcor_sql.request_values import OutlierRequest
from pcor_sql.results import AnalystAnswer, AnomalyResult, Charge, Explanation

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
GLOSSARY_PAGE = README.parent / "docs" / "cli.md"


def explanation(**changes):
    request = OutlierRequest(relation="s", metric="salary", selector="(id = 42)", epsilon=0.2)
    base = dict(
        request=request, record={"id": 42, "job_title": "Nurse", "salary": 187190.79},
        context={"job_title": ["Nurse", "Teacher"], "year": ["2018", "2019"]},
        predicate="\"job_title\" IN ('Nurse', 'Teacher')", explanation_sql="SELECT salary FROM s WHERE ...",
        em_calls=51, verifier="lof(k=20, threshold=1.5)", start_source="search", seeded=False,
        charge=Charge(dataset="s"), full_attributes=("year",),
    )
    return Explanation(**{**base, **changes})


def test_the_first_line_says_it_in_words_from_released_values():
    e = explanation()
    assert e.summary == (
        "salary of the record where id = 42 is an outlier (LOF, k = 20, threshold = 1.5) "
        "among the rows where job_title is Nurse or Teacher: the rows around its value are more than 1.5 times "
        "sparser than around its 20 nearest neighbours' values"
    )
    # Nothing of the record but the key the caller gave; no count.
    assert "187190" not in e.summary and "population" not in e.summary
    assert "among all rows: " in explanation(full_attributes=("job_title", "year")).summary


@pytest.mark.parametrize(("verifier", "claim", "meaning"), [
    ("histogram(rel=0.0025)", "lies in a sparse bin (histogram, rel = 0.0025) among all rows",
     "its value's bin holds fewer than 0.25% of them — sparse, which in a long tail need not mean extreme"),
    ("grubbs(alpha=0.01)", "is an outlier (Grubbs' test, alpha = 0.01) among all rows",
     "exceeds Grubbs' critical value at alpha = 0.01"),
    ("zscore(z=2.5)", "is an outlier (z-score, z = 2.5) among all rows", "more than 2.5 standard deviations from their mean"),
    ("lof(k=7, threshold=2, duplicates=plain)", "is an outlier (LOF, k = 7, threshold = 2, duplicates = plain)",
     "more than 2 times sparser than around its 7 nearest neighbours' values"),
])
def test_the_summary_says_what_the_verifier_means_for_the_record(verifier, claim, meaning):
    """A histogram's verdict is a sparse bin, not "an outlier among all rows"; each verifier's
    summary says what its rule found, with the options the release used."""
    summary = explanation(verifier=verifier, full_attributes=("job_title", "year")).summary
    assert claim in summary and summary.endswith(meaning), summary
    assert "far) among all rows" in explanation(verifier="far", full_attributes=("job_title", "year")).summary


def test_long_value_lists_are_counted_and_short_ones_listed():
    context = {"a": ["x"], "b": ["1", "2", "3"], "c": [str(i) for i in range(9)]}
    assert conditions_words(context) == "a is x, b is 1, 2 or 3 and c is one of 9 values"
    assert conditions_words(context, whole=("a", "b", "c")) == ""


def test_words_for_verifiers_and_selectors():
    assert verifier_words("grubbs(alpha=0.05)") == "Grubbs' test, alpha = 0.05"
    assert verifier_words("zscore") == "z-score"
    assert verifier_words("far") == "far"
    assert selector_words("(id = 42)") == "id = 42"
    assert selector_words("(a = 1) AND (b = 2)") == "(a = 1) AND (b = 2)"
    assert selector_words("(name = ')(')") == "name = ')('"


@pytest.mark.parametrize(
    "epsilon, calls, accounting, made, expected",
    [
        (0.2, 51, "tight", 51, "privacy cost ε = 0.2 (output-constrained DP) over 51 randomized choices of ε1 = 0.00392 each"),
        (0.2, 1, "tight", 1, "privacy cost ε = 0.2 (output-constrained DP) over 1 randomized choice of ε1 = 0.2 each"),
        (0.2, 6, "paper", 6, "over 6 randomized choices of 2ε1 = 0.0333 each, as the paper accounts"),
        (0.5, 21, "tight", 9, "over 21 randomized choices of ε1 = 0.0238 each (9 made; the whole ε is charged)"),
    ],
)
def test_the_privacy_line_adds_up_to_epsilon(epsilon, calls, accounting, made, expected):
    factor = 2 if accounting == "paper" else 1
    text = outlier_privacy_sentence(epsilon, epsilon / (factor * calls), accounting, made)
    assert text.endswith(expected) and text.startswith(f"privacy cost ε = {epsilon:g} (output-constrained DP)")


def test_epsilon_sums_print_without_float_noise_and_the_exact_value_is_kept():
    spent = 0.1 + 0.2 + 0.3
    assert spent != 0.6 and round_epsilon(spent) == 0.6
    e = explanation(charge=Charge(dataset="s", spent=spent, limit=2.0))
    assert e.as_dict()["budget"] == {"spent": 0.6, "limit": 2.0}
    assert e.budget_spent == spent  # display only: the value itself is untouched
    assert round_epsilon(0.2 / 51) == pytest.approx(0.2 / 51, rel=1e-11)


def test_anomaly_sentences():
    answer = AnomalyResult(record={"id": 7}, anomaly=True, epsilon=0.5, privacy="sp", k=1, beta=5, radius=1.0,
                           norm="l2", seeded=False, dataset="h")
    assert answer.summary.startswith("anomaly: at most β = 5 records (itself included) lie within r = 1")
    assert answer.privacy_summary == "privacy cost ε = 0.5 under (ε, k)-sensitive privacy with k = 1"
    dp = dataclasses.replace(answer, anomaly=False, privacy="dp", k=None)
    assert dp.summary.startswith("not an anomaly") and dp.privacy_summary.endswith("under ε-differential privacy")
    assert anomaly_sentence(True, 2.5, 0.25).startswith("anomaly: at most β = 2.5 records")



def test_an_analysts_answer_is_the_owners_bit_and_parameters_in_the_same_words_without_the_record():
    owners = AnomalyResult(record={"id": 7, "pay": 9.0}, anomaly=True, epsilon=0.5, privacy="sp", k=1, beta=5,
                           radius=1.0, norm="l1", seeded=False, dataset="h", owner={"count": 3})
    theirs = AnalystAnswer.of(owners, "h", 7, ("pay",))
    assert theirs == AnalystAnswer("h", 7, ("pay",), True, 0.5, "sp", 1, 5, 1.0, "l1")
    assert (theirs.summary, theirs.privacy_summary) == (owners.summary, owners.privacy_summary)
    assert "record" not in theirs.as_dict() and "owner" not in theirs.as_dict()


def test_the_glossary_covers_the_output_and_is_the_docs():
    terms = [t for t, _ in GLOSSARY]
    for needed in ("ε (epsilon)", "ε1 (epsilon1)", "OCDP", "COE", "utility", "verifier", "search"):
        assert needed in terms
    section = GLOSSARY_PAGE.read_text(encoding="utf-8").split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    entries = re.findall(r"^- \*\*(.+?)\*\*: (.+?)(?=\n- \*\*|\n\n|\Z)", section, re.MULTILINE | re.DOTALL)
    assert [(t, " ".join(m.split())) for t, m in entries] == list(GLOSSARY)


def test_an_ordinal_attribute_reads_as_one_range():
    """A binned attribute's run of bins is one range in words (`ranges`, from the space), not
    its bins' labels joined by `or`."""
    context = {"age": ["[18, 30)", "[30, 45)"], "dept": ["a"]}
    e = explanation(context=context, full_attributes=(), ranges={"age": "[18, 45)"})
    assert "among the rows where age is [18, 45) and dept is a: " in e.summary
    assert " or " not in e.summary
    assert conditions_words(context) == "age is [18, 30) or [30, 45) and dept is a"  # without ranges: the labels


@pytest.mark.parametrize("search", ["direct", "uniform", "explore"])
def test_the_start_line_is_the_same_in_the_cli_and_the_notebook(search):
    """One text per start source (DESIGN.md §2 "The starting context"): a search that walks from no start says so,
    and the notebook no longer calls uniform or explore a direct search."""
    import io

    from rich.console import Console

    from pcor_sql.cli.render import print_explanations
    from pcor_sql.readable import START_SOURCES

    request = OutlierRequest(relation="s", metric="salary", selector="(id = 42)", epsilon=0.2, search=search)
    e = explanation(request=request, start_source="none")
    out = io.StringIO()
    print_explanations([e], "table", Console(file=out, width=400))
    words = START_SOURCES["none"]
    assert words in out.getvalue() and f"| start | {words} |" in e._repr_markdown_()
    assert "direct" not in words and "walk" in words


def test_a_verifiers_words_are_its_declared_label_and_every_one_has_a_meaning(monkeypatch):
    """A built-in's name in words is its own `capabilities.label` (declared once, with the verifier);
    the glossary and the verdict sentences speak of every built-in and every search."""
    import dataclasses as dc

    from pcor_sql import readable
    from pcor_sql.core.search_specs import SearchName
    from pcor_sql.core.verifiers.builtins import BUILTIN_NAMES
    from pcor_sql.core.verifiers.lof import Lof

    monkeypatch.setattr(Lof, "capabilities", dc.replace(Lof.capabilities, label="local outlier factor"))
    assert verifier_words("lof(k=20)") == "local outlier factor, k = 20"
    assert set(readable._MEANINGS) == set(BUILTIN_NAMES)
    entries = dict(GLOSSARY)
    assert all(re.search(rf"\b{name}\b", entries["verifier"]) for name in BUILTIN_NAMES)
    assert all(re.search(rf"\b{name}\b", entries["search"]) for name in SearchName)
