"""Library (transformers) MoE families for DSL206: a model loaded by id, by class or by `model_type`, and
whether its sparse block runs a data-dependent set of expert *submodules* -- the ZeRO-3 hazard -- in the
transformers version of the run, and from which DeepSpeed version ZeRO-3 makes the block a leaf by default.

Where each fact comes from (read, never imported):
- DeepSpeed defaults: deepspeed 0.19.8 `deepspeed/runtime/zero/leaf_module_config.py` L11-15
  (`DEFAULT_LEAF_MODULE_CLASSES`: transformers' `MixtralSparseMoeBlock`, `Qwen2MoeSparseMoeBlock`,
  `Qwen3MoeSparseMoeBlock`, fully qualified), applied to every engine's model by
  `deepspeed/utils/z3_leaf_module.py` `apply_zero_leaf_module_config` (called from `engine.py`
  `_configure_distributed_model`); a config's `leaf_module.classes` replaces the list. First version with the
  defaults: 0.18.0 (DeepSpeed PR #7604; the 0.19.8 source has no earlier marker, so the PR's release is kept).
- transformers >= 5.0 (read in 5.24.0): every family below except DBRX, Switch Transformers and NLLB-MoE keeps
  its experts as 3-D parameters of ONE `…Experts` module (`@use_experts_implementation`); its forward loops
  over `expert_hit` but only slices those parameters, so ZeRO-3 gathers the same parameters on every rank:
  no hazard. The loop line ranges are quoted per family.
- transformers 4.x: the blocks held `nn.ModuleList` experts and called `self.experts[expert_idx]` only for
  `expert_hit` (data-dependent submodule calls). Read for Mixtral and Qwen3-MoE at huggingface/transformers
  commit 00d4b3d2 (a 4.5x tree); the other 4.x rows follow the same copied ("modular") code and are
  marked unverified below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from dslint.sources.literals import literal_value
from dslint.sources.wordsearch import alternation

if TYPE_CHECKING:
    from dslint.program.facts import CallSite

Version = tuple[int, ...]
V5: Version = (5, 0, 0)


@dataclass(frozen=True)
class LibraryMoE:
    family: str
    model_type: tuple[str, ...]
    classes: tuple[str, ...]           # model / config classes naming the family
    ids: str                           # regex on a hub id (case-insensitive, searched)
    block: str                         # the sparse block class to make a ZeRO-3 leaf
    # transformers versions [lo, hi) whose block calls a data-dependent set of expert submodules; None: never
    data_dependent: Optional[tuple[Optional[Version], Optional[Version]]]
    default_leaf_since: Optional[Version]   # DeepSpeed version whose defaults make `block` a leaf; None: never
    evidence: str


LIBRARY_MOE: dict[str, LibraryMoE] = {f.family: f for f in (
    LibraryMoE("mixtral", ("mixtral",), ("MixtralForCausalLM", "MixtralModel", "MixtralConfig"),
               r"mixtral", "MixtralSparseMoeBlock", (None, V5), (0, 18, 0),
               "5.24 modeling_mixtral.py L81-91: loop over expert_hit slices MixtralExperts' 3-D params; "
               "4.x (00d4b3d2): self.experts[expert_idx] per hit expert"),
    LibraryMoE("qwen2_moe", ("qwen2_moe",), ("Qwen2MoeForCausalLM", "Qwen2MoeModel", "Qwen2MoeConfig"),
               r"qwen1\.5-moe|qwen2-(?:\d+(?:\.\d+)?b-)?a\d+(?:\.\d+)?b|qwen2-?moe|qwen2-57b-a14b",
               "Qwen2MoeSparseMoeBlock", (None, V5), (0, 18, 0),
               "5.24 modeling_qwen2_moe.py L296-306 (fused); 4.x unverified (Mixtral copy)"),
    LibraryMoE("qwen3_moe", ("qwen3_moe",), ("Qwen3MoeForCausalLM", "Qwen3MoeModel", "Qwen3MoeConfig"),
               r"qwen3-(?:coder-)?\d+(?:\.\d+)?b-a\d+(?:\.\d+)?b|qwen3-?moe",
               "Qwen3MoeSparseMoeBlock", (None, V5), (0, 18, 0),
               "5.24 modeling_qwen3_moe.py L235-245 (fused); 4.x (00d4b3d2): self.experts[expert_idx] per hit"),
    LibraryMoE("qwen3_next", ("qwen3_next",), ("Qwen3NextForCausalLM", "Qwen3NextModel", "Qwen3NextConfig"),
               r"qwen3-next", "Qwen3NextSparseMoeBlock", (None, V5), None,
               "5.24 modeling_qwen3_next.py L813-823 (fused); 4.x unverified"),
    LibraryMoE("deepseek_v3", ("deepseek_v3",), ("DeepseekV3ForCausalLM", "DeepseekV3Model", "DeepseekV3Config"),
               r"deepseek-(?:v3|r1)(?![\w.-]*distill)", "DeepseekV3MoE", (None, V5), None,
               "5.24 modeling_deepseek_v3.py L186-196 (fused); 4.x unverified"),
    LibraryMoE("olmoe", ("olmoe",), ("OlmoeForCausalLM", "OlmoeModel", "OlmoeConfig"),
               r"olmoe", "OlmoeSparseMoeBlock", (None, V5), None,
               "5.24 modeling_olmoe.py L303-313 (fused); 4.x unverified"),
    LibraryMoE("phimoe", ("phimoe",), ("PhimoeForCausalLM", "PhimoeModel", "PhimoeConfig"),
               r"phi-3\.5-moe|phimoe", "PhimoeSparseMoeBlock", (None, V5), None,
               "5.24 modeling_phimoe.py L325-335 (fused); 4.x unverified"),
    LibraryMoE("jamba", ("jamba",), ("JambaForCausalLM", "JambaModel", "JambaConfig"),
               r"jamba", "JambaSparseMoeBlock", (None, V5), None,
               "5.24 modeling_jamba.py L668-678 (fused); 4.x unverified"),
    LibraryMoE("granitemoe", ("granitemoe",), ("GraniteMoeForCausalLM", "GraniteMoeModel", "GraniteMoeConfig"),
               r"granite-[\w.-]*-a\d+(?:\.\d+)?[bm]", "GraniteMoeMoE", None, None,
               "5.24 modeling_granitemoe.py L160-170 (fused); 4.x GraniteMoeParallelExperts runs every expert"),
    LibraryMoE("llama4", ("llama4", "llama4_text"),
               ("Llama4ForCausalLM", "Llama4ForConditionalGeneration", "Llama4TextModel", "Llama4Config"),
               r"llama-4", "Llama4TextMoe", None, None,
               "5.24 modeling_llama4.py L80-82: torch.bmm over all experts (no expert loop)"),
    LibraryMoE("gpt_oss", ("gpt_oss",), ("GptOssForCausalLM", "GptOssModel", "GptOssConfig"),
               r"gpt-oss", "GptOssMLP", None, None,
               "5.24 modeling_gpt_oss.py L100-112: loop over expert_hit slices GptOssExperts' 3-D params"),
    LibraryMoE("dbrx", ("dbrx",), ("DbrxForCausalLM", "DbrxModel", "DbrxConfig"),
               r"dbrx", "DbrxFFN", (V5, None), None,
               "5.24 modeling_dbrx.py L296-305: `self.mlp(...)` (DbrxExpertGLU, holds w1/v1/w2) called once per "
               "hit expert: a data-dependent number of gathers of one submodule; 4.x unverified"),
    LibraryMoE("switch_transformers", ("switch_transformers",),
               ("SwitchTransformersForConditionalGeneration", "SwitchTransformersModel",
                "SwitchTransformersEncoderModel", "SwitchTransformersConfig"),
               r"switch-(?:base|large|xxl|c)", "SwitchTransformersSparseMLP", (V5, None), None,
               "5.24 modeling_switch_transformers.py L175-179: self[f'expert_{i}'] (ModuleDict) only for hit "
               "experts; 4.x unverified"),
    LibraryMoE("nllb_moe", ("nllb-moe", "nllb_moe"), ("NllbMoeForConditionalGeneration", "NllbMoeModel",
                                                      "NllbMoeConfig"),
               r"nllb-moe", "NllbMoeSparseMLP", (V5, None), None,
               "5.24 modeling_nllb_moe.py L356-365: self[f'expert_{i}'] (ModuleDict) only for hit experts; "
               "4.x unverified"),
)}

_BY_CLASS = {c: f for f in LIBRARY_MOE.values() for c in f.classes}
_BY_TYPE = {t: f for f in LIBRARY_MOE.values() for t in f.model_type}


def _literal_heads(pattern: str) -> set[str]:
    """The literal characters each top-level alternative of an id pattern starts with (`qwen2-(?:…)|qwen2-?moe`
    → `qwen2-`, `qwen2`)."""
    alternatives, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            alternatives.append(pattern[start:i])
            start = i + 1
        i += 1
    alternatives.append(pattern[start:])
    heads = set()
    for alt in alternatives:
        head = re.match(r"[\w-]*", alt).group(0)
        if alt[len(head):len(head) + 1] in ("?", "*", "{"):
            head = head[:-1]                # `qwen2-?moe`: the `-` is optional
        heads.add(head.lower())
    return heads


# every way a file can name a family (a class, a model_type, a hub id), as lower-case substrings: a file that
# spells none of them loads none (`mentions_library_moe`: one prefix-factored pattern over the lower-cased text,
# `dslint.sources.wordsearch`; a plain alternation of the anchors cost twice as much as a substring test each)
_ANCHORS = tuple(sorted({n.lower() for f in LIBRARY_MOE.values() for n in (*f.classes, *f.model_type)} |
                        {h for f in LIBRARY_MOE.values() for h in _literal_heads(f.ids)}))
assert all(len(a) >= 4 for a in _ANCHORS), _ANCHORS


_ANCHOR_RE = re.compile(alternation(_ANCHORS))


def mentions_library_moe(text: str) -> bool:
    """Can a call of this text load or configure a family of the table? (A superset, on the text alone: does
    its lower-cased text hold one of the anchors?)"""
    return _ANCHOR_RE.search(text.lower()) is not None


def family_by_class(name: str) -> Optional[LibraryMoE]:
    return _BY_CLASS.get(name)


def family_by_model_type(value: str) -> Optional[LibraryMoE]:
    return _BY_TYPE.get(value)


def family_by_id(model_id: str) -> Optional[LibraryMoE]:
    """The family of a hub id or local path (`Qwen/Qwen3-30B-A3B`, `mistralai/Mixtral-8x7B-v0.1`)."""
    text = model_id.lower()
    for fam in LIBRARY_MOE.values():
        if re.search(fam.ids, text):
            return fam
    return None


def data_dependent(fam: LibraryMoE, transformers: Optional[Version]) -> Optional[bool]:
    """Does the family's block call a data-dependent set of expert submodules in this transformers version?
    None: the version is unknown and the answer depends on it."""
    if fam.data_dependent is None:
        return False
    lo, hi = fam.data_dependent
    if transformers is None:
        return None
    return (lo is None or transformers >= lo) and (hi is None or transformers < hi)


def family_of_call(call: "CallSite") -> tuple[Optional[LibraryMoE], str]:
    """The transformers MoE family a call loads or configures, and how it was named: a family class
    (`Qwen3MoeForCausalLM.from_pretrained(...)`, `MixtralConfig(...)`), a hub id given to an `Auto*` class, or a
    `model_type` (`AutoConfig.for_model("qwen3_moe")`)."""
    callee = call.callee or ""
    parts = callee.split(".")
    last = parts[-1]
    if last in ("from_pretrained", "from_config", "for_model", "_from_config") and len(parts) >= 2:
        owner = parts[-2]
        fam = family_by_class(owner)
        if fam is not None:
            return fam, f"`{owner}`"
        if not owner.startswith("Auto"):
            return None, ""
        args = [a for a in call.node.args if a.keyword is None and not a.star]
        value = args[0].value if args else None
        if value is None:
            kw = call.keyword("pretrained_model_name_or_path") or call.keyword("model_type")
            value = kw.value if kw is not None else None
        lit = literal_value(value) if value is not None else None
        if not isinstance(lit, str):
            return None, ""
        fam = family_by_model_type(lit) if last == "for_model" else family_by_id(lit)
        return fam, (f"model_type {lit!r}" if last == "for_model" else f"{lit!r}")
    fam = family_by_class(last)
    return (fam, f"`{last}`") if fam is not None and (last.endswith("Config") or "For" in last
                                                       or last.endswith("Model")) else (None, "")
