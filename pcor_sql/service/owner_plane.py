"""What the owner reads and does through a running service (DESIGN.md §9), as plain data: the
owner's JSON API (`/v1/owner/...`) and the console both call these, on the service's one Owner,
so the console shows exactly what the API answers.

Every method reads or writes the ledger through the owner's handle (`pcor_sql.owner.Owner`) or
asks the ledger's store (DESIGN.md §11: no SQL here): nothing bypasses the checks the CLI's
commands go through. Owner-only: none of this is
reachable from the analysts' listener.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path
from typing import Any, Sequence

from pcor_sql.errors import UserError
from pcor_sql.ledger.records import ReleaseRecord
from pcor_sql.jsonable import jsonable
from pcor_sql.service.private_files import open_private_append

#: The outcomes a history row can have (the console's filter offers these).
OUTCOMES = ("answered", "failed", "interrupted", "running", "charged")
MAX_PAGE = 500
#: Points per spending series at most (a chart is a few hundred pixels wide).
SERIES_POINTS = 400


class AuditLog:
    """One JSON line per request (DESIGN.md §9): time, analyst, endpoint, dataset, ε, outcome,
    HTTP status, latency — never a token, never a query string. Appended to `path` when given
    (flushed per line; a regular 0600 file of ours, never reached through a link, else refused:
    `private_files.open_private_append`) and kept in memory (the latest `keep`) for the console."""

    def __init__(self, path: Path | None = None, keep: int = 1000):
        self.path = path
        self._lines: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._file = open_private_append(path) if path is not None else None

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=True, separators=(",", ":"))
        with self._lock:
            self._lines.append(entry)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def latest(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._lines)[-limit:][::-1]

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _row(record: ReleaseRecord) -> dict[str, Any]:
    out = jsonable({name: getattr(record, name) for name in record.__dataclass_fields__})
    out["shown_outcome"] = record.shown_outcome
    out["asked"] = record.statement or ""
    return out


class OwnerPlane:
    """The owner's reads and commands on the served ledger (see the module docstring)."""

    def __init__(self, owner: Any, audit: AuditLog | None = None):
        self.owner = owner
        self.ledger = owner.ledger
        self.audit = audit or AuditLog()

    # ---- reads ------------------------------------------------------------------------------

    def units(self) -> list[dict[str, Any]]:
        """Per unit and notion: spent, limit (and where it comes from), releases, public."""
        return [jsonable(s) for s in self.owner.status()]

    def analysts(self) -> list[dict[str, Any]]:
        """Every analyst: created, revoked, datasets, per notion quota and spent, and how many
        requests they made by outcome."""
        counts: dict[str, dict[str, int]] = {}
        for name, outcome, n in self.ledger.read(lambda ops: ops.request_counts(), []):
            counts.setdefault(name, {})[outcome] = int(n)
        out = []
        for info in self.owner.analysts():
            row = info.as_dict()
            row["revoked"] = info.revoked
            row["requests"] = counts.get(info.name, {})
            out.append(row)
        return out

    def datasets(self) -> list[dict[str, Any]]:
        """The registry: each dataset with its releasable-key count and its units' limits."""
        statuses = {(s["unit"], s["notion"]): s for s in self.units()}
        out = []
        for d in self.owner.datasets():
            row = d.as_dict()
            row["limits"] = [statuses[key] for key in sorted(statuses) if key[0] in d.units]
            out.append(row)
        return out

    def history(self, *, analyst: str | None = None, dataset: str | None = None, outcome: str | None = None,
                limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """History rows, newest first, filtered and paged: {rows, total}. Each row says what was
        asked (`asked`: the statement or request) and its outcome."""
        if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
            raise UserError(f"limit must be 1 to {MAX_PAGE}", "e.g. limit=50")
        if type(offset) is not int or offset < 0:
            raise UserError("offset must be a whole number ≥ 0", "e.g. offset=50")
        if outcome is not None and outcome not in OUTCOMES:
            raise UserError(f"unknown outcome {outcome!r}", f"use one of: {', '.join(OUTCOMES)}")
        filters = [(column, value) for column, value in (("analyst", analyst), ("dataset", dataset), ("outcome", outcome))
                   if value is not None and value != ""]
        total, rows = self.ledger.read(lambda ops: ops.history_page(filters, limit, offset), (0, []))
        return {"rows": [_row(ReleaseRecord(*r)) for r in rows], "total": int(total), "limit": limit, "offset": offset}

    def spending(self, by: str = "unit", points: int = SERIES_POINTS) -> dict[str, Any]:
        """ε spent over time: per (unit, notion) or per (analyst, notion), as cumulative series of
        [ISO time, total] points — charged rows only (refunded ones gave their ε back). Summed in
        the store, and thinned to the last point of each of at most `points` time slices per series (a
        chart cannot show more), so a page costs the same on 10,000 rows as on 1,000,000."""
        if by not in ("unit", "analyst"):
            raise UserError(f"spending by {by!r}?", "by unit or by analyst")
        series: dict[str, list[list[Any]]] = {}
        for who, moment, total in self.ledger.read(lambda ops: ops.spending(by, int(points)), []):
            series.setdefault(who, []).append([jsonable(moment), float(total)])
        return {"by": by, "series": series}

    def overview(self, latest: int = 10) -> dict[str, Any]:
        return {"units": self.units(), "analysts": self.analysts(), "latest": self.history(limit=latest)["rows"],
                "audit": self.audit.latest(latest)}

    # ---- commands -----------------------------------------------------------------------------

    def add_analyst(self, name: str, quota: float | None = None, notion: str | None = None,
                    datasets: Sequence[str] | None = None) -> str:
        return self.owner.add_analyst(name, quota=quota, notion=notion, datasets=datasets)

    def revoke(self, name: str) -> dict[str, Any]:
        return self.owner.revoke_analyst(name).as_dict()

    def rotate(self, name: str) -> str:
        return self.owner.rotate_analyst(name)

    def set_quota(self, name: str, epsilon: float | None, notion: str | None = None,
                  dataset: str | None = None) -> None:
        self.owner.set_analyst_quota(name, epsilon, notion=notion, dataset=dataset)
