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
