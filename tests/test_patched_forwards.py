"""DSL303 on patched-in forwards and constant losses (issue 30, cause 8): what the findings rest on, and the
cases that must stay silent (a sub-module that holds no parameters, a test of a field's presence)."""

import textwrap

from dslint.engine import check_texts
from dslint.findings import EVIDENCE_KINDS

CONFIG = {"ds_config.json": '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}\n'}

MODEL = textwrap.dedent("""\
    import torch
    from torch import nn


    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freqs", torch.ones(4))

        def forward(self, x):
            return x * self.freqs


    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 8)

        def forward(self, x):
            return self.proj(x), self.proj(x)


    class VLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = Tower()
            self.rotary = Rotary()
            self.lm = nn.Linear(8, 8)
    """)

TRAIN = textwrap.dedent("""\
    import deepspeed
    from pkg.vlm import VLM
    from pkg.patch import apply
    apply()
    model = VLM()
    engine, _, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds_config.json")
    for batch in loader:
        engine.backward(engine(batch["ids"], batch.get("pixels")).sum())
        engine.step()
    """)


def _run(patch: str):
    # a patch file imports torch (the rule's file prefilter asks for one of its trigger words)
    files = {"pkg/__init__.py": "", "pkg/vlm.py": MODEL, "pkg/patch.py": "import torch\n" + textwrap.dedent(patch),
             "train.py": TRAIN,
             **CONFIG}
    return [f for f in check_texts(files).findings if f.code == "DSL303"]


def test_skipped_tower_names_its_evidence():
    found = _run("""\
        def forward(self, ids, pixels=None):
            h = self.lm(ids)
            if pixels is not None:
                a, b = self.visual(pixels)
                h = h + a.sum() + b.sum()
            return h


        def apply():
            from pkg.vlm import VLM
            VLM.forward = forward
        """)
    assert [(f.path, f.line) for f in found] == [("pkg/patch.py", 4)]
    f = found[0]
    assert f.proven and "`self.visual`" in f.message
    assert {e.kind for e in f.evidence} <= set(EVIDENCE_KINDS)
    notes = " ".join(e.note for e in f.evidence)
    assert "installed as `VLM.forward`" in notes and "builds `self.visual`" in notes


def test_module_without_parameters_is_no_submodule():
    # the rotary embedding holds a buffer only: skipping it on some ranks skews no gradient reduction
    assert _run("""\
        def forward(self, ids, pixels=None):
            h = self.lm(ids)
            if pixels is not None:
                h = self.rotary(h)
            return h


        def apply():
            from pkg.vlm import VLM
            VLM.forward = forward
        """) == []


def test_dropped_element_is_reported_at_the_call():
    found = _run("""\
        def forward(self, ids, pixels=None):
            h = self.lm(ids)
            if pixels is not None:
                a, b = self.visual(pixels)
                h = h + a.sum() + b.sum()
            else:
                a, _ = self.visual(torch.zeros(1, 4))
                h = h + 0.0 * a.sum()
            return h


        def apply():
            from pkg.vlm import VLM
            VLM.forward = forward
        """)
    assert [f.line for f in found] == [8]
    assert "drops output 1" in found[0].message


def _loss_run(body: str):
    text = textwrap.dedent("""\
        import torch
        from transformers import Trainer, TrainingArguments


        class RewardTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                out = model(**inputs)
        """) + textwrap.indent(textwrap.dedent(body), " " * 8) + textwrap.dedent("""\


        RewardTrainer(model=None, args=TrainingArguments(output_dir="o", deepspeed="ds_config.json")).train()
        """)
    return [f for f in check_texts({"train.py": text, **CONFIG}).findings if f.code == "DSL303"]


def test_constant_loss_on_data_value_test():
    found = _loss_run("""\
        n = inputs["mask"].sum()
        if n == 0:
            return torch.tensor(0.0)
        return out.loss
        """)
    assert [f.line for f in found] == [10]
    assert [e.kind for e in found[0].evidence if e.found][0] == "trainer"


def test_constant_loss_on_structure_test_is_silent():
    # whether the batch carries labels is the collator's structure, the same on every rank
    assert _loss_run("""\
        if inputs.get("labels") is None:
            return torch.tensor(0.0)
        return out.loss
        """) == []


def test_default_fill_is_no_data_test():
    # ids or embeddings handed over as alternatives (FlagAI's patched Llama forward): where the embeddings come
    # from, not what the batch holds
    assert _run("""\
        def forward(self, ids=None, embeds=None):
            if embeds is None:
                embeds = self.visual(ids)[0]
            return self.lm(embeds)


        def apply():
            from pkg.vlm import VLM
            VLM.forward = forward
        """) == []
