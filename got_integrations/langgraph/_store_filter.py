"""LangGraph search filters as SQLite conditions on an item's value JSON.

The conditions are a *superset*: every item that passes a filter meets them, and the exact
check in Python (:func:`~got_integrations.langgraph._store_doc.matches_filter`) decides.
What SQL cannot say exactly (``$ne``, lists as operands, unusual keys, huge numbers, text
compared as a number) is left to that check, and numeric bounds are widened by far more
than SQLite's text-to-double conversion can differ from Python's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["filter_sql"]

_SAFE_KEY = re.compile(r"[A-Za-z0-9_\- ]{1,200}\Z")
_EXACT_INT = 1 << 53
_NUMERIC = "json_type(value, ?) IN ('integer', 'real', 'true', 'false')"


def _slack(x: float) -> float:
    # SQLite's text-to-double conversion may differ from Python's by an ulp: widen the
    # SQL bound by far more than that; the exact comparison in Python decides.
    return abs(x) * 1e-12 + 1e-300


def filter_sql(wanted: Mapping[str, Any]) -> tuple[list[str], list[Any]]:
    """SQL conditions on the ``value`` JSON that every item passing ``wanted`` meets.

    A superset, never a subset: whatever cannot be said exactly in SQL (``$ne``, lists
    as operands, keys with unusual characters, huge numbers) is left to the exact
    Python check that follows. Returns (clauses, parameters).
    """
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in wanted.items():
        if isinstance(key, str) and _SAFE_KEY.match(key):
            _cond(f'$."{key}"', value, clauses, params)
    return clauses, params


def _cond(path: str, wanted: Any, out: list[str], params: list[Any]) -> None:
    if isinstance(wanted, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            for op, arg in wanted.items():
                _operator(path, op, arg, out, params)
            return
        out.append("json_type(value, ?) = 'object'")
        params.append(path)
        for key, value in wanted.items():
            if isinstance(key, str) and _SAFE_KEY.match(key):
                _cond(f'{path}."{key}"', value, out, params)
        return
    if isinstance(wanted, (list, tuple)):
        out.append("json_type(value, ?) = 'array' AND json_array_length(value, ?) = ?")
        params += [path, path, len(wanted)]
        for i, value in enumerate(wanted):
            _cond(f"{path}[{i}]", value, out, params)
        return
    _equal(path, wanted, out, params)


def _equal(path: str, wanted: Any, out: list[str], params: list[Any]) -> None:
    if wanted is None:
        out.append("json_extract(value, ?) IS NULL")  # missing or null, as Python's None == None
        params.append(path)
    elif isinstance(wanted, str):
        try:
            wanted.encode("utf-8")
        except UnicodeEncodeError:
            return  # a lone surrogate: SQLite cannot bind it
        out.append("json_extract(value, ?) = ?")
        params += [path, wanted]
    elif isinstance(wanted, (bool, int, float)):
        x = float(wanted) if not isinstance(wanted, int) or abs(wanted) < _EXACT_INT else math.nan
        if math.isfinite(x):
            out.append(f"{_NUMERIC} AND json_extract(value, ?) BETWEEN ? AND ?")
            params += [path, path, x - _slack(x), x + _slack(x)]


def _operator(path: str, op: Any, arg: Any, out: list[str], params: list[Any]) -> None:
    if op == "$eq":
        if not isinstance(arg, (dict, list, tuple)):
            _equal(path, arg, out, params)
        return
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        return  # $ne, and unknown operators (the Python check reports those)
    try:
        x = float(arg)
    except (TypeError, ValueError, OverflowError):
        return
    if not math.isfinite(x):
        return
    # Python compares float(value): numbers and booleans here, text (float("3")) in Python
    if op in ("$gt", "$gte"):
        test, bound = ">=", x - _slack(x)
    else:
        test, bound = "<=", x + _slack(x)
    out.append(f"(json_type(value, ?) = 'text' OR ({_NUMERIC} AND json_extract(value, ?) {test} ?))")
    params += [path, path, path, bound]
