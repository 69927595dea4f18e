"""Results in plain words: the sentence that says what a release concluded, the privacy cost
in words, the glossary of the terms the output uses, and ε without float noise.

Only released values go into these sentences — the metric and the key the caller gave, the
released context, the verifier and the privacy parameters — never counts, utilities or other
columns of the record, so they may be shown wherever the release itself may.
"""

from __future__ import annotations

import math

import re
from typing import Any, Mapping, Sequence

#: The terms the output uses, in the order a reader meets them (the CLI's `pcor-sql glossary`
#: and the glossary of docs/cli.md list exactly these).
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("context", "A set of rows chosen by allowed values per attribute, e.g. job_title IN ('Nurse', 'Teacher') "
                "AND year IN ('2019'). pcor-sql releases one context in which the record is an outlier."),
    ("broad context", "A context that keeps many values (and so many rows). With the population utility the "
                      "search prefers the broadest context in which the record is still an outlier: 'an outlier "
                      "among almost everyone' says more than 'an outlier among three people'."),
    ("domain", "The values an attribute may take, declared by the data owner (ENUM types, --domain, "
               "DOMAIN (...)). Values absent from the data stay in it, so the output does not reveal which exist."),
    ("verifier", "The outlier test run on a context's rows: lof (local outlier factor), grubbs (Grubbs' test), "
                 "histogram (a sparse bin) or zscore (distance from the mean in standard deviations)."),
    ("COE", "The contexts of outlierness, COE(D, V): every context in which record V is an outlier. The owner's "
            "`pcor-sql coe` lists it exactly; it is never released."),
    ("utility", "How good a context is as an explanation. population: its number of rows (favours broad "
                "contexts); overlap: the rows it shares with the starting context (favours contexts near the "
                "start)."),
    ("search", "How the contexts to choose from are found: direct (all of COE), uniform, random-walk, dfs, bfs "
               "(the default: grows a frontier from the start, an exponential mechanism choosing each node to expand) "
               "or explore (a validity-only exploration, then one exponential mechanism)."),
    ("ε (epsilon)", "The privacy cost of a release or answer: smaller ε, stronger privacy, noisier choice. Costs add "
                    "up per dataset in the budget ledger."),
    ("ε1 (epsilon1)", "The share of ε spent on one randomized choice (one call of the exponential mechanism). "
                      "A bfs release with 50 samples makes up to 51 choices: ε1 = ε / 51."),
    ("exponential mechanism", "The randomized choice behind every release: it picks a context with probability "
                              "growing with its utility, so no single row decides the outcome."),
    ("OCDP", "Output-constrained differential privacy: the guarantee of a release. Datasets that differ in one "
             "row and have the same COE give nearly the same output (within a factor e^ε). It protects nothing "
             "that COE itself reveals."),
    ("accounting", "tight: one randomized choice costs ε1 (the utilities are monotone); paper: 2ε1, as the PCOR "
                   "paper counts."),
    ("validity-only step", "A step that reads only whether contexts are valid (e.g. finding a starting context). "
                           "It depends on COE alone and costs nothing under OCDP."),
    ("(β, r)-anomaly", "A record with at most β records (itself included) within distance r. `identify-anomaly` "
                       "answers with a randomized bit."),
    ("sensitive privacy", "(ε, k)-sensitive privacy: the ε guarantee for every record with at least β + 1 − k records "
                          "within r (all normal records, and anomalies near the border); only clear anomalies are "
                          "left unprotected, which makes answers about them far more accurate than under ε-DP."),
    ("seeded run", "A run with --seed / seed=: reproducible, hence not private; for tests and benchmarks only."),
)

_SHORT_LIST = 3
_EQUALS = re.compile(r"\s*=\s*")


#: Where a release's start context came from (`Explanation.start_source`), in words.
START_SOURCES = {
    "user": "given (--start / start = ...), checked to hold the record and be valid",
    "search": "found by a validity-only search (free under OCDP)",
    "none": "none needed (the search does not walk from a start)",
}


def start_words(source: str) -> str:
    """Where the start context came from, in words (the source itself when it has none)."""
    return START_SOURCES.get(source, source)


def round_epsilon(value: float | None) -> float | None:
    """ε for display: sums of floats print as 0.6000000000000001; 12 significant digits do not.
    Only what is shown is rounded — the ledger adds and compares the exact values."""
    if value is None:
        return None
    return float(f"{float(value):.12g}")


def show_epsilon(value: float, digits: int = 6) -> str:
    """ε as text, to `digits` significant digits: `0.2`; ε1 with 3: `0.00392`."""
    return f"{round_epsilon(value):.{digits}g}"


def verifier_words(label: str) -> str:
    """`lof(k=20, threshold=1.5)` → `LOF, k = 20, threshold = 1.5`."""
    from pcor_sql.core.verifiers.builtins import builtin_label  # its words are the verifier's own label

    name, _, options = label.partition("(")
    words = builtin_label(name.strip()) or name.strip()
    options = _EQUALS.sub(" = ", options.rstrip(")").strip())
    return words if not options else f"{words}, {options}"


def selector_words(selector: str) -> str:
    """The caller's WHERE clause as DuckDB rendered it, without its one pair of outer parentheses."""
    text = selector.strip()
    if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth = 0
    quote = None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _value(value: Any) -> str:
    return str(value) if not isinstance(value, str) else value


def conditions_words(context: Mapping[str, Sequence[Any]], whole: Sequence[str] = (),
                     ranges: Mapping[str, str] | None = None) -> str:
    """`job_title is Nurse or Teacher, and year is one of 6 values`: the attributes the context
    restricts (`whole` names those it keeps entirely); short lists in full. An ordinal
    attribute in `ranges` (`ContextSpace.ranges`) is its run of bins as one range: `age is
    [18, 35)`, not `age is [18, 25) or [25, 35)`."""
    parts = []
    ranges = ranges or {}
    for attribute, values in context.items():
        if attribute in whole:
            continue
        if attribute in ranges:
            parts.append(f"{attribute} is {ranges[attribute]}")
        elif len(values) == 1:
            parts.append(f"{attribute} is {_value(values[0])}")
        elif len(values) <= _SHORT_LIST:
            parts.append(f"{attribute} is {', '.join(_value(v) for v in values[:-1])} or {_value(values[-1])}")
        else:
            parts.append(f"{attribute} is one of {len(values)} values")
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


_KEYED = re.compile(r'\s*("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\s*(?:=|IN\s*\()', re.IGNORECASE)
_JOINED = re.compile(r"\b(AND|OR)\b", re.IGNORECASE)


def selector_key(selector: str, record: Mapping[str, Any] | None) -> tuple[str, Any] | None:
    """The key column and this record's value in it, when the selector is `col = v` or
    `col IN (...)` over a column the record has; None otherwise."""
    if not record:
        return None
    text = selector_words(selector)
    match = _KEYED.match(text)
    # Only a selector by that one column: `id = 1 AND x = 2` would lose its second condition.
    if match is None or _JOINED.search(re.sub(r"'(?:[^']|'')*'", "''", text[match.end():])):
        return None
    name = match.group(1)
    name = name[1:-1].replace('""', '"') if name.startswith('"') else name
    for column, value in record.items():
        if column == name or (not match.group(1).startswith('"') and column.lower() == name.lower()):
            return column, value
    return None


def record_words(selector: str, record: Mapping[str, Any] | None = None) -> str:
    """The record as the caller picked it: `the record where id = 42`. When the selector picks by
    one column (`id IN (44, 365, 250)`), each record is named by its own value in it (`id = 365`):
    the owner sees the record, and the key is what the caller gave."""
    key = selector_key(selector, record)
    if key is not None:
        column, value = key
        column = column if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column) else '"' + column.replace('"', '""') + '"'
        shown = "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)
        return f"the record where {column} = {shown}"
    return f"the record where {selector_words(selector)}"


def key_words(dataset: str, key: Any) -> str:
    """A registered dataset's record as an analyst picked it: `record 42 of salaries`."""
    shown = f"'{key}'" if isinstance(key, str) else str(key)
    return f"record {shown} of {dataset}"


def outlier_sentence(
    metric: str, record: str, verifier: str, context: Mapping[str, Sequence[Any]], whole: Sequence[str] = (),
    ranges: Mapping[str, str] | None = None,
) -> str:
    """The plain-words first line of a release: `salary of the record where id = 42 is an
    outlier (LOF, k = 20, threshold = 1.5) among the rows where job_title is one of 6 values:
    the rows around its value are more than 1.5 times sparser than around its 20 nearest
    neighbours' values` — what the verifier's verdict means for the record (a histogram's: a
    sparse bin); `record` is `record_words(...)` or `key_words(...)`; `ranges` as in
    `conditions_words`."""
    where = conditions_words(context, whole, ranges)
    rows = f"the rows where {where}" if where else "all rows"
    name, options = _verifier_options(verifier)
    if name == "histogram":  # a sparse bin, which in a long tail need not be an extreme value
        head = f"{metric} of {record} lies in a sparse bin ({verifier_words(verifier)}) among {rows}"
    else:
        head = f"{metric} of {record} is an outlier ({verifier_words(verifier)}) among {rows}"
    meaning = _MEANINGS.get(name)
    return head if meaning is None else f"{head}: {meaning(options)}"


def _verifier_options(label: str) -> tuple[str, dict[str, str]]:
    """`lof(k=20, threshold=1.5)` → ("lof", {"k": "20", "threshold": "1.5"})."""
    name, _, options = label.partition("(")
    pairs = (item.partition("=") for item in options.rstrip(")").split(",") if "=" in item)
    return name.strip(), {k.strip(): v.strip().strip("'\"") for k, _, v in pairs}


def _percent(rel: str) -> str:
    try:
        return f"{float(rel) * 100:g}%"
    except ValueError:
        return f"rel = {rel}"


# What each built-in verifier's verdict says about the record (DESIGN.md §2), from its options.
_MEANINGS = {
    "lof": lambda o: (f"the rows around its value are more than {o.get('threshold', '1.5')} times sparser than "
                      f"around its {o.get('k', '20')} nearest neighbours' values"),
    "grubbs": lambda o: (f"its distance from their mean, in standard deviations, exceeds Grubbs' critical value at "
                         f"alpha = {o.get('alpha', '0.05')}"),
    "zscore": lambda o: f"it lies more than {o.get('z', '3')} standard deviations from their mean",
    "histogram": lambda o: (f"of √N equal-width bins over their range, its value's bin holds fewer than "
                            f"{_percent(o.get('rel', '0.0025'))} of them — sparse, which in a long tail need not "
                            f"mean extreme"),
}


def outlier_privacy_sentence(epsilon: float, epsilon1: float, accounting: str, em_calls: int | None = None) -> str:
    """`privacy cost ε = 0.2 (output-constrained DP) over 51 randomized choices of ε1 = 0.00392 each`."""
    factor = 2 if accounting == "paper" else 1
    budgeted = max(1, round(epsilon / (factor * epsilon1)))
    each = f"ε1 = {show_epsilon(epsilon1, 3)}" if factor == 1 else f"2ε1 = {show_epsilon(2 * epsilon1, 3)}"
    plural = "s" if budgeted != 1 else ""
    text = f"privacy cost ε = {show_epsilon(epsilon)} (output-constrained DP) over {budgeted} randomized choice{plural} of {each} each"
    if em_calls is not None and em_calls < budgeted:  # how many were made is the owner's to see
        text += f" ({em_calls} made; the whole ε is charged)"
    if factor == 2:
        text += ", as the paper accounts"
    return text


#: The most one context may be likelier than another for the choice to count as nearly uniform.
UNIFORM_RATIO = 2.0


def uniform_choice_warning(epsilon: float, epsilon1: float, rows: int) -> str | None:
    """Where ε1 is so small that no context of a `rows`-row table is even UNIFORM_RATIO times
    likelier than another (the exponential mechanism weighs a context by e^(ε1·utility), and a
    utility is at most the row count), the words saying so; else None."""
    if epsilon1 * rows >= math.log(UNIFORM_RATIO):
        return None
    return (f"the search's choices are nearly uniform and ignore utility: ε1 = {show_epsilon(epsilon1, 3)}, the ε "
            f"of each randomized choice (ε = {show_epsilon(epsilon)} shared among the search's choices), so even "
            f"the whole table ({rows:,} rows) is at most e^(ε1·{rows:,}) = e^{epsilon1 * rows:.3g} times "
            f"likelier than any other context; raise ε, or lower samples")


def anomaly_sentence(anomaly: bool, beta: float, radius: float) -> str:
    """`anomaly: at most β = 5 records lie within r = 1 of it (a randomized answer)`."""
    if anomaly:
        return f"anomaly: at most β = {beta:g} records (itself included) lie within r = {radius:g} of it (a randomized answer)"
    return f"not an anomaly: more than β = {beta:g} records (itself included) lie within r = {radius:g} of it (a randomized answer)"


def anomaly_privacy_sentence(epsilon: float, privacy: str, k: int | None) -> str:
    if privacy == "sp":
        return f"privacy cost ε = {show_epsilon(epsilon)} under (ε, k)-sensitive privacy with k = {k}"
    return f"privacy cost ε = {show_epsilon(epsilon)} under ε-differential privacy"


def certificate_words(c: Mapping[str, Any]) -> str:
    """A verifier's certificate (`core.verifiers.base.certificate`) in words, for the data owner:
    `LOF = 1.81 against threshold 1.5 (outlier iff LOF > threshold; released context of 29,571 rows)`."""
    return (f"{c['statistic']} = {c['value']:.6g} against threshold {c['threshold']:.6g} "
            f"(outlier iff {c['rule']}; released context of {c['population']:,} rows)")
