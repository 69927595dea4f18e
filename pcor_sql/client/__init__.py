"""The analyst's side of the service: `connect(url, token)` and what it returns (no DuckDB)."""

from pcor_sql.client.remote_analyst import RemoteAnalyst, connect
from pcor_sql.client.remote_results import RemoteAnswer, RemoteExplanation

__all__ = ["RemoteAnalyst", "RemoteAnswer", "RemoteExplanation", "connect"]
