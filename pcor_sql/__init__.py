"""pcor-sql: private contextual outlier release and private anomaly identification on DuckDB.

The public names load on first use, so `pcor-sql --help` does not pay for scipy and DuckDB.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

# The analyst's client (`pcor_sql_client`, which `pcor_sql.errors` and `pcor_sql.connect` import)
# is its own distribution in client/; an installed pcor-sql carries a copy in its wheel. Run from a
# source checkout (`PYTHONPATH=checkout`, or an editable install, which copies force-included
# files), pcor_sql takes the checkout's client beside it, never an installed copy of another age.
_CHECKOUT_CLIENT = Path(__file__).resolve().parents[1] / "client"
if (_CHECKOUT_CLIENT / "pcor_sql_client" / "__init__.py").is_file() and str(_CHECKOUT_CLIENT) not in sys.path:
    sys.path.insert(0, str(_CHECKOUT_CLIENT))

__version__ = "0.1.0"

_EXPORTS = {
    "explain_outlier": "pcor_sql.api",
    "explain_outliers": "pcor_sql.api",
    "identify_anomaly": "pcor_sql.api",
    "identify_anomalies": "pcor_sql.api",
    "coe": "pcor_sql.api",
    "outlier_request": "pcor_sql.frontend.request_builders",
    "anomaly_request": "pcor_sql.frontend.request_builders",
    "OutlierRequest": "pcor_sql.request_values",
    "AnomalyRequest": "pcor_sql.request_values",
    "VerifierSpec": "pcor_sql.request_values",
    "Explanation": "pcor_sql.results",
    "CoeResult": "pcor_sql.results",
    "ValidContext": "pcor_sql.results",
    "AnomalyResult": "pcor_sql.results",
    "NotReleased": "pcor_sql.results",
    "sql": "pcor_sql.statement_runner",
    "run_script": "pcor_sql.statement_runner",
    "Session": "pcor_sql.session",
    "Engine": "pcor_sql.core.choices",
    "Owner": "pcor_sql.owner",
    "Analyst": "pcor_sql.analyst",
    # The analyst's client is the light one's single copy (client/, `pcor-sql-client`).
    "connect": "pcor_sql_client",
    "RemoteAnalyst": "pcor_sql_client",
    "AnalystExplanation": "pcor_sql.results",
    "AnalystAnswer": "pcor_sql.results",
    "RegisteredDataset": "pcor_sql.ledger.dataset_registry",
    "VerifierRegistry": "pcor_sql.core.verifiers.registry",
    "default_registry": "pcor_sql.core.verifiers.registry",
    "Ledger": "pcor_sql.ledger.store",
    "load_dataset": "pcor_sql.engine.datasets",
    "planted_outliers": "pcor_sql.engine.datasets",
    "PcorError": "pcor_sql.errors",
    "UserError": "pcor_sql.errors",
    "InternalError": "pcor_sql.errors",
    "BudgetExceeded": "pcor_sql.errors",
    "NoValidContext": "pcor_sql.errors",
    "Refused": "pcor_sql.errors",
    "RequestFailed": "pcor_sql.errors",
    "PrivacyWarning": "pcor_sql.errors",
}
_RENAMED = {"load_datasets": ("pcor_sql.engine.datasets", "load_all")}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __dir__() -> list[str]:
    """The public API (loaded or not) and the module's dunders; not its own helper imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _RENAMED:
        module, attr = _RENAMED[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'pcor_sql' has no attribute {name!r}")
    globals()[name] = value
    return value
