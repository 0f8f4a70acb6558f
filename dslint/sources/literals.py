"""Evaluate libcst literal expressions (numbers, strings, containers, True/False/None) without running code."""

from __future__ import annotations

from typing import Any

import libcst as cst


class _Unknown:
    _instance = None
    _dslint_unknown = True          # recognised by dslint.dsconfig without importing libcst

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


def literal_value(node: cst.BaseExpression | None) -> Any:
    """The Python value of a literal expression, or UNKNOWN. Containers keep UNKNOWN for unknown items."""
    if node is None:
        return UNKNOWN
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.Float):
        return float(node.value.replace("_", ""))
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else UNKNOWN
    if isinstance(node, cst.Name):
        return {"True": True, "False": False, "None": None}.get(node.value, UNKNOWN)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = literal_value(node.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else UNKNOWN
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        items = [literal_value(e.value) for e in node.elements if isinstance(e, cst.Element)]
        return tuple(items) if isinstance(node, cst.Tuple) else items
    if isinstance(node, cst.Dict):
        out = {}
        for el in node.elements:
            if not isinstance(el, cst.DictElement):
                return UNKNOWN
            key = literal_value(el.key)
            if key is UNKNOWN:
                continue
            out[key] = literal_value(el.value)
        return out
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict":
        out = {}
        for arg in node.args:
            if arg.keyword is None:
                return UNKNOWN
            out[arg.keyword.value] = literal_value(arg.value)
        return out
    return UNKNOWN
