"""Ledger names for relations given as SQL text."""

import pytest

from pcor_sql.engine.dataset_key import dataset_key
from pcor_sql.errors import UserError


def test_dataset_key_is_stable_readable_and_distinguishing():
    key = dataset_key("salaries")
    assert key.startswith("salaries#") and key == dataset_key("  SALARIES ; ")
    query = "SELECT * FROM salaries WHERE dept = 'Nurse'"
    same = "select *\n  from Salaries -- the table\n where dept='Nurse' /* x */;"
    assert dataset_key(query) == dataset_key(same)
    assert dataset_key(query) != dataset_key(query.replace("Nurse", "nurse"))  # literals keep case
    assert dataset_key("read_csv('a.csv')") != dataset_key("read_csv('b.csv')")
    assert dataset_key(query).startswith("select_from_salaries_where_dept_nurse#")
    for bad in ("", "  ;", "-- only a comment"):
        with pytest.raises(UserError):
            dataset_key(bad)
