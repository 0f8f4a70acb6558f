"""The text prefilter of DSL206's library-MoE table (`mentions_library_moe`) must never hide a file that names a
family: every class, model_type and hub id the table recognises is mentioned by a file that spells it."""
import pytest

from dslint.program.models.moe_library import (LIBRARY_MOE, family_by_class, family_by_id, family_by_model_type,
                                         mentions_library_moe)

HUB_IDS = ["Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct",
           "Qwen/Qwen1.5-MoE-A2.7B", "Qwen/Qwen2-57B-A14B-Instruct", "mistralai/Mixtral-8x7B-v0.1",
           "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "allenai/OLMoE-1B-7B-0924",
           "microsoft/Phi-3.5-MoE-instruct", "ai21labs/Jamba-v0.1", "ibm-granite/granite-3.0-3b-a800m-instruct",
           "meta-llama/Llama-4-Scout-17B-16E", "openai/gpt-oss-20b", "databricks/dbrx-base",
           "google/switch-base-8", "facebook/nllb-moe-54b"]


@pytest.mark.parametrize("name", sorted({n for f in LIBRARY_MOE.values() for n in (*f.classes, *f.model_type)}))
def test_every_class_and_model_type_is_mentioned(name):
    assert family_by_class(name) or family_by_model_type(name)
    assert mentions_library_moe(f"model = load({name!r})\n")
    assert mentions_library_moe(f"from transformers import {name}\n")


@pytest.mark.parametrize("model_id", HUB_IDS)
def test_every_recognised_hub_id_is_mentioned(model_id):
    assert family_by_id(model_id) is not None, model_id
    text = f'model = AutoModelForCausalLM.from_pretrained("{model_id}")\n'
    assert mentions_library_moe(text)
    assert mentions_library_moe(text.upper())


def test_text_without_a_family_is_not_mentioned():
    text = ('model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")\n'
            'cfg = LlamaConfig(num_hidden_layers=2)\nengine = deepspeed.initialize(model=model, config=cfg)\n')
    assert not mentions_library_moe(text)
