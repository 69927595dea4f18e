"""Which catalog entry a table name in a query binds to, decided from one snapshot of the catalog.

DuckDB binds `n`, `s.n` or `c.s.n` to the first table or view (they share one namespace) along
its search order — temp first, a view's own catalog and schema for names inside it, the session's
`search_path` or current schema, `s` read as a schema or else as a catalog — and a name found
nowhere is a replacement scan (a file path or a Python variable). That order has many cases, and
a wrong guess would charge the wrong data. So it is not replayed: every entry the name could mean
under any search order is collected, and the binding is decided only where that is exact:
- no entry: a replacement scan;
- one entry: that one (DuckDB bound the query, so the name reached it — unless the name is
  also a file path, which is refused: off the search path the file would be read instead);
- several entries, all tables: any of them — the plan names the table actually scanned;
- several entries, a view among them (a temp view shadowing a view, say): refused, since which
  view's body is read cannot be known without replaying the order.
"""

from __future__ import annotations

from typing import Any

from pcor_sql.engine.unit_names import canonical_name, low
from pcor_sql.errors import UserError

Entry = tuple[str, str, str]
PATH_SUFFIXES = (".parquet", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".txt", ".gz", ".zst", ".arrow")


def looks_like_path(text: str) -> bool:
    return (
        any(ch in text for ch in "/\\*?[") or text.startswith(("~", "."))
        or text.lower().endswith(PATH_SUFFIXES) or "://" in text
    )


class Catalog:
    """The tables (with comments) and views as one query saw them."""

    def __init__(self, tables: list, views: list):
        self.tables = {low(r[:3]): (tuple(r[:3]), r[3]) for r in tables}
        self.by_name: dict[str, list[tuple[str, Entry]]] = {}
        for parts, _ in self.tables.values():
            self.by_name.setdefault(parts[2].lower(), []).append(("table", parts))
        for r in views:
            self.by_name.setdefault(str(r[2]).lower(), []).append(("view", tuple(r)))

    def entries(self, ref: dict[str, Any]) -> list[tuple[str, Entry]]:
        """Every table or view the reference could bind to under any search order."""
        catalog = (ref.get("catalog_name") or "").lower()
        schema = (ref.get("schema_name") or "").lower()
        found = self.by_name.get(str(ref["table_name"]).lower(), [])
        if catalog:
            return [e for e in found if low(e[1][:2]) == (catalog, schema)]
        if schema:
            return [e for e in found if schema in (e[1][0].lower(), e[1][1].lower())]
        return list(found)

    def binding(self, ref: dict[str, Any], label: str) -> tuple[str, Entry] | None:
        """('view', entry) when the reference binds to that view, ('table', entry) when to a
        table (one of the entries: the plan says which), None for a replacement scan."""
        found = self.entries(ref)
        spelled = canonical_name(tuple(p for p in (ref.get("catalog_name"), ref.get("schema_name"), ref["table_name"]) if p))
        if not found:
            return None
        if looks_like_path(str(ref["table_name"])):
            raise UserError(
                f"{label} reads {spelled!r}, which names both a file and the {found[0][0]} {canonical_name(found[0][1])}",
                "rename the table or view, or give the file's path another way (read_parquet('...'))",
            )
        if len(found) == 1 or all(kind == "table" for kind, _ in found):
            return found[0]
        names = " and ".join(f"the {kind} {canonical_name(parts)}" for kind, parts in sorted(found, key=lambda e: e[1])[:3])
        raise UserError(
            f"{label} reads {spelled}, which may mean {names}: the engine charges only what it can attribute exactly",
            "qualify the name fully (catalog.schema.name) in the query and in the views, or drop or rename one of them",
        )

    def comment(self, parts: tuple[str, ...]) -> str | None:
        found = self.tables.get(low(parts))
        return found[1] if found else None

    def spelled(self, parts: tuple[str, ...]) -> tuple[str, ...]:
        """The table's parts as the catalog spells them (the plan may differ in case)."""
        found = self.tables.get(low(parts))
        return found[0] if found else parts
