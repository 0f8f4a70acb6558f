"""Where a DeepSpeed config is handed over: the calls that take one (`deepspeed.initialize(config=...)`,
`init_inference`, `TrainingArguments(deepspeed=...)`, `HfDeepSpeedConfig`, accelerate's `DeepSpeedPlugin`)
and the keywords they take it by. Shared by the project view (which configs reach a script or a call) and
the Python config evaluator (`dslint.program.pyconfig`)."""

from __future__ import annotations

import re

_CONFIG_KEYWORDS = {"config", "config_params", "deepspeed", "deepspeed_config", "config_file", "hf_ds_config"}
_CONFIG_CALLS = ("deepspeed.initialize", "deepspeed.init_inference", "TrainingArguments", "Seq2SeqTrainingArguments",
                 "HfDeepSpeedConfig", "DeepSpeedPlugin", "HfTrainerDeepSpeedConfig")

_CONFIG_SUFFIXES = tuple("." + c for c in _CONFIG_CALLS)
_CONFIG_KEYWORD_TEXT = re.compile(r"\b(%s)\s*=(?!=)" % "|".join(sorted(_CONFIG_KEYWORDS)))


def takes_config(callee: str) -> bool:
    """Does a call of `callee` take a DeepSpeed config: `deepspeed.initialize`, transformers' `TrainingArguments`
    and the like, or one of TRL's training configurations (`trl.SFTConfig`, `DPOConfig`, `GRPOConfig`, ...: TRL
    defines each as a `transformers.TrainingArguments` subclass, whose `deepspeed=` field is the config that
    its Trainer hands to DeepSpeed)? Decided on the library's API (its module and class), not on a project's
    spelling."""
    return bool(callee) and (callee in _CONFIG_CALLS or callee.endswith(_CONFIG_SUFFIXES)
                             or callee.startswith("trl.") and callee.rsplit(".", 1)[-1].endswith("Config"))


def _hands_config(call) -> bool:
    """`deepspeed.initialize(config=...)`, `TrainingArguments(deepspeed=...)` and the like."""
    return takes_config(call.callee or "")


# Keys a consumer writes into the config before DeepSpeed reads it, whatever the file holds: accelerate's
# `DeepSpeedPlugin.__post_init__` sets `deepspeed_config["steps_per_print"] = float("inf")` unconditionally
# (accelerate/utils/dataclasses.py; it only fills the other keys where they are "auto"). A value there is never
# DeepSpeed's to judge.
_OVERWRITTEN = {"accelerate": frozenset({("steps_per_print",)})}
OVERWRITABLE = frozenset().union(*_OVERWRITTEN.values())     # what some consumer rewrites (a cheap first test)


def overwritten_by(handlers) -> frozenset:
    """The key paths every one of `handlers` (`JsonUse.handlers`; "accelerate" for a Python config handed to
    `DeepSpeedPlugin`) overwrites before DeepSpeed reads the config: none when some handler hands it on as is."""
    sets = [_OVERWRITTEN.get(h, frozenset()) for h in handlers]
    return frozenset.intersection(*sets) if sets else frozenset()
