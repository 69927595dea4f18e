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
