"""pcor-sql's analyst client: `connect(url, token)` to a data owner's pcor-sql service, and the
`pcor-sql-remote` command line. HTTP only (httpx): no DuckDB, no data — an analyst holds none.

    import pcor_sql_client
    with pcor_sql_client.connect("http://127.0.0.1:8000", token) as analyst:
        print(analyst.explain_outlier("salaries", 42, epsilon=0.2).summary)

The full package re-exports this very code as `pcor_sql.connect` (and its errors as
`pcor_sql.errors`'): one client, installed alone (`pip install ./client`) or with pcor-sql.
"""

from pcor_sql_client.analyst_interface import AnalystInterface, Answer, Cost, Explanation
from pcor_sql_client.errors import BudgetExceeded, PcorError, Refused, RequestFailed, UserError
from pcor_sql_client.remote_analyst import RemoteAnalyst, connect
from pcor_sql_client.remote_results import RemoteAnswer, RemoteCost, RemoteExplanation, RemoteNotReleased

__version__ = "0.1.0"

__all__ = ["AnalystInterface", "Answer", "BudgetExceeded", "Cost", "Explanation", "PcorError", "Refused",
           "RemoteAnalyst", "RemoteAnswer", "RemoteCost", "RemoteExplanation",
           "RemoteNotReleased", "RequestFailed", "UserError", "connect"]
