"""dslint's own model of the DeepSpeed JSON config (pydantic v2), used by the DSL4xx rules.

No deepspeed import: the models mirror DeepSpeed 0.19.8's config classes and `dict.get` readers, and
tests/test_dsconfig_crosscheck.py compares them with the installed DeepSpeed so they cannot drift silently.
"""

from typing import Any

_FROM = {"Analysis": "check", "Problem": "check", "analyse": "check", "where": "check",
         "DeepSpeedConfig": "top", "is_inference_config": "top"}


def __getattr__(name: str) -> Any:
    """Names of the pydantic-backed submodules, imported on first use: `dslint.dsconfig.semantics` and
    `.usage` (no pydantic) are imported by the DSL4xx rules for every Python run."""
    if name in _FROM:
        import importlib
        return getattr(importlib.import_module(f"dslint.dsconfig.{_FROM[name]}"), name)
    raise AttributeError(name)


__all__ = ["Analysis", "Problem", "analyse", "where", "DeepSpeedConfig", "is_inference_config"]
