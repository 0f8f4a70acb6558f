"""Output formats: plug-ins over one findings model. Each module exposes `render(report, rules) -> str`."""

from __future__ import annotations

import importlib

FORMATS = {"text": "dslint.formats.text", "json": "dslint.formats.json_report",
           "sarif": "dslint.formats.sarif", "github": "dslint.formats.github"}


def render(name: str, report, rules) -> str:
    return importlib.import_module(FORMATS[name]).render(report, rules)
