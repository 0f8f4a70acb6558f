"""dslint's own model of the DeepSpeed JSON config (pydantic v2), used by the DSL4xx rules.

No deepspeed import: the models mirror DeepSpeed 0.19.8's config classes and `dict.get` readers, and
tests/test_dsconfig_crosscheck.py compares them with the installed DeepSpeed so they cannot drift silently.
"""

from dslint.dsconfig.check import Analysis, Problem, analyse, where
from dslint.dsconfig.top import DeepSpeedConfig, is_inference_config

__all__ = ["Analysis", "Problem", "analyse", "where", "DeepSpeedConfig", "is_inference_config"]
