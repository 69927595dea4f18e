"""`pcor-sql serve`'s bad options: one line naming the problem and the fix, a non-zero exit, and
nothing served (checked before the sockets are bound or the database is opened)."""

from __future__ import annotations

import pytest

from tests.cli.cli_helpers import assert_error, invoke


@pytest.mark.parametrize("args, needles", [
    (["--duckdb-threads", "0"], ["--duckdb-threads must be auto or a whole number ≥ 1", "--duckdb-threads auto"]),
    (["--duckdb-threads", "many"], ["--duckdb-threads must be auto or a whole number ≥ 1", "got 'many'"]),
    (["--max-work", "0"], ["--max-work must be ≥ 1"]),
    (["--searches", "cores"], ["--searches must be processes or threads"]),
    (["--ssl-keyfile", "key.pem"], ["TLS needs both"]),
])
def test_a_bad_option_is_one_line(tmp_path, args, needles):
    result = invoke("serve", "--db", str(tmp_path / "data.duckdb"), *args)
    assert_error(result, *needles)
    assert not (tmp_path / "data.duckdb").exists()
