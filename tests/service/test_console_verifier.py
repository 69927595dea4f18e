"""The console's overview says which verifier each latest request used (DESIGN.md §9: each row
says what was asked — dataset, key, verifier, search, ε)."""

from __future__ import annotations

import warnings

from pcor_sql.service.console_pages import overview_page, verifier_of
from pcor_sql.service.owner_plane import OwnerPlane
from tests.service.console_fixture import OUTLIERS, make_owner


def test_the_overview_names_the_verifier_of_each_latest_request(tmp_path):
    owner, _ = make_owner(str(tmp_path / "ledger.duckdb"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        owner.analyst().explain_outlier("staff", OUTLIERS[0], epsilon=0.1, verifier="grubbs")
        owner.analyst().explain_outlier("staff", OUTLIERS[1], epsilon=0.1, verifier="zscore")
    page = overview_page(OwnerPlane(owner).overview(), "csrf")
    latest = page[page.index("Latest requests"):]
    assert "verifier grubbs" in latest and "verifier zscore" in latest, latest[:3000]


def test_the_verifier_is_read_from_the_statement_with_its_options():
    text = "EXPLAIN OUTLIER SELECT pay FROM staff WHERE id = 10 USING lof(k=10, threshold=1.5) WITH (epsilon = 0.1)"
    assert verifier_of(text) == "lof(k=10, threshold=1.5)"
    assert verifier_of("IDENTIFY ANOMALY SELECT pay FROM staff WITH (beta = 2)") is None
