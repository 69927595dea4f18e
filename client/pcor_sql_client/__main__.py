"""`python -m pcor_sql_client ...`: the same as `pcor-sql-remote ...`."""

from pcor_sql_client.cli import run

run()
