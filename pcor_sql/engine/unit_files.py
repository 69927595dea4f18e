"""File units: which files a list of paths, globs and `file:` URIs names, as `file:/real/path`.

DuckDB's own `glob()` expands every local path, so a path means here what it means to DuckDB's
readers: relative paths follow `file_search_path` and the working directory, a glob charges every
file it reads, and `file:` URIs (`file:///d/x.parquet`, `file:/d/x.parquet`,
`file://localhost/d/x.parquet`) lose their scheme as DuckDB strips it. The result is made
absolute with symlinks, `.` and `..` resolved (`os.path.realpath`), so every spelling of one
path is one unit.

A file's name is its real path, and a hard link would be a second path to the same bytes: a
file with more than one hard link is refused (one line naming the fix), so no link can open a
second account. Naming files by (device, inode) instead was rejected: device numbers change
across reboots and container restarts (overlay and NFS mounts get anonymous numbers), and an
atomic rewrite gives a new inode, and either would silently open a fresh account for the same
data. Remote URIs (`s3://`, `https://`, ...) are kept as given.
"""

from __future__ import annotations

import os

import duckdb

from pcor_sql.engine.unit_names import FIX, Unit
from pcor_sql.errors import UserError

_GLOB_CHARS = "*?["


def is_remote(path: str) -> bool:
    """A URI of a scheme other than `file:` (which DuckDB reads as a local path)."""
    return "://" in path and not path.startswith("file:")


def file_units(con: duckdb.DuckDBPyConnection, paths: list[str]) -> tuple[Unit, ...]:
    """`file:` units of every file the paths and globs match, by DuckDB's glob(), in one statement."""
    unique = list(dict.fromkeys(paths))
    local = [p for p in unique if not is_remote(p) or any(c in p for c in _GLOB_CHARS)]
    units = {Unit("file:" + p, "file") for p in unique if p not in local}
    if local:
        union = " UNION ALL ".join(f"SELECT {i} AS i, file FROM system.main.glob(${i + 1})" for i in range(len(local)))
        try:
            rows = con.execute(union, local).fetchall()
        except duckdb.Error as exc:
            raise UserError(f"cannot list the files {local[0]!r}: {str(exc).splitlines()[0]}", "give a readable path") from None
        matched = {i for i, _ in rows}
        missing = [p for i, p in enumerate(local) if i not in matched]
        if missing:
            raise UserError(f"{missing[0]!r} is not a table, a view or an existing file", FIX)
        units |= {Unit("file:" + one_link_path(f), "file") for _, f in rows if not is_remote(f)}
        units |= {Unit("file:" + f, "file") for _, f in rows if is_remote(f)}
    return tuple(sorted(units))


def one_link_path(found: str) -> str:
    """The real path of a file glob() found, refused if another hard link names the same file."""
    path = os.path.realpath(os.path.expanduser(found))
    try:
        links = os.stat(path).st_nlink
    except OSError as exc:
        raise UserError(f"cannot read the file {path!r}: {exc.strerror}", "give a readable path") from None
    if links > 1:
        raise UserError(
            f"the file {path!r} has {links} hard links: a file is charged by its path, and each link would "
            "open its own budget account for the same data",
            f"remove the other links, or replace the file by a copy of itself (cp {path} {path}.tmp && mv {path}.tmp {path})",
        )
    return path
