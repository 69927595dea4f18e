"""Private (β, r)-anomaly identification in one place: the pure mechanisms (`mechanisms`), ball
counts in numpy (`balls`, `strips`), records read from DuckDB (`points`) and batches of answered
queries (`batch`)."""
