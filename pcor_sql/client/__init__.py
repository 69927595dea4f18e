"""The analyst's side of the service: `connect(url, token)` and what it returns (no DuckDB).

The code is the light client's, `pcor_sql_client` (client/, its own distribution
`pcor-sql-client`, which needs httpx only): one copy, imported here, by `pcor_sql.connect` and by
`pcor-sql remote`; pcor-sql's wheel carries it.
"""

from pcor_sql_client import RemoteAnalyst, RemoteAnswer, RemoteExplanation, connect

__all__ = ["RemoteAnalyst", "RemoteAnswer", "RemoteExplanation", "connect"]
