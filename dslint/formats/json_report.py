"""The JSON contract of DESIGN.md §2.3."""

from __future__ import annotations


def render(report, rules) -> str:
    return report.model_dump_json(indent=2, exclude=None if report.fixes is not None else {"fixes"}) + "\n"
