"""dslint's model of the DeepSpeed JSON config (pydantic v2), used by the DSL4xx rules.

No deepspeed import: the schema of every DeepSpeed release from 0.10.0 on is generated from DeepSpeed's own
sources (`gen_schemas.py` → `schemas.json`, package data) and a config is judged at the release the project
pins (`table.release_for`); `knowledge.py` holds what the table cannot carry (run-time checks, validators).
tests/test_dsconfig_crosscheck.py compares the newest release's table with the installed DeepSpeed.
"""

from typing import Any

_FROM = {"Analysis": "check", "Problem": "check", "analyse": "check", "where": "check",
         "root_model": "table", "release_for": "table", "is_inference_config": "top"}


def __getattr__(name: str) -> Any:
    """Names of the pydantic-backed submodules, imported on first use: `dslint.dsconfig.semantics` and
    `.usage` (no pydantic) are imported by the DSL4xx rules for every Python run."""
    if name in _FROM:
        import importlib
        return getattr(importlib.import_module(f"dslint.dsconfig.{_FROM[name]}"), name)
    raise AttributeError(name)


__all__ = ["Analysis", "Problem", "analyse", "where", "root_model", "release_for", "is_inference_config"]
