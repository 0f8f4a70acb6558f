"""Exit codes of ``dslint preflight`` (a contract: CI gates and docs/preflight.md depend on them)."""

from __future__ import annotations

import enum
from typing import Any


class ExitCode(enum.IntEnum):
    PASS = 0  # every rank agreed; no error findings
    DIVERGENCE = 1  # ranks disagree (sizes, sequences, gradients, expert groups) or a known misconfiguration
    USAGE = 2  # bad command line (same meaning as for ``dslint check``)
    HANG = 3  # a collective would never complete (peer finished, or --timeout passed)
    SCRIPT_ERROR = 4  # the user's script raised (or exited non-zero) before its dry step ended
    INTERNAL = 5  # the pre-flight itself failed
    NOT_COVERED = 6  # every rank agreed on what ran, but the dry run ended (at a bound, or at a loop it could not
    # end) before the script's end: code after that point, e.g. a rank-0-only evaluation, was never checked

    @classmethod
    def for_verdict(cls, verdict: dict[str, Any]) -> "ExitCode":
        kind = verdict.get("kind")
        if kind == "divergence":
            return cls.DIVERGENCE
        if kind == "hang":
            return cls.HANG
        if kind == "error":
            return cls.DIVERGENCE if verdict.get("finding") else cls.SCRIPT_ERROR
        return cls.INTERNAL
