"""One conversion of library values to JSON data, used by every place that writes JSON: the CLI's
`json`/`jsonl`/`csv` output, the analyst service's HTTP responses and the owner plane.

The output is built of exact JSON types only (`dict`, `list`, `str`, `int`, `float`, `bool`,
None: never a subclass, which could carry its own `__str__` across the analyst boundary, DESIGN
§6): enums as their value, dataclasses as objects (their `as_dict()` when they have one), mappings
as objects with text keys, sequences and sets as lists, dates and times as ISO 8601 text, a
timedelta as its seconds, decimals and other real numbers as floats, NaN and ±inf as null, bytes
as hex, numpy scalars and arrays as their Python values, anything else as its text.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import math
import numbers
from typing import Any, Mapping


def jsonable(value: Any) -> Any:
    """`value` as JSON data of exact types (see the module docstring)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if callable(getattr(value, "as_dict", None)):
            return jsonable(value.as_dict())
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (_dt.date, _dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        return jsonable(float(value))
    if callable(getattr(value, "tolist", None)):  # numpy arrays and other scalars
        return jsonable(value.tolist())
    return str(value)
