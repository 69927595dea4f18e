import pathlib
import sys

# Run against the checkout even when the package is not installed.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import os
import tempfile

# The CLI keeps its budget ledger in a per-user file by default (DESIGN.md §6). Tests must not
# touch the real one: the per-user folder is a scratch folder, and unless a test says
# otherwise the ledger of in-memory data is in memory (seeded runs allowed, as in a lab).
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="pcor-sql-tests-xdg-")
os.environ["PCOR_SQL_LEDGER"] = ":memory:"

# Property tests check invariants, not speed: a loaded CI machine must not fail them on
# hypothesis's per-example deadline.
from hypothesis import settings as _hypothesis_settings

_hypothesis_settings.register_profile("pcor", deadline=None)
_hypothesis_settings.load_profile("pcor")


import pytest as _pytest


@_pytest.fixture
def ledger_reads(monkeypatch) -> list[int]:
    """How many reads every Ledger made since the test began (`Ledger.read_with`: each read
    outside a transaction — a token's check, a dataset's row, an admission's state — is one)."""
    from pcor_sql.ledger.store import Ledger

    count = [0]
    real = Ledger.read_with

    def counted(self, body):
        count[0] += 1
        return real(self, body)

    monkeypatch.setattr(Ledger, "read_with", counted)
    return count


#: The PostgreSQL server, once a test has asked for it.
_POSTGRES: list = []


@_pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the session (tests/postgres_server.py); skipped (or, with
    PCOR_POSTGRES_TESTS=required, failed) where none can be started. Its `fresh_url()` lends
    the asking test an empty ledger's database until that test ends."""
    from tests.postgres_server import Server, missing, skip_or_fail

    reason = missing()
    if reason is not None:
        skip_or_fail(reason)
    server = Server()
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        server.stop()
        skip_or_fail(f"the PostgreSQL server did not start: {exc}")
    _POSTGRES.append(server)
    yield server
    _POSTGRES.clear()
    server.stop()


@_pytest.fixture(autouse=True)
def _postgres_databases_back():
    """Once a test ends (its own fixtures closed first: an autouse fixture is set up first, so
    torn down last), the databases it was lent may be emptied and lent to the next."""
    yield
    for server in _POSTGRES:
        server.take_back()


#: The ledger's stores (DESIGN.md §11: the same test suite runs on both).
STORES = ("duckdb", "postgresql")


@_pytest.fixture(params=STORES)
def store_kind(request) -> str:
    return request.param


@_pytest.fixture
def ledger_on(request, store_kind):
    """`ledger_on(con)`: a ledger for the data behind DuckDB connection `con` on this test's
    store — the embedded one in `con`'s database, or a fresh PostgreSQL database's. Called
    again with the same `con`, it opens the same ledger again (a reopening)."""
    import warnings

    from pcor_sql.errors import PrivacyWarning
    from pcor_sql.ledger.store import Ledger

    made: list = []
    url: list[str] = []

    def open_for(con, **options):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            if store_kind == "duckdb":
                return Ledger(con, **options)
            from pcor_sql.ledger.postgres_store import PostgresStore

            if not url:
                url.append(request.getfixturevalue("postgres_server").fresh_url())
            made.append(Ledger(store=PostgresStore(url[0], busy_timeout=options.pop("busy_timeout", 10.0)), **options))
            return made[-1]

    yield open_for
    for ledger in made:
        ledger.close()
