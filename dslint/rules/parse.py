"""DSL001: inputs that cannot be read or parsed. Reported with a position; the other files are still checked."""

from __future__ import annotations

from dslint.findings import Fix, Severity
from dslint.rules.base import Diagnostic, Example, Rule, RuleContext


class ParseError(Rule):
    """A Python script, DeepSpeed JSON config or launcher shell script that dslint cannot read.

    **Why it matters**: a config DeepSpeed cannot parse fails the job at start-up on every rank, after it
    waited in the queue; a script that does not parse never trains. dslint reports it with the position
    and goes on with the other inputs, so one broken file never hides the findings of the rest.

    **Shell scripts** are reported only where bash itself stops (`bash -n`): a quote, `$(…)`, backquote or
    `if`/loop block still open at the end of the file (at the opening quote, the line bash names, or at the
    last line for a block). Text the shell grammar cannot read but bash may accept is read line by line
    instead, never reported. **Config templates** —
    JSON with placeholders where values belong (`"train_batch_size": CONFIG_BATCH_SIZE`, `<Specify path>`,
    `${BS}`, `{{ bs }}`), a `*template*` file name, or a `sed` over the file in a script beside it — are
    not configs yet: they are skipped, not reported. **Configs** are read as DeepSpeed reads them: JSON, else
    Hjson (comments, trailing commas, unquoted keys are fine); a config nested deeper than 100 levels, with
    an integer of more than 4,300 digits or a string holding a lone surrogate (`"\\ud800"`) is reported.
    **Python sources** are decoded as CPython does (PEP 263: a `# -*- coding: latin-1 -*-` line). A `.py` file
    that is a **template** (a `{{ … }}` placeholder in its path, as cookiecutter names files, or a syntax error
    that sits on a template tag such as `{% if … %}`) or a **symbolic link checked out as text** (its whole text
    the relative path of an existing file) is skipped with that reason (`path: skipped: …`), not reported.

    **Could not be analysed**: a Python file whose syntax no parser should be handed (brackets nested more than
    200 deep, an expression chaining more than 200 operators, calls or subscripts, more than 2,000 implicitly
    concatenated string literals, an `if`/`elif` chain of more than 200 branches; a text over the limit for Python sources, `--max-file-size`, given to the library
    rather than read from a file, which is skipped instead), a file whose analysis ran past its time budget
    (`DSLINT_FILE_TIMEOUT`, 60 s), or one whose worker process died, is reported here with the reason; its
    other findings are missing, the other files' stand.
    """

    code = "DSL001"
    name = "parse-error"
    severity = Severity.ERROR
    summary = "an input that cannot be parsed (Python, JSON or shell)"
    fix_advice = "Fix the syntax at the reported position."
    suppress_when = "Never: a file that does not parse is not checked at all."
    kinds = frozenset({"python", "json", "shell"})
    VALID = (
        "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config='ds.json')\n",
        Example('{"train_micro_batch_size_per_gpu": 4}\n', filename="ds_config.json"),
        Example('{\n  "train_batch_size": CONFIG_BATCH_SIZE,\n  "train_micro_batch_size_per_gpu": 4\n}\n',
                filename="ds_config_template.json"),
        Example('run_cmd="deepspeed \\\n  --num_gpus 2 train.py --deepspeed ds.json"\neval $run_cmd\n',
                filename="run.sh"),
    )
    INVALID = (
        "def train(:  # expect: DSL001\n    pass\n",
        Example('{\n  "train_batch_size": 8,\n  "fp16": ]\n}\n', filename="ds_config.json", expect_lines=(3,)),
        Example("[1, 2, 3]\n", filename="ds_config.json", expect_lines=(1,)),
        Example('deepspeed --num_gpus 2 train.py --deepspeed "ds.json  # expect: DSL001\n', filename="run.sh"),
    )

    def check(self, ctx: RuleContext):
        problem = ctx.source.parse_problem()
        if problem is not None and not problem.template:
            fix = None
            if problem.message.startswith("could not be analysed"):
                fix = Fix(description="Split the expression or the file (generated code: keep it out of the "
                                      "checked paths with `exclude`).")
            yield Diagnostic(problem.message, (problem.line, problem.column), fix=fix)


class UnusedSuppression(Rule):
    """A `# dslint: ignore[...]` or `# dslint: ignore-file[...]` comment that suppressed nothing in this run.

    **Why it matters**: a suppression outlives the hazard it was written for; left in place it silently
    hides the next, different finding on that line. Off by default (like ruff's RUF100): select it with
    `--select DSL002`. Codes that were not enabled in the run are not judged.
    """

    code = "DSL002"
    name = "unused-suppression"
    severity = Severity.WARNING
    summary = "a dslint suppression comment that suppressed nothing (opt-in: --select DSL002)"
    fix_advice = "Delete the comment, or narrow it to the codes that still fire on that line."
    suppress_when = "Never needed: remove the stale comment instead."
    kinds = frozenset({"python", "shell"})
    default_enabled = False
    VALID = (
        Example("import torch.distributed as dist\nrank = dist.get_rank()\nif rank == 0:\n"
                "    dist.barrier()  # dslint: ignore[DSL101]\n", select=("DSL002", "DSL101")),
    )
    INVALID = (
        Example("x = 1  # dslint: ignore[DSL101]  # expect: DSL002\n", select=("DSL002", "DSL101")),
    )

    def check(self, ctx: RuleContext):
        # the engine reports these once every other rule has run on the file (it owns the suppressions)
        return ()
