"""The findings model shared by every rule and every output format (JSON contract: DESIGN.md §2.3)."""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional

from pydantic import BaseModel, Field

from dslint import __version__


class Severity(str, Enum):
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return 1 if self is Severity.WARNING else 2


class TraceStep(BaseModel):
    """One hop of the chain that leads from the reported line to the collective (or to the cause)."""

    path: str
    line: int
    note: str


class Fix(BaseModel):
    """What to change. `applicability` follows ruff: a safe fix keeps behaviour, an unsafe one may change it;
    `manual` means dslint only describes the change."""

    description: str
    applicability: Literal["safe", "unsafe", "manual"] = "manual"


class Finding(BaseModel):
    code: str
    name: str
    severity: Severity
    path: str
    line: int = Field(ge=1)
    column: int = Field(ge=1)
    end_line: int = Field(ge=1)
    end_column: int = Field(ge=1)
    message: str
    trace: list[TraceStep] = Field(default_factory=list)
    fix: Optional[Fix] = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)


class InputError(BaseModel):
    """Something that stopped dslint from checking an input, or a rule that crashed on one."""

    kind: Literal["missing-path", "unreadable", "internal-error", "config"]
    path: str
    line: Optional[int] = None
    column: Optional[int] = None
    message: str
    code: Optional[str] = None


class Report(BaseModel):
    version: str = __version__
    findings: list[Finding] = Field(default_factory=list)
    files_checked: int = 0
    errors: list[InputError] = Field(default_factory=list)
