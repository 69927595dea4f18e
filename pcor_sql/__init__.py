"""pcor-sql: private contextual outlier release and private anomaly identification on DuckDB."""

__version__ = "0.1.0"
