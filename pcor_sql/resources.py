"""Locate the files that ship with the package (sql/ and datasets/) in a wheel or a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    """Return the folder `name` ("sql" or "datasets"): inside an installed wheel, or at the repo top."""
    for candidate in (_PACKAGE / "_shipped" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    from pcor_sql.errors import InternalError

    raise InternalError(f"the shipped folder {name!r} is missing from the installation")


def sql_text(filename: str) -> str:
    """Text of one SQL script from the shipped sql/ folder."""
    return (shipped_dir("sql") / filename).read_text(encoding="utf-8")
