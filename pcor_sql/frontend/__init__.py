"""The front end: parse statements and rewrite them into plans and SQL (nothing is released here).

- `parse_statement(con, text)` → `ExplainOutlier` | `IdentifyAnomaly` | `Passthrough`
- `parse_select(con, text, multiple=False)` → `SelectQuery`; `expand_star(con, q)`
- rewrites: `population_sql`, `explanation_sql`, `record_sql`
- `parse_start_predicate(con, text, attributes)` → attribute → values
- `split_statements(text)` for scripts; `parse_by`, `parse_domain_declaration(s)` for the CLI
"""

from pcor_sql.frontend.compact import parse_by, parse_domain_declaration, parse_domain_declarations
from pcor_sql.frontend.rewrite import explanation_sql, metric_alias, population_sql, record_sql
from pcor_sql.frontend.select import SelectQuery, expand_star, parse_select
from pcor_sql.frontend.start_predicate import parse_start_predicate
from pcor_sql.frontend.statement_parser import (
    ExplainOutlier,
    IdentifyAnomaly,
    Passthrough,
    Statement,
    VerifierSpec,
    is_pcor_statement,
    parse_statement,
)
from pcor_sql.sqltext.tokens import split_statements

__all__ = [
    "ExplainOutlier",
    "IdentifyAnomaly",
    "Passthrough",
    "SelectQuery",
    "Statement",
    "VerifierSpec",
    "expand_star",
    "explanation_sql",
    "is_pcor_statement",
    "metric_alias",
    "parse_by",
    "parse_domain_declaration",
    "parse_domain_declarations",
    "parse_select",
    "parse_start_predicate",
    "parse_statement",
    "population_sql",
    "record_sql",
    "split_statements",
]
