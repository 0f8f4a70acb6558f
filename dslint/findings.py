"""The findings model shared by every rule and every output format (JSON contract: DESIGN.md §2.3).

Plain dataclasses, not pydantic: every `dslint check` builds these, and importing pydantic (plus its plugin
scan of the installed packages) cost more than the rest of a one-script run's start-up. The small part of
pydantic's API the code base uses is kept: `model_dump`, `model_dump_json` (the same text pydantic wrote:
field order, `indent`, UTF-8 unescaped), `model_validate` and `model_copy`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Literal, Optional

from dslint import __version__


class Severity(str, Enum):
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return 1 if self is Severity.WARNING else 2


def _dump(value: Any, json_mode: bool) -> Any:
    if isinstance(value, _Model):
        return value.model_dump(mode="json" if json_mode else "python")
    if isinstance(value, list):
        return [_dump(v, json_mode) for v in value]
    if isinstance(value, Enum):
        return value.value if json_mode else value
    return value


def dump_json(data: Any, indent: Optional[int] = None) -> str:
    """JSON as pydantic's `model_dump_json` writes it: UTF-8 unescaped, compact unless indented."""
    if indent is None:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(data, ensure_ascii=False, indent=indent)


def _check_choice(owner: str, name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{owner}.{name}: {value!r} is not one of {', '.join(map(repr, choices))}")


def _check_position(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner}.{name}: expected an integer >= 1, got {value!r}")


class _Model:
    """pydantic's `model_*` methods over a dataclass; `_NESTED` names the fields that hold models."""

    __slots__ = ()
    _NESTED: dict[str, type] = {}          # field -> model class of the field (or of its list items)

    def model_dump(self, *, mode: str = "python", exclude: Optional[set[str]] = None) -> dict[str, Any]:
        json_mode = mode == "json"
        return {f.name: _dump(getattr(self, f.name), json_mode) for f in fields(self)
                if not exclude or f.name not in exclude}

    def model_dump_json(self, *, indent: Optional[int] = None, exclude: Optional[set[str]] = None) -> str:
        return dump_json(self.model_dump(mode="json", exclude=exclude), indent)

    @classmethod
    def model_validate(cls, data: Any):
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__}.model_validate: expected a dict, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for name, model in cls._NESTED.items():
            value = kwargs.get(name)
            if isinstance(value, list):
                kwargs[name] = [model.model_validate(v) for v in value]
            elif isinstance(value, dict):
                kwargs[name] = model.model_validate(value)
        return cls(**kwargs)

    def model_copy(self, *, update: Optional[dict[str, Any]] = None, deep: bool = False):
        out = copy.deepcopy(self) if deep else copy.copy(self)
        for name, value in (update or {}).items():
            setattr(out, name, value)
        return out


@dataclass(slots=True, kw_only=True)
class TraceStep(_Model):
    """One hop of the chain that leads from the reported line to the collective (or to the cause)."""

    path: str
    line: int
    note: str


EVIDENCE_KINDS = ("collective", "engine", "init_inference", "config", "zero-stage", "moe-layer", "moe-config",
                  "ddp", "trainer", "accelerate", "launcher", "world-size", "process-group", "model", "optimizer",
                  "consumer", "deepspeed-version")


@dataclass(slots=True, kw_only=True)
class Evidence(_Model):
    """One fact a finding rests on (issue 30): what it is (`kind`, one of EVIDENCE_KINDS), where dslint saw it
    (`path`/`line`, None for a fact of the run such as the DeepSpeed version) and a short note. `found` False: a
    fact the hazard needs that dslint could not see (an unknown ZeRO stage) -- said, so the reader knows what the
    finding assumes."""

    kind: str
    note: str
    path: Optional[str] = None
    line: Optional[int] = None
    found: bool = True

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path and self.line else (self.path or "")


@dataclass(slots=True, kw_only=True)
class Edit(_Model):
    """Replace the text from (line, column) up to, not including, (end_line, end_column) of `path` by
    `content` (1-based, columns in characters; an insertion has start == end). Built by dslint.fixes."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def __post_init__(self) -> None:
        for name in ("line", "column", "end_line", "end_column"):
            _check_position("Edit", name, getattr(self, name))


APPLICABILITIES = ("safe", "unsafe", "display", "manual")


@dataclass(slots=True, kw_only=True)
class Fix(_Model):
    """What to change. `applicability` follows ruff: a `safe` fix keeps behaviour (`--fix` applies it), an
    `unsafe` one may change it (applied only with `--unsafe-fixes`), a `display` one is shown with its edits and
    never applied; `manual` means dslint only describes the change (no edits). `alternatives`: other display-only
    variants of the change (each a Fix of its own)."""

    description: str
    applicability: Literal["safe", "unsafe", "display", "manual"] = "manual"
    edits: list[Edit] = field(default_factory=list)
    alternatives: list["Fix"] = field(default_factory=list)

    _NESTED = {"edits": Edit}

    def __post_init__(self) -> None:
        _check_choice("Fix", "applicability", self.applicability, APPLICABILITIES)
        self.edits = list(self.edits)
        self.alternatives = list(self.alternatives)


Fix._NESTED = {"edits": Edit, "alternatives": Fix}


@dataclass(slots=True, kw_only=True)
class Finding(_Model):
    code: str
    name: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    trace: list[TraceStep] = field(default_factory=list)
    fix: Optional[Fix] = None
    # what the finding rests on (issue 30): the config, engine, launcher line, MoE layer ... that make the hazard
    # real in this launch unit, and the facts it needs that were not seen (`found` False)
    evidence: list[Evidence] = field(default_factory=list)
    # False: the evidence the rule needs (its docs say which) is incomplete; such findings are hidden unless
    # `--show-unproven` / `show-unproven = true` asks for them
    proven: bool = True

    _NESTED = {"trace": TraceStep, "fix": Fix, "evidence": Evidence}

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)
        for name in ("line", "column", "end_line", "end_column"):
            _check_position("Finding", name, getattr(self, name))
        self.trace = list(self.trace)
        self.evidence = list(self.evidence)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)


InputErrorKind = Literal["missing-path", "unreadable", "internal-error", "config"]


@dataclass(slots=True, kw_only=True)
class InputError(_Model):
    """Something that stopped dslint from checking an input, or a rule that crashed on one."""

    kind: InputErrorKind
    path: str
    line: Optional[int] = None
    column: Optional[int] = None
    message: str
    code: Optional[str] = None

    def __post_init__(self) -> None:
        _check_choice("InputError", "kind", self.kind, ("missing-path", "unreadable", "internal-error", "config"))


@dataclass(slots=True, kw_only=True)
class Report(_Model):
    version: str = __version__
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    errors: list[InputError] = field(default_factory=list)
    # what the run assumed (issue 19): the DeepSpeed version the rules judged against and where it came from
    # ("option": --deepspeed-version or [tool.dslint]; a file path: a pin found there; "installed"; null)
    settings: dict = field(default_factory=dict)
    # `check --fix`/`--fix-only` (issue 22): {"applied": N, "remaining": M, "files": [...], "not_written": [...]};
    # None (and absent from the JSON) otherwise
    fixes: Optional[dict] = None
    # findings left out because their evidence is incomplete (`Finding.proven` False; `--show-unproven` shows them)
    hidden: int = 0

    _NESTED = {"findings": Finding, "errors": InputError}

    def __post_init__(self) -> None:
        self.findings = list(self.findings)
        self.errors = list(self.errors)
