"""Every endpoint the service serves, on both listeners, in one list (DESIGN.md §8, §9): the
JSON API's rows (documented in the OpenAPI documents) and the HTML pages' (the console's rows and
the analyst page), so a test can hold each listener's routes and the docs to them. Its own module:
it reads every table, and `owner_app` imports `openapi_document`.
"""

from __future__ import annotations


def every_endpoint() -> list[tuple[str, str, str, str]]:
    """Every endpoint the service serves, on both listeners, as (listener, method, path, summary):
    the analysts' and the owner's JSON API (`ANALYST_ENDPOINTS`, `OWNER_ENDPOINTS`, documented
    above) and the owner console's pages and forms (`console_app.CONSOLE_ENDPOINTS`, HTML, so in
    no OpenAPI document), and the analysts' page (`analyst_page`, HTML: the JSON API underneath).
    Each listener's routes are made from these rows alone."""
    from pcor_sql.service.analyst_endpoints import ANALYST_ENDPOINTS
    from pcor_sql.service.analyst_page import analyst_page_route
    from pcor_sql.service.console_app import CONSOLE_ENDPOINTS
    from pcor_sql.service.owner_app import OWNER_ENDPOINTS

    page = analyst_page_route()
    return ([("analyst", e.method, e.path, e.summary) for e in ANALYST_ENDPOINTS]
            + [("analyst", m, page.path, "The analyst page (HTML over the JSON API)") for m in sorted(page.methods - {"HEAD"})]
            + [("owner", e.method, e.path, e.summary) for e in OWNER_ENDPOINTS]
            + [("owner", e.method, e.path, e.summary) for e in CONSOLE_ENDPOINTS])
