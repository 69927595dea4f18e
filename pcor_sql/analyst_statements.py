"""An analyst's statement, parsed into the call it means (DESIGN.md §5 "Statements", §6): an
`EXPLAIN OUTLIER` or `IDENTIFY ANOMALY` over a registered dataset with its records picked by key
equality, or `IDENTIFY ANOMALY VALUE (...)` about a point. `Analyst.sql` runs what this parses;
the service reads the dataset a statement names from it before admitting the request (the
same admission as every other analyst request, DESIGN.md §8). Parsing reads no row: DuckDB's
parser for a SELECT, the tokenizer alone for a value statement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pcor_sql.analyst_inputs import plain_data
from pcor_sql.errors import Refused, UserError
from pcor_sql.frontend.keyed import KeyedSelect, parse_keyed_select
from pcor_sql.frontend.statement_parser import ExplainOutlier, IdentifyAnomaly, parse_statement
from pcor_sql.frontend.value_statement import is_value_statement, parse_value_statement

if TYPE_CHECKING:  # annotations only: the analyst's statements are parsed on the Session's parser
    from pcor_sql.pipeline import ReleaseSession


@dataclass(frozen=True)
class AnalystStatement:
    """What a statement asks: `kind` explain, identify (by keys: `keyed`) or value (a point:
    `point`); the dataset it names, and its WITH options (and BY, verifier)."""

    kind: str
    dataset: str
    options: dict[str, Any]
    keyed: KeyedSelect | None = None
    point: dict[str, float] | None = None


def parse_analyst_statement(session: ReleaseSession, text: str) -> AnalystStatement:
    """`text` as the call it means, or the refusal of anything an analyst may not send. The
    session's parser is touched only for a SELECT (a value statement is tokenized alone)."""
    plain_data(text, "the statement")
    if is_value_statement(text):
        value = parse_value_statement(text)
        return AnalystStatement("value", value.dataset, dict(value.options()), point=dict(value.point))
    con = session.access.parser  # parses only: the rows are read through the access
    statement = parse_statement(con, text)
    if isinstance(statement, ExplainOutlier):
        keyed = parse_keyed_select(con, statement.query.original)
        options: dict[str, Any] = dict(statement.options())
        if statement.by is not None:
            options["by"] = statement.by
        if statement.domains is not None:  # a DOMAIN clause: the registration fixed them
            raise Refused("the data owner declares the domains (a DOMAIN clause is the owner's)",
                          "drop the DOMAIN clause")
        if statement.verifier is not None:
            options["verifier"] = statement.verifier
        if len(keyed.columns) != 1:
            raise UserError("EXPLAIN OUTLIER explains one metric", "select one metric column")
        return AnalystStatement("explain", keyed.dataset, options, keyed=keyed)
    if isinstance(statement, IdentifyAnomaly):
        keyed = parse_keyed_select(con, statement.query.original, multiple=True)
        return AnalystStatement("identify", keyed.dataset, dict(statement.options()), keyed=keyed)
    raise Refused("an analyst may run only EXPLAIN OUTLIER and IDENTIFY ANOMALY statements",
                  "ask the data owner for anything else")


def statement_dataset(session: ReleaseSession, text: str) -> str:
    """The registered dataset `text` names (what the service checks this analyst may use)."""
    return parse_analyst_statement(session, text).dataset
