"""pcor-sql: private contextual outlier release and private anomaly identification on DuckDB."""

from pcor_sql.api import CoeResult, Explanation, ValidContext, coe, explain_outlier, explain_outliers
from pcor_sql.engine.datasets import load_all as load_datasets
from pcor_sql.engine.datasets import load_dataset
from pcor_sql.engine.ledger import Ledger
from pcor_sql.engine.session import Session
from pcor_sql.errors import BudgetExceeded, InternalError, NoValidContext, PcorError, UserError

__version__ = "0.1.0"

__all__ = [
    "BudgetExceeded",
    "CoeResult",
    "Explanation",
    "InternalError",
    "Ledger",
    "NoValidContext",
    "PcorError",
    "Session",
    "UserError",
    "ValidContext",
    "coe",
    "explain_outlier",
    "explain_outliers",
    "load_dataset",
    "load_datasets",
]
