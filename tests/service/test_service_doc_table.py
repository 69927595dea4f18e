"""docs/service.md's endpoint table lists every endpoint of the analysts' listener, as the one
table of endpoints (`endpoint_table.ANALYST_ENDPOINTS`, DESIGN.md §8) declares them: none
missing, none that the service does not serve."""

from __future__ import annotations

import re
from pathlib import Path

from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def documented() -> set[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("## Endpoints", 1)[1].split("\n\n", 2)[1]
    return {(m, p) for m, p in re.findall(r"^\| `(GET|POST|PUT|DELETE) (/[^`?\s]*)", table, flags=re.M)}


def test_the_endpoint_table_of_the_docs_is_the_services():
    served = {(e.method, e.path) for e in ANALYST_ENDPOINTS}
    assert documented() == served, (sorted(served - documented()), sorted(documented() - served))
