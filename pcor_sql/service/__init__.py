"""The analyst service (DESIGN.md §6, §8) and the owner's plane (§9): analysts hold a token and
send JSON over HTTP; the data, the Session and the ledger stay in this process, and the owner
reaches the running service on a loopback listener of its own.

    import pcor_sql, pcor_sql.service, duckdb, uvicorn
    owner = pcor_sql.Owner(duckdb.connect("salaries.duckdb"))
    uvicorn.run(pcor_sql.service.app(owner), host="127.0.0.1", port=8000)   # or: pcor-sql serve

    analysts = pcor_sql.service.app(owner)
    owners = pcor_sql.service.owner_app(analysts.state.service, token)      # serve on 127.0.0.1 only

Needs the `service` extra (`pip install 'pcor-sql[service]'`: starlette, uvicorn, httpx).
"""

from pcor_sql.service.http_app import app
from pcor_sql.service.owner_app import owner_app

__all__ = ["app", "owner_app"]
