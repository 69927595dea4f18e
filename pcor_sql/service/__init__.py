"""The analyst service (DESIGN.md §6, §8): analysts hold a token and send JSON over HTTP; the
data, the Session and the ledger stay in this process.

    import pcor_sql, pcor_sql.service, duckdb, uvicorn
    owner = pcor_sql.Owner(duckdb.connect("salaries.duckdb"))
    uvicorn.run(pcor_sql.service.app(owner), host="127.0.0.1", port=8000)   # or: pcor-sql serve

Needs the `service` extra (`pip install 'pcor-sql[service]'`: starlette, uvicorn, httpx).
"""

from pcor_sql.service.http_app import app

__all__ = ["app"]
