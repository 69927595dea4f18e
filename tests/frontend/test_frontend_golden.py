"""Golden rewrites, each also executed on DuckDB to prove the rewrite kept the query's meaning.

Format of tests/frontend/golden/*.sql — cases separated by `-- case:` lines:

    -- case: <title>
    -- by: dept, year                  (context attributes; compact --by form)
    -- context: dept IN ('Nursing')    (a context predicate for the population rewrite)
    <the input: a SELECT or an EXPLAIN OUTLIER / IDENTIFY ANOMALY statement, any lines>
    -- expect: population               (population_sql(q, context))
    SELECT ...
    -- expect: explanation              (explanation_sql(q, "") — the all-values context)
    SELECT ...
    -- expect: record                   (record_sql(q, by))
    SELECT ...
    -- expect: population rows          (JSON: the sorted metric values, counted by hand)
    [...]
    -- expect: record rows              (JSON: the sorted rows of the record query)
    [...]
    -- expect: domains                  (optional, JSON: the DOMAIN clause's declarations)
    {"dept": [...], ...}
    -- expect: bins                     (optional, JSON: its BINS declarations, as resolved)
    {"age": {"edges": [...], "labels": [...], "ranges": ["<released range of bins i..j>", ...]}}

Besides comparing the text, each case runs on the fixture database and checks that
- the record query returns exactly the input query's rows (metric columns, as a multiset);
- the explanation with predicate TRUE returns the same rows as the population of the full
  context (every attribute IN its whole domain), i.e. the whole relation;
- each rewrite parses back to the same metric and relation;
- with a DOMAIN clause: the Session resolves those domains on DuckDB (values converted to
  the column types), and the full declared context selects the whole relation;
- with BINS declarations: the Session resolves the edges and labels; the released range of
  every run of bins holding the record's bin is the expected text and selects exactly the rows
  whose value lies in those bins.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pcor_sql.core.bins import Bins, edge_text
from pcor_sql.core.space import ContextSpace
from pcor_sql.engine.context_sql import context_predicate
from pcor_sql.frontend import (
    ExplainOutlier,
    IdentifyAnomaly,
    explanation_sql,
    parse_by,
    parse_select,
    parse_statement,
    population_sql,
    record_sql,
)
from pcor_sql.frontend.request_builders import outlier_from_select
from pcor_sql.session import Session
from pcor_sql.sqltext.quoting import quote_identifier, quote_literal

GOLDEN = Path(__file__).parent / "golden"
SECTIONS = ("population", "explanation", "record", "population rows", "record rows")
OPTIONAL = ("domains", "bins")


@dataclass
class Case:
    file: str
    title: str
    by: tuple[str, ...] = ()
    context: str = ""
    input_lines: list[str] = field(default_factory=list)
    expect: dict[str, str] = field(default_factory=dict)

    @property
    def input(self) -> str:
        return "\n".join(self.input_lines).strip()


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(GOLDEN.glob("*.sql")):
        current: Case | None = None
        section: str | None = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("-- case:"):
                current = Case(path.name, line.removeprefix("-- case:").strip())
                cases.append(current)
                section = None
                continue
            if current is None:
                assert not line.strip() or line.startswith("--"), f"{path.name}: text before the first case: {line!r}"
                continue
            if line.startswith("-- expect:"):
                section = line.removeprefix("-- expect:").strip()
                assert section in SECTIONS + OPTIONAL, f"{path.name}: unknown section {section!r}"
                assert section not in current.expect, f"{path.name} / {current.title}: {section} twice"
                current.expect[section] = ""
            elif section is None and line.startswith("-- by:"):
                current.by = parse_by(line.removeprefix("-- by:"))
            elif section is None and line.startswith("-- context:"):
                current.context = line.removeprefix("-- context:").strip()
            elif section is None:
                current.input_lines.append(line)
            else:
                current.expect[section] = (current.expect[section] + "\n" + line).strip()
    return cases


CASES = load_cases()


def test_golden_files_have_cases():
    assert len(CASES) >= 12
    for case in CASES:
        assert case.input, case.title
        assert case.by, case.title
        assert set(SECTIONS) <= set(case.expect), f"{case.file} / {case.title}: missing sections"


def rows(con, sql):
    return con.execute(sql).fetchall()


def multiset(values):
    return Counter(json.dumps(v, sort_keys=True, default=str) for v in values)


def sorted_json(values):
    return sorted((list(v) if isinstance(v, tuple) else v for v in values), key=lambda v: json.dumps(v, default=str))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file}:{c.title}" for c in CASES])
def test_golden_rewrite(con, case):
    if case.input.upper().startswith(("EXPLAIN", "IDENTIFY")):
        stmt = parse_statement(con, case.input)
        assert isinstance(stmt, (ExplainOutlier, IdentifyAnomaly))
        q = stmt.query
    else:
        q = parse_select(con, case.input)
    population = population_sql(q, case.context)
    explanation = explanation_sql(q, "")
    record = record_sql(q, case.by)
    assert population == case.expect["population"]
    assert explanation == case.expect["explanation"]
    assert record == case.expect["record"]

    # The record query returns the rows the user's own query returns.
    m = len(q.metric_sql)
    original_rows = rows(con, q.original)
    record_rows = rows(con, record)
    assert multiset([r[:m] for r in record_rows]) == multiset(original_rows)
    assert sorted_json(record_rows) == json.loads(case.expect["record rows"])

    # The population rewrite selects the hand-counted population.
    population_rows = rows(con, population)
    assert sorted(r[0] for r in population_rows) == json.loads(case.expect["population rows"])

    # The explanation with predicate TRUE is the population of the full context.
    domains = {
        a: [r[0] for r in rows(con, f"SELECT DISTINCT {quote_identifier(a)} FROM {q.relation_sql}")] for a in case.by
    }
    full = " AND ".join(f"{quote_identifier(a)} IN ({', '.join(quote_literal(v) for v in vals)})" for a, vals in domains.items())
    assert multiset(rows(con, explanation)) == multiset(rows(con, population_sql(q, full)))
    assert len(rows(con, explanation)) == rows(con, f"SELECT count(*) FROM {q.relation_sql}")[0][0]

    if "domains" in case.expect or "bins" in case.expect:
        _check_declared_domains(con, stmt, q, json.loads(case.expect.get("domains", "{}")),
                                json.loads(case.expect.get("bins", "{}")))

    # Each rewrite reads back as the same metric over the same relation.
    for text in (population, explanation):
        again = parse_select(con, text, multiple=True)
        assert (again.metric_sql, again.relation_sql) == (q.metric_sql, q.relation_sql)


def _check_declared_domains(con, stmt, q, expected, expected_bins):
    """The DOMAIN clause parsed as written, resolved by the Session on DuckDB, and the full
    declared context (values absent from the data included) selecting every row; BINS
    declarations resolved to their edges and labels, each run's released range checked."""
    assert isinstance(stmt, ExplainOutlier)
    declared = dict(stmt.domains)
    assert {name: list(v) for name, v in declared.items() if not isinstance(v, Bins)} == expected
    assert {name for name, v in declared.items() if isinstance(v, Bins)} == set(expected_bins)
    request = outlier_from_select(con, q, {"by": list(stmt.by), "domains": dict(stmt.domains)})
    assert {name for name, _ in request.bins or ()} == set(expected_bins)
    schema = Session(con).schema(request)
    assert {a.name: list(a.domain) for a in schema.attributes if not a.ordinal} == expected
    full = " AND ".join(
        f"{quote_identifier(a)} IN ({', '.join(quote_literal(v) for v in vals)})" for a, vals in expected.items()
    ) or "TRUE"
    assert len(rows(con, population_sql(q, full))) == rows(con, f"SELECT count(*) FROM {q.relation_sql}")[0][0]
    [record] = rows(con, record_sql(q, stmt.by))
    for attr in (a for a in schema.attributes if a.ordinal):
        want = expected_bins[attr.name]
        assert [edge_text(e) for e in attr.edges] == [str(e) for e in want["edges"]]
        assert list(attr.domain) == want["labels"]
        value = record[len(q.metric_sql) + list(stmt.by).index(attr.name)]
        space = ContextSpace([attr], [attr.position(value)])
        ranges = []
        for w in range(space.n_admissible):
            mask = space.from_free(w)
            first, last = space.run(mask, 0)
            where = context_predicate(space, mask)
            ranges.append(where)
            selected = rows(con, population_sql(q, where))
            inside = [v for v in rows(con, f"SELECT {quote_identifier(attr.name)} FROM {q.relation_sql}")
                      if v[0] is not None and first <= attr.position(v[0]) <= last]
            assert len(selected) == len(inside), where
        assert ranges == want["ranges"]
