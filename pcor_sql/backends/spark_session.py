"""Finding and starting Spark, and Spark's errors as pcor-sql reports them.

pyspark is optional (`pip install 'pcor-sql[spark]'`) and needs a Java runtime; nothing here
imports it until a Spark job is asked for, so pcor-sql imports and runs without either.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from pcor_sql.errors import UserError

INSTALL_FIX = "pip install 'pcor-sql[spark]' and install Java 17 (java on PATH or JAVA_HOME set)"


def is_spark_session(obj: Any) -> bool:
    """True for a pyspark SparkSession, without importing pyspark."""
    return any(c.__name__ == "SparkSession" and c.__module__.startswith("pyspark.") for c in type(obj).__mro__)


def require_spark() -> Any:
    """The pyspark module, or one UserError naming the extra and Java."""
    try:
        import pyspark  # noqa: F401 — the optional extra
        from pyspark.sql import SparkSession  # noqa: F401
    except ImportError:
        raise UserError("the Spark engine needs pyspark, which is not installed", INSTALL_FIX) from None
    if not (java_home_ok() or shutil.which("java")):
        raise UserError("the Spark engine needs a Java runtime, and none was found", INSTALL_FIX)
    import pyspark

    return pyspark


def java_home_ok() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home) and os.path.exists(os.path.join(home, "bin", "java"))


def start_spark(master: str = "local[*]", app_name: str = "pcor-sql", **conf: str) -> Any:
    """A SparkSession on `master` (an existing one of this process is reused, as Spark does).
    The UI and the console progress bar are off: pcor-sql's output is its own."""
    require_spark()
    from pyspark.sql import SparkSession

    if not isinstance(master, str) or not master.strip():
        raise UserError(f"invalid Spark master {master!r}", "pass e.g. --spark-master 'local[*]' or spark://host:7077")
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    running = SparkSession.getActiveSession()
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start (no Java) or the master refused
        raise UserError(f"cannot start Spark on {master}: {first_line(exc)}", INSTALL_FIX) from None
    if running is None:
        # Ours: Spark's own error logging would repeat, with JVM traces, what pcor-sql reports
        # in one line. A session the caller started keeps its settings.
        spark.sparkContext.setLogLevel("OFF")
    return spark


def first_line(exc: BaseException) -> str:
    """The first meaningful line of a Spark (or py4j) error: Spark's own message, no JVM trace."""
    text = str(getattr(exc, "getMessage", lambda: None)() or exc)
    for line in text.strip().splitlines():
        line = line.strip()
        if line and not line.startswith(("==", "at ", "An error occurred while calling")):
            return line
    return type(exc).__name__


def spark_error(exc: BaseException, fix: str) -> UserError:
    return UserError(first_line(exc), fix)
