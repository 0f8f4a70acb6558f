"""How the checked scripts use a config: which scripts reference it, whether they are driven by the Hugging Face
integration (which fills `"auto"` values), whether they build DeepSpeed MoE layers. Python facts only —
nothing is imported or run."""

from __future__ import annotations

from dslint.program.project_view import ProjectView
from dslint.sources import JsonSource, PythonSource

# the HF integration: Trainer/TrainingArguments (transformers.integrations.deepspeed), HfDeepSpeedConfig,
# and Accelerate's DeepSpeedPlugin / `accelerate launch --deepspeed_config_file`
HF_MODULES = ("transformers", "accelerate", "trl", "peft")
HF_NAMES = ("Trainer", "TrainingArguments", "Seq2SeqTrainer", "Seq2SeqTrainingArguments", "HfDeepSpeedConfig",
            "HfTrainerDeepSpeedConfig", "Accelerator", "DeepSpeedPlugin", "SFTTrainer", "SFTConfig")
MOE_CLASSES = ("deepspeed.moe.layer.MoE", "deepspeed.moe.MoE", "deepspeed.MoE")


def scripts_using(project: ProjectView, config: JsonSource) -> list[PythonSource]:
    """The scripts of `project` whose configs (`ProjectView.configs_for`) include `config`, in the view's order:
    one index of the view's JSON configs to their scripts, built on the first question."""
    return project.scripts_using(config)


def _hf_entry_call(project: ProjectView, src: PythonSource, callee: str | None) -> bool:
    """A call of an HF entry class (`Trainer(...)`, `transformers.TrainingArguments(...)`): its name is one of them
    and it is not a class the checked files define themselves (a project's own `class Trainer:` drives no HF
    integration; one deriving from HF's is found through its bases)."""
    if not callee or callee.rsplit(".", 1)[-1] not in HF_NAMES:
        return False
    return callee.split(".", 1)[0] in HF_MODULES or project.class_for_callee(src, callee) is None


def is_hf_driven(project: ProjectView, script: PythonSource) -> bool:
    facts = script.facts
    if facts.imports_any(*HF_MODULES):
        return True
    return any(_hf_entry_call(project, script, c.callee) for c in facts.calls)


def runs_under_hf(project: ProjectView, script: PythonSource) -> bool:
    """Is `script` driven by the HF integration, itself or through the modules its launch units run
    (`train_mem.py` calling `train()` of a module whose trainer subclasses `transformers.Trainer`)? Decided on
    the outlines: a call of an HF entry class, or a class deriving from one."""
    if is_hf_driven(project, script):
        return True
    context = project.run_program.context_of(script)
    files = context.files if context is not None else [script]
    for src in files:
        outline = src.outline
        if outline is None:
            continue
        if any(_hf_entry_call(project, src, callee) for callee, _ in outline.calls):
            return True
        for cls in outline.classes.values():
            for base in cls.bases:
                last = base.rsplit(".", 1)[-1]
                if last in HF_NAMES or (last.endswith("Trainer") and base.startswith(HF_MODULES)):
                    return True
    return False


def builds_moe_layers(script: PythonSource) -> bool:
    facts = script.facts
    if facts.imports_any("deepspeed.moe"):
        return True
    return any((c.callee or "") in MOE_CLASSES for c in facts.calls)
