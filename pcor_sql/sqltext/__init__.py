"""Reading and writing SQL text: the bottom layer every other package may use.

It imports only DuckDB, the standard library and `pcor_sql.errors` — never core, engine,
frontend or cli — so that every reader of SQL text in pcor-sql lexes it the one way DuckDB does.
"""
