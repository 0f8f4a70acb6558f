"""What a rule is: one class carrying its code, name, documentation, fix advice, the DeepSpeed reports it is
grounded in, and VALID/INVALID examples that run as tests (Fixit's pattern, DESIGN.md §6).

A rule's `check(ctx)` yields `Diagnostic`s located by a libcst node, a JSON path or a (line, column);
the engine turns them into `Finding`s, resolving positions only for files that report something.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Optional, Union

from dslint.findings import Fix, Severity
from dslint.sources.jsonpos import Span

if TYPE_CHECKING:
    from dslint.program.project_view import ProjectView
    from dslint.program.query import Program
    from dslint.sources import AnySource


@dataclass(frozen=True)
class Example:
    """A snippet the rule must (INVALID) or must not (VALID) flag.

    `source` is the file under test (its kind from `filename`); `files` are companions checked in the same
    run (a DeepSpeed JSON, a launcher script, a helper module). In INVALID examples, lines that must be
    flagged carry `# expect: CODE` (Python/shell); for JSON give `expect_lines`.
    """

    source: str
    filename: str = "train.py"
    files: Mapping[str, str] = field(default_factory=dict)
    world_size: Optional[int] = None
    deepspeed_version: Optional[str] = None
    expect_lines: tuple[int, ...] = ()
    select: tuple[str, ...] = ()            # codes to select for the run (opt-in rules)
    # INVALID examples of a rule with a fix (Fixit's `expected_replacement`): `source` after `check --fix
    # --unsafe-fixes` (a display-only fix: with its edits applied), and the companions that change
    fixed: Optional[str] = None
    fixed_files: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Trace:
    """A hop in the chain to show (`evaluate() → engine(x)`); `at` as for Diagnostic."""

    note: str
    at: Any
    source: Optional["AnySource"] = None


@dataclass
class Clue:
    """A piece of evidence a finding rests on (`findings.Evidence`), located like a Trace: `at` a libcst node, a
    JSON path, a Span, a (line, col), a line number, or None (a fact of the run, not of a file). `source`: the
    file it is in (defaults to the file being checked; ignored when `at` is None and `path` is given). `found`
    False: a fact the hazard needs that dslint did not see."""

    kind: str
    note: str
    at: Any = None
    source: Optional["AnySource"] = None
    found: bool = True
    path: Optional[str] = None          # a file that is no source of the run (a config named by a launcher)


@dataclass
class Diagnostic:
    message: str
    at: Any                                       # libcst node | JSON path tuple | Span | (line, col)
    source: Optional["AnySource"] = None          # defaults to the file being checked
    severity: Optional[Severity] = None           # defaults to the rule's
    trace: list[Trace] = field(default_factory=list)
    fix: Optional[Fix] = None
    code: Optional[str] = None                    # a family module may emit several codes from one pass
    # what the finding rests on (issue 30): `Clue`s; `proven` False when the evidence the rule needs is
    # incomplete (hidden unless --show-unproven)
    evidence: list["Clue"] = field(default_factory=list)
    proven: bool = True


@dataclass
class RuleContext:
    """What a rule is given: the file it checks and the program model of the launch-unit view that file is
    analysed in, queried through `Program` (`dslint.program.query`, the one interface to the model)."""
    source: "AnySource"
    project: "ProjectView"

    @property
    def program(self) -> "Program":
        from dslint.program.query import Program
        return Program(self.project)

    def diagnostic(self, message: str, at: Any, **kw: Any) -> Diagnostic:
        return Diagnostic(message, at, **kw)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    # the severity of its findings where the hazard depends on a fact dslint cannot see (an unknown ep_size,
    # ZeRO stage or DeepSpeed version); `dslint rules` shows both (tests/test_docs.py checks the findings)
    severity_when_unsure: ClassVar[Optional[Severity]] = None
    summary: ClassVar[str]                       # one line: what it flags
    fix_advice: ClassVar[str] = ""               # use instead
    autofix: ClassVar[str] = ""                  # the edits `check --fix` makes: "safe: ...", "unsafe: ...", "display: ..."
    references: ClassVar[tuple[str, ...]] = ()   # "DeepSpeed #5794", "transformers generate(synced_gpus)"
    versions: ClassVar[str] = ""                 # which DeepSpeed/transformers versions are concerned
    suppress_when: ClassVar[str] = ""            # when it is safe to suppress
    # what the rule's findings rest on, and when that evidence is complete (issue 30: findings whose evidence is
    # incomplete are hidden unless --show-unproven); "" takes the family's text (`dslint.rules.evidence`)
    evidence_needed: ClassVar[str] = ""
    # the evidence table of docs/rules.md (issue 30): when a finding's evidence is complete (shown by default; ""
    # takes the family's, FAMILY_COMPLETE), and each condition under which the rule reports it unproven -- hidden
    # unless --show-unproven (the rules with `needs_ranks`, and DSL303, add ONE_PROCESS_RUN)
    evidence_complete: ClassVar[str] = ""
    unproven_when: ClassVar[tuple[str, ...]] = ()
    kinds: ClassVar[frozenset[str]] = frozenset({"python"})
    # Words one of which a Python file's text must contain for this rule to flag it or to need its facts
    # (the engine's triage skips parsing files that match no enabled rule). Empty: every file matters.
    triggers: ClassVar[tuple[str, ...]] = ()
    default_enabled: ClassVar[bool] = True       # False: runs only when --select names its code
    # True: the hazard needs two processes or more (one rank waiting for another); not checked in a file every
    # launch unit of which starts one process (`ProjectView.runs_one_process`)
    needs_ranks: ClassVar[bool] = False
    VALID: ClassVar[tuple[Union[Example, str], ...]] = ()
    INVALID: ClassVar[tuple[Union[Example, str], ...]] = ()

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        raise NotImplementedError

    def wants(self, ctx: RuleContext) -> bool:
        """Cheap triage before `check`: skip files that cannot matter."""
        return True

    @classmethod
    def documentation(cls) -> str:
        """The rule's docstring (what it does / why it hangs), dedented."""
        return textwrap.dedent(inspect.getdoc(cls) or "").strip()

    @classmethod
    def evidence_docs(cls) -> str:
        """What the findings rest on and when that evidence counts as complete (the rule's, else its family's)."""
        if cls.evidence_needed:
            return cls.evidence_needed
        return FAMILY_EVIDENCE.get(cls.code[:4], "")

    @classmethod
    def complete_when(cls) -> str:
        return cls.evidence_complete or FAMILY_COMPLETE.get(cls.code[:4], "")

    @classmethod
    def unproven_conditions(cls) -> tuple[str, ...]:
        """The conditions under which the rule's findings are unproven (hidden by default)."""
        return cls.unproven_when + ((ONE_PROCESS_RUN, PLUGIN_RUN) if cls.needs_ranks or cls.code == "DSL303" else ()) + \
            ((UNREACHED,) if cls.code[:4] in ("DSL1", "DSL2", "DSL3") else ())

    @classmethod
    def examples(cls, kind: str) -> list[Example]:
        raw = cls.VALID if kind == "valid" else cls.INVALID
        out = [e if isinstance(e, Example) else Example(textwrap.dedent(e).lstrip("\n")) for e in raw]
        return [replace(e, fixed=textwrap.dedent(e.fixed).lstrip("\n")) if e.fixed else e for e in out]


# when a family's findings have complete evidence (shown by default; a rule's `evidence_complete` overrides)
FAMILY_COMPLETE = {
    "DSL0": "always (the file itself)",
    "DSL1": "the collective call; for a model's forward or `generate`, what makes it collective in the launch unit: "
            "an engine or `init_inference` running the model (or an object used as an engine), a ZeRO-3 config, "
            "an MoE layer, `GatheredParameters`",
    "DSL2": "the DeepSpeed MoE layer the rule starts from",
    "DSL3": "the parameter analysis itself",
    "DSL4": "always (the config; what hands it to DeepSpeed is cited where seen)",
    "DSL5": "always (the launcher line)",
}
# the launch fact that leaves any rank hazard unproven (`evidence.one_process_clues`, issue 30)
ONE_PROCESS_RUN = ("the checked scripts start the program only with plain `python x.py` commands -- no launcher "
                   "line, no srun/mpirun, no rank variable or option, not in the background -- and nothing in it "
                   "spawns processes: one process")

# the program fact that leaves any rank hazard of a plugin module unproven (`evidence.plugin_clues`, issue 30)
PLUGIN_RUN = ("the module is imported by no program but loaded by a computed name (`importlib.import_module(f\"...\")`) "
              "from a script that no launcher line of several processes starts, and no call in that program or "
              "reached from the module creates a process group: one process")

# the reachability fact that leaves any finding about code unproven (`evidence.unreached_clues`, issue 30)
UNREACHED = ("the run has programs and none reaches the class or function holding the finding (no file "
             "constructs, calls, subclasses or names it): code no program runs, such as a vendored library's")

# what each family's findings rest on (a rule's `evidence_needed` overrides): rendered in docs/rules.md
FAMILY_EVIDENCE = {
    "DSL0": "the file itself (always complete).",
    "DSL2": "the DeepSpeed MoE layer (`deepspeed.moe.layer.MoE` call), the engine that runs the model "
            "(`deepspeed.initialize`/`init_inference`, a Trainer, DDP, accelerate), the config with its ZeRO stage "
            "and the launcher line with its world size, as far as the launch unit shows them. The MoE layer is "
            "what the rules start from: their evidence is complete.",
    "DSL3": "the engine, Trainer, DDP or accelerate call that trains the model on several ranks, the config with "
            "its ZeRO stage, the launcher line. Complete: the parameter analysis itself (DSL303 asks more, see "
            "its page).",
    "DSL4": "the config file (or the dict built in a script) and what hands it to DeepSpeed: a launcher's "
            "`--deepspeed cfg.json`, `deepspeed.initialize(config=...)`, `TrainingArguments(deepspeed=...)`; "
            "without one the finding says the file was taken for a DeepSpeed config by its keys (still shown).",
    "DSL5": "the launcher line (with its world size) and the config it hands over: always complete.",
}



# A rule family may emit codes that have no class of their own yet; they are documented here.
def span_of(source: "AnySource", at: Any) -> Span:
    """Resolve a Diagnostic location to a span in `source`."""
    if isinstance(at, Span):
        return at
    if isinstance(at, tuple) and len(at) == 2 and all(isinstance(x, int) for x in at):
        return Span(at[0], at[1], at[0], at[1])
    if isinstance(at, tuple):
        return source.span_of(at)          # JSON path
    return source.span(at)                 # libcst node
