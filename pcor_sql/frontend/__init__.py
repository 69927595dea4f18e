"""The front end: parse statements and rewrite them into plans and SQL (nothing is released here).

- `parse_select(con, text, multiple=False)` → `SelectQuery`; `expand_star(con, q)`
- rewrites: `population_sql`, `explanation_sql`, `record_sql`
- `split_statements(text)` for scripts; `parse_by`, `parse_domain_declaration(s)` for the CLI
"""

from pcor_sql.frontend.compact import parse_by, parse_domain_declaration, parse_domain_declarations
from pcor_sql.frontend.rewrite import explanation_sql, metric_alias, population_sql, record_sql
from pcor_sql.frontend.select import SelectQuery, expand_star, parse_select
from pcor_sql.frontend.tokens import split_statements

__all__ = [
    "SelectQuery",
    "expand_star",
    "explanation_sql",
    "metric_alias",
    "parse_by",
    "parse_domain_declaration",
    "parse_domain_declarations",
    "parse_select",
    "population_sql",
    "record_sql",
    "split_statements",
]
