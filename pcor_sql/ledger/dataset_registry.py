"""Datasets the owner registers for analysts, kept in the ledger (its `datasets` table).

A registered dataset fixes, at registration, everything an analyst's request may depend on
before its cost is reserved: the relation, the record key column, the metric columns, the
context attributes and their domains (frozen: later rows never change them, so no answer
reveals which values exist), the units it reads, and optionally the accounting rule. An
analyst's request is checked against this row alone — never against the data — so a refusal
before the reservation depends only on the request and the registry (DESIGN.md §6).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from pcor_sql.ledger.store import Ledger
from pcor_sql.ledger.charge_rules import utc_now
from pcor_sql.errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Where the domains column keeps how the releasable set was made (no column is named so).
SOURCE_KEY = "$releasable_source"


@dataclass(frozen=True)
class RegisteredDataset:
    """One registered dataset (see the module docstring). `domains` is attribute → the frozen
    values as text, in domain order; for an ordinal attribute its bin labels. `bins` is
    ordinal attribute → its frozen bin edges as text (`core.bins.edge_text`: `18`, `-inf`,
    `2020-01-01`), what an analyst's request declares as its bins."""

    name: str
    relation: str
    key: str
    metrics: tuple[str, ...]
    attributes: tuple[str, ...]
    domains: tuple[tuple[str, tuple[str, ...]], ...]
    units: tuple[str, ...]
    accounting: str | None
    created_at: _dt.datetime | None = None
    bins: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: How many keys analysts may ask about (frozen at registration; None: none declared).
    releasable: int | None = None
    #: How the releasable set was made: "list", or "predicate: <SQL>" (a data-derived set).
    releasable_source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "relation": self.relation, "key": self.key, "metrics": list(self.metrics),
            "attributes": list(self.attributes), "domains": {a: list(v) for a, v in self.domains},
            "bins": {a: list(e) for a, e in self.bins},
            "units": list(self.units), "accounting": self.accounting,
            "created_at": None if self.created_at is None else self.created_at.isoformat(sep=" ", timespec="seconds"),
            "releasable_keys": self.releasable, "releasable_source": self.releasable_source,
        }


def _frozen_json(dataset: RegisteredDataset) -> str:
    """The `domains` column: attribute → values (a list), or for an ordinal attribute
    {"bins": edges, "domain": bin labels} (an object: a domain is always a list, so the two
    never mix up, and rows written before bins existed read unchanged)."""
    binned = dict(dataset.bins)
    frozen: dict[str, Any] = {a: {"bins": list(binned[a]), "domain": list(v)} if a in binned else list(v)
                              for a, v in dataset.domains}
    if dataset.releasable_source is not None:
        # Kept beside the domains (readers look up attributes by name, so older ones skip it).
        frozen[SOURCE_KEY] = dataset.releasable_source
    return json.dumps(frozen)


def check_name(name: object) -> str:
    """A dataset name is an identifier, so an analyst can write `FROM name` unquoted."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(
            f"invalid dataset name {name!r}",
            "use letters, digits and underscores, starting with a letter (e.g. salaries_2024)",
        )
    return name


def add_dataset(ledger: Ledger, dataset: RegisteredDataset, *, replace: bool = False,
                releasable: Sequence[str] | None = None) -> None:
    """Store `dataset`; an existing name is an error unless `replace`. `releasable`: the keys
    analysts may ask about, as `releasable_text` (None: none)."""
    ledger.ensure_writable()
    check_name(dataset.name)

    def body(ops: Any) -> None:
        if ops.dataset_exists(dataset.name) and not replace:
            raise UserError(
                f"dataset {dataset.name!r} is registered already",
                "remove it first (pcor-sql dataset remove NAME), or pass replace=True",
            )
        ops.put_dataset([dataset.name, dataset.relation, dataset.key, list(dataset.metrics), list(dataset.attributes),
                         _frozen_json(dataset), list(dataset.units), dataset.accounting,
                         utc_now(), None if releasable is None else sorted(set(releasable))])

    ledger.transaction(body)


def _from_row(row: tuple) -> RegisteredDataset:
    name, relation, key, metrics, attributes, domains, units, accounting, created, releasable = row
    frozen = json.loads(domains)
    binned = {a: v for a, v in frozen.items() if isinstance(v, dict) and a in attributes}
    return RegisteredDataset(
        name, relation, key, tuple(metrics), tuple(attributes),
        tuple((a, tuple(binned[a]["domain"] if a in binned else frozen[a])) for a in attributes), tuple(units),
        accounting, created, tuple((a, tuple(binned[a]["bins"])) for a in attributes if a in binned),
        releasable, frozen.get(SOURCE_KEY) if isinstance(frozen.get(SOURCE_KEY), str) else None,
    )


def list_datasets(ledger: Ledger) -> tuple[RegisteredDataset, ...]:
    """Every registered dataset, by name."""
    return tuple(_from_row(r) for r in ledger.read(lambda ops: ops.dataset_rows(None), []))


def find_dataset(ledger: Ledger, name: str) -> RegisteredDataset | None:
    rows = ledger.read(lambda ops: ops.dataset_rows(name), [])
    return _from_row(rows[0]) if rows else None


def get_dataset(ledger: Ledger, name: object) -> RegisteredDataset:
    """The registered dataset `name`; an unknown name is a UserError naming the known ones."""
    if not isinstance(name, str):
        raise UserError(f"a dataset is named by a string, got {type(name).__name__}", "pass its registered name")
    found = find_dataset(ledger, name)
    if found is None:
        known = ", ".join(d.name for d in list_datasets(ledger)) or "none yet"
        raise UserError(f"no registered dataset {name!r} (registered: {known})",
                        "register it first: pcor-sql dataset add, or Owner.register(...)")
    return found


def remove_dataset(ledger: Ledger, name: str) -> RegisteredDataset:
    """Unregister `name` (its units keep their budgets and history)."""
    found = get_dataset(ledger, name)
    ledger.ensure_writable()
    ledger.transaction(lambda ops: ops.delete_dataset(name))
    return found


# ---- releasable keys (DESIGN.md §6 "What an analyst may ask about") ------------------------


def releasable_text(value: Any) -> str:
    """A key as the text it is frozen and compared under: a number by its value (42, 42.0 and
    Decimal('42') are "42"), a string as itself, any other SQL value (a date, a UUID) by its
    text. Type-exact: a subclass's `__str__` or `__repr__` is never consulted for str, int, float."""
    if value is None or isinstance(value, bool):
        raise UserError(f"a key cannot be {value!r}", "keys are numbers or strings")
    if isinstance(value, decimal.Decimal) and decimal.Decimal.is_finite(value):
        value = float(decimal.Decimal.__str__(value))
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        number = float.__float__(value)
        if not math.isfinite(number):
            raise UserError(f"a key cannot be {float.__repr__(number)}", "keys are finite numbers or strings")
        return int.__repr__(int(number)) if number.is_integer() else float.__repr__(number)
    if isinstance(value, str):
        return str.__str__(value)
    return str(value)


def releasable_set(ledger: Ledger, name: str) -> frozenset[str] | None:
    """`name`'s frozen releasable keys, as their texts (None: none declared, or no such dataset)."""
    found = ledger.read(lambda ops: ops.releasable(name), None)
    return frozenset(found) if found is not None else None


def releasable_page(ledger: Ledger, name: str, offset: int, limit: int) -> tuple[int, list[str]] | None:
    """(how many, the texts of `limit` of them from `offset`) of `name`'s frozen releasable keys,
    in their frozen (sorted) order; None when none were declared. Public by registration
    (DESIGN.md §6): read in the ledger alone, never the data."""
    row = ledger.read(lambda ops: ops.releasable_page(name, offset, limit), None)
    if not row or row[0] is None:
        return None
    return int(row[0]), list(row[1] or [])


def all_releasable(ledger: Ledger, name: str, keys: Sequence[Any]) -> bool:
    """Whether every key is among `name`'s frozen releasable keys (False when none were
    declared). Read in the ledger alone, never the data, so the answer is the same whether or
    not a key exists."""
    texts = sorted({releasable_text(k) for k in keys})
    return bool(ledger.read(lambda ops: ops.releasable_has_all(name, texts), False))
