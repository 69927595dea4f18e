"""The options that say where a command's rows are read and where its ε is charged (--db,
--engine, --spark-master, and for charged commands --ledger, --allow-seeded), given to a
command as one `DataFlags` through its `data` parameter."""

from __future__ import annotations

import functools
import inspect
import typing
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pcor_sql.cli import parameters as o


@dataclass(frozen=True)
class DataFlags:
    db: Path | None = None
    engine: o.Engine = o.Engine.DUCKDB
    spark_master: str = "local[*]"
    ledger: str | None = None
    allow_seeded: bool = False

    def owner(self, reads: str) -> AbstractContextManager[Any]:
        """The owner's handle for a charged command reading `reads` (`database.open_owner`)."""
        from pcor_sql.cli.database import open_owner

        return open_owner(self.db, self.ledger, reads=reads, allow_seeded=self.allow_seeded,
                          engine=self.engine.value, spark_master=self.spark_master)

    def session(self, reads: str) -> AbstractContextManager[Any]:
        """The owner's handle for uncharged work, its ledger never opened (`database.open_session`)."""
        from pcor_sql.cli.database import open_session

        return open_session(self.db, self.engine.value, self.spark_master, reads=reads)


def _flags(charged: bool) -> list[inspect.Parameter]:
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD  # as the command's own `data`
    out = [inspect.Parameter("db", keyword, default=None, annotation=o.Db),
           inspect.Parameter("engine", keyword, default=o.Engine.DUCKDB, annotation=o.EngineOption),
           inspect.Parameter("spark_master", keyword, default="local[*]", annotation=o.SparkMaster)]
    if charged:
        out += [inspect.Parameter("ledger", keyword, default=None, annotation=o.Ledger),
                inspect.Parameter("allow_seeded", keyword, default=False, annotation=o.AllowSeeded)]
    return out


def data_options(charged: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Put the data options where the command's `data` parameter stands (so --help keeps its
    order); the command receives them as `data=DataFlags(...)`. `charged`: with --ledger and
    --allow-seeded."""
    flags = _flags(charged)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        # Resolved here: the command's annotations are strings in its own module's namespace.
        hints = typing.get_type_hints(command, include_extras=True)
        parameters: list[inspect.Parameter] = []
        for p in signature.parameters.values():
            parameters += flags if p.name == "data" else [p.replace(annotation=hints.get(p.name, p.annotation))]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            data = DataFlags(**{p.name: kwargs.pop(p.name) for p in flags})
            return command(*args, data=data, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate
