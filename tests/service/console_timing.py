"""The owner console's server time per page (DESIGN.md §9 "The owner console") on a ledger of N history rows: the test
fixture's synthetic history (`tests/service/console_fixture.py`: three analysts, two datasets,
requests over 14 days), each page fetched in-process through Starlette's test client after a
login — the time from request to full response body, DuckDB reads and HTML rendering included.

    python -m tests.service.console_timing --rows 10000 --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

#: Under the session's base path (`/console/<key>`, where the login sends the browser).
PAGES = ("", "/datasets", "/analysts", "/history", "/history?analyst=bob&outcome=answered&offset=2000", "/spending",
         "/audit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from pcor_sql.service.console_app import console_routes
    from pcor_sql.service.owner_plane import OwnerPlane
    from tests.service.console_fixture import OWNER_TOKEN, check_token, make_owner

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        owner, _ = make_owner(str(Path(folder) / "ledger.duckdb"), history=args.rows)
        print(f"ledger of {args.rows} history rows built in {time.perf_counter() - started:.1f} s")
        client = TestClient(Starlette(routes=console_routes(OwnerPlane(owner), check_token)))
        base = client.post("/console/login", data={"token": OWNER_TOKEN}, follow_redirects=False).headers["location"]
        print(f"{'page':60s} {'KiB':>7s} {'median ms':>10s} {'min ms':>8s}")
        for page in PAGES:
            path = base + page
            client.get(path)  # warm: DuckDB's first read of the tables
            times = []
            for _ in range(args.repeat):
                begun = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - begun) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            print(f"{'/console/<key>' + page:60s} {len(response.content) / 1024:7.1f} {statistics.median(times):10.1f} {min(times):8.1f}")


if __name__ == "__main__":
    main()
