"""DSL303 on patched-in forwards: the findings of `Program.uneven_submodule_uses` (issue 30, cause 8).

A function installed as a library class's `forward` (or a helper it hands the model to) that reaches a
sub-module's output on some data paths only: the sub-module is called only when the batch has images (a text-only
fallback switched off by `model.training`, so evaluation skips it), or its fallback call drops an output the
image path uses (`image_embeds, _ = model.visual(...)`: the deepstack mergers get no gradient). Reported by
`ConditionallyUsedParam` (DSL303) under the same conditions as its own findings; kept in its own module so the
parameter rules' file stays about nn.Module classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dslint.rules.base import Clue, Diagnostic, Trace

if TYPE_CHECKING:
    from dslint.rules.base import RuleContext

WHOLE = -1


def patched_forward_diagnostics(ctx: "RuleContext", severity, stage_text: str, trained: bool):
    program = ctx.program
    src = ctx.source
    for use in program.uneven_submodule_uses(src):
        mp = use.param
        cls = mp.cls.qualified.rsplit(".", 1)[-1]
        field_line = mp.cls.fields.get(use.submodule)
        evidence = [Clue("model", f"`{mp.param}` of {use.function}() holds a `{cls}` ({mp.how})",
                         at=mp.where[1] if mp.where else None, path=mp.where[0] if mp.where else None),
                    Clue("model", f"`{cls}.__init__` builds `self.{use.submodule}`", at=field_line,
                         path=mp.cls.path)]
        if trained:
            evidence.append(Clue("ddp", "the run trains on several ranks (DDP/FSDP/DeepSpeed/accelerate/Trainer)"))
        else:
            evidence.append(Clue("engine", "no training on several ranks seen in this run", found=False))
        # patched-forward-config-path: the function's inputs are the batch only where a training file of the run
        # builds the patched class and calls it; a layer's forward gets what the library's enclosing forward
        # hands it (cross-attention states, caches, config switches), a model named on the command line may be
        # any class -- undecided, so unproven
        built = None if mp.chosen_for_model else program.patched_class_trained(mp.cls)
        if mp.chosen_for_model:
            evidence.append(Clue("model", f"the patch of `{cls}` is chosen by a test of the model object handed to "
                                          f"the function installing it", at=mp.where[1] if mp.where else None,
                                 path=mp.where[0] if mp.where else None))
        elif built is not None:
            evidence.append(Clue("model", f"a file that trains builds `{cls}`", at=built[1], path=built[0]))
        else:
            evidence.append(Clue("model", f"no file of the run that trains builds `{cls}` (its inputs may be what "
                                          f"an enclosing library forward or the model config decides, not the "
                                          f"batch)", found=False))
        target = f"`{mp.param}.{use.submodule}`"
        if use.element == WHOLE:
            when = f" when `{use.test_code}` is false" if use.test_code else ""
            switch = f" (with {use.uniform})" if use.uniform else ""
            what = (f"{use.function}() calls {target} only on some data paths: this branch{switch} skips it"
                    f"{when}, while the batch decides whether the other calls run")
        else:
            what = (f"{use.function}() drops output {use.element} of {target} here, while the path that calls it "
                    f"for real data uses that output")
        trace = []
        if use.test_line is not None:
            trace.append(Trace(f"data-dependent branch: `{use.test_code}`", (use.test_line, 0), src))
        yield Diagnostic(
            f"{what}: on ranks whose batch takes this path the parameters behind it get no gradient (and under "
            f"FSDP/ZeRO-3 its forward, a parameter all-gather, does not run), so under {stage_text} the "
            f"gradient reductions or gathers differ across ranks and hang. Reach {target}'s outputs on every path "
            f"(a dummy input whose every output is added to the result times 0).",
            (use.line, use.col + 1), severity=severity, trace=trace, evidence=evidence,
            proven=trained and (mp.chosen_for_model or built is not None))


def constant_loss_diagnostics(ctx: "RuleContext", severity, stage_text: str, trained: bool):
    """A loss that is a constant on a data-dependent path (`Program.constant_losses`): on the ranks whose batch
    takes it, the backward reaches no parameter while the other ranks' backward runs the gradient hooks."""
    for hit in ctx.program.constant_losses(ctx.source):
        kind = "trainer" if hit.by_trainer else "collective"      # what back-propagates it
        evidence = [Clue(kind, f"the value {hit.function}() returns is a loss: {hit.root}")]
        if trained:
            evidence.append(Clue("ddp", "the run trains on several ranks (DDP/FSDP/DeepSpeed/accelerate/Trainer)"))
        else:
            evidence.append(Clue("engine", "no training on several ranks seen in this run", found=False))
        yield Diagnostic(
            f"{hit.function}() gives a constant loss when `{hit.test_code}` goes this way: the test reads this "
            f"rank's data, so on a rank whose batch takes this path the backward reaches no parameter (a constant "
            f"has no graph; a plain `torch.tensor` even makes the backward raise) while the other ranks' backward "
            f"runs the gradient hooks, so under {stage_text} the gradient reductions differ across ranks and hang. "
            f"Keep the forward's output in the loss on every path (e.g. `outputs.logits.sum() * 0.0`).",
            (hit.line, hit.col + 1), severity=severity,
            trace=[Trace(f"data-dependent test: `{hit.test_code}`", (hit.test_line, 1), ctx.source)],
            evidence=evidence, proven=trained)
