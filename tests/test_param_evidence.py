"""DSL303/DSL301 conditions that rest on evidence (issue 30, items 5-7): the branch reported is the one that
selects the parameter's use, and findings whose hazard cannot be decided from the run are unproven."""

import textwrap

from dslint.config import Settings
from dslint.engine import check_texts

ZERO2 = {"ds_config.json": '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n'}

SEG_MODEL = textwrap.dedent("""\
    import torch
    from torch import nn


    class Segmenter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = nn.Linear(8, 8)
            self.mask_decoder = nn.Linear(8, 8)

        def forward(self, **kwargs):
            if "past_key_values" in kwargs:
                return self.lm(kwargs["input_ids"])
            out = self.lm(kwargs["input_ids"])
            images = kwargs.get("grounding_images")
            if images is not None:
                out = out + self.mask_decoder(images).sum()
            return out
    """)

SEG_TRAIN = textwrap.dedent("""\
    import deepspeed
    from model import Segmenter

    model = Segmenter()
    engine, _, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                config="ds_config.json")
    for batch in loader:
        engine.backward(engine(**batch).sum())
        engine.step()
    """)


def _dsl303(files, show=False):
    report = check_texts(files, Settings(show_unproven=show))
    return [f for f in report.findings if f.code == "DSL303"]


def test_condition_is_the_one_selecting_the_use():
    # right-module-wrong-branch: the early return for generation (`"past_key_values" in kwargs`) also skips the
    # decoder, but the branch that selects its use on training batches is the image test
    # (the run writes `grounding_images` nowhere: the finding is unproven, see the key-presence tests below)
    found = _dsl303({"model.py": SEG_MODEL, "train.py": SEG_TRAIN, **ZERO2}, show=True)
    assert [(f.path, f.line) for f in found] == [("model.py", 9)]
    assert "`images is not None`" in found[0].message
    assert "past_key_values" not in found[0].message


SEG_DATA = textwrap.dedent("""\
    import torch


    def collate(items):
        batch = {"input_ids": torch.stack([x["input_ids"] for x in items])}
        %s
        return batch
    """)


SEG_TRAIN_DATA = SEG_TRAIN.replace("from model import Segmenter", "from model import Segmenter\nfrom data import collate") \
    .replace("model_parameters=model.parameters(),", "model_parameters=model.parameters(), collate_fn=collate,")


def test_key_presence_without_a_writer_is_unproven():
    # batch-key-presence (issue 30 item 6): `kwargs.get("grounding_images")` tests a batch field that no file of
    # the run writes -- nothing shows batches that differ in it: hidden by default, shown marked
    files = {"model.py": SEG_MODEL, "train.py": SEG_TRAIN, **ZERO2}
    assert _dsl303(files) == []
    found = _dsl303(files, show=True)
    assert [(f.line, f.proven) for f in found] == [(9, False)]
    assert "unproven: no file of the run writes the batch field `grounding_images`" in found[0].message
    assert any(e.kind == "batch-key" and not e.found for e in found[0].evidence)
    # the family's evidence stays beside the rule's own clue
    assert any(e.found and e.kind == "engine" for e in found[0].evidence)


def test_key_presence_written_on_some_samples_is_proven():
    # the collator writes the field only when every item has images: batches differ in it
    body = ('if all("images" in x for x in items):\n'
            '        batch["grounding_images"] = torch.stack([x["images"] for x in items])')
    files = {"model.py": SEG_MODEL, "train.py": SEG_TRAIN_DATA, "data.py": SEG_DATA % body, **ZERO2}
    found = _dsl303(files)
    assert [(f.line, f.proven) for f in found] == [(9, True)]
    assert "unproven" not in found[0].message
    assert any(e.kind == "batch-key" and e.found for e in found[0].evidence)


def test_key_presence_written_on_every_batch_is_not_flagged():
    # every batch carries the field: the image test takes the same arm on every rank; what is left is the early
    # return under `"past_key_values" in kwargs`, a key no file of the run writes: unproven, hidden by default
    body = 'batch["grounding_images"] = torch.stack([x["images"] for x in items])'
    files = {"model.py": SEG_MODEL, "train.py": SEG_TRAIN_DATA, "data.py": SEG_DATA % body, **ZERO2}
    assert _dsl303(files) == []
    found = _dsl303(files, show=True)
    assert [(f.line, f.proven) for f in found] == [(9, False)]
    assert "images is not None" not in found[0].message
    assert "`past_key_values`" in found[0].message


LAYER_LIB = textwrap.dedent("""\
    import torch
    from torch import nn


    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(8, 8)
            self.cross = nn.Linear(8, 8)

        def forward(self, h, enc=None):
            return self.attn(h)


    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(2)])

        def forward(self, h):
            for layer in self.layers:
                h = layer(h)
            return h


    REGISTRY = {"stack": Stack}
    """)

LAYER_PATCH = textwrap.dedent("""\
    import torch


    def layer_forward(self, h, enc=None):
        h = self.attn(h)
        if enc is not None:
            h = h + self.cross(enc)
        return h


    def adapt(%s):
        from pkg.lib import Layer
        %s
    """)

LAYER_TRAIN = textwrap.dedent("""\
    import sys
    import deepspeed
    from pkg.lib import REGISTRY%s
    from pkg.patch import adapt

    model = REGISTRY[sys.argv[1]]()
    %s
    engine, _, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                config="ds_config.json")
    for batch in loader:
        engine.backward(engine(batch["h"]).sum())
        engine.step()
    """)


def _layer_run(params, body, imports="", call="adapt()", show=True):
    files = {"pkg/__init__.py": "", "pkg/lib.py": LAYER_LIB, "pkg/patch.py": LAYER_PATCH % (params, body),
             "train.py": LAYER_TRAIN % (imports, call), **ZERO2}
    return _dsl303(files, show)


def test_blanket_patch_of_a_layer_is_unproven():
    # patched-forward-config-path: every layer class patched at once, the model built by a registry: the layer's
    # `enc` is what the library's enclosing forward hands it, not a batch field
    found = _layer_run("", "Layer.forward = layer_forward")
    assert [(f.path, f.line, f.proven) for f in found] == [("pkg/patch.py", 6, False)]
    assert any(not e.found and "no file of the run that trains builds `Layer`" in e.note for e in found[0].evidence)
    assert _layer_run("", "Layer.forward = layer_forward", show=False) == []


def test_patch_chosen_for_the_model_is_proven():
    found = _layer_run("model", "if model.kind == 'stack':\n        Layer.forward = layer_forward",
                       call="adapt(model)")
    assert [(f.line, f.proven) for f in found] == [(6, True)]
    assert any(e.found and "chosen by a test of the model object" in e.note for e in found[0].evidence)


def test_patched_class_built_by_a_training_file_is_proven():
    found = _layer_run("", "Layer.forward = layer_forward", imports=", Layer",
                       call="adapt()\nmodel = Layer()")
    assert [(f.line, f.proven) for f in found] == [(6, True)]
    assert any(e.found and "a file that trains builds `Layer`" in e.note for e in found[0].evidence)


MODE_RUN = textwrap.dedent("""\
    import deepspeed
    import torch
    from torch import nn

    MODE_TEXT = "text"
    MODE_FUSION = "fusion"

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = nn.Linear(8, 8)
            self.crossattention = nn.Linear(8, 8)

        def forward(self, h, mode=None):
            h = self.attention(h)
            if mode == MODE_FUSION:
                h = h + self.crossattention(h)
            return h


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(2)])

        def forward(self, h):
            for layer in self.layers:
                h = layer(h, mode=MODE_TEXT)
            for layer in self.layers:
                h = layer(h, mode=MODE_FUSION)
            return h.sum()


    model = Model()
    engine, _, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                config="ds_config.json")
    for batch in loader:
        engine.backward(engine(batch["h"]))
        engine.step()
    """)


def test_module_constant_per_call_site_is_uniform():
    """Issue 30 item 5: `mode=MODE_FUSION`, a module-level name bound once to a literal, is the same value on every
    rank at that call site, as `mode="fusion"` is; a mode computed from the batch is not."""
    assert _dsl303({"train.py": MODE_RUN, **ZERO2}, show=True) == []
    per_batch = MODE_RUN.replace("h = layer(h, mode=MODE_FUSION)",
                                 "h = layer(h, mode=MODE_FUSION if h.sum() > 0 else MODE_TEXT)")
    assert [f.line for f in _dsl303({"train.py": per_batch, **ZERO2}, show=True)] == [12]

