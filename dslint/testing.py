"""Running rule examples and annotated fixtures: the `# expect: CODE` convention (DESIGN.md §4)."""

from __future__ import annotations

import re
from typing import Optional

from dslint.config import Settings
from dslint.engine import check_texts
from dslint.findings import Report
from dslint.sources.astsplice import physical_lines
from dslint.rules.base import Example, Rule

EXPECT = re.compile(r"#\s*expect:\s*([A-Z]{3}\d{3}(?:\s*,\s*[A-Z]{3}\d{3})*)")


def expected(text: str) -> set[tuple[int, str]]:
    """(line, code) pairs announced by `# expect: DSL101[, DSL102]` comments."""
    out = set()
    for number, line in enumerate(physical_lines(text), 1):
        m = EXPECT.search(line)
        if m:
            out.update((number, c.strip()) for c in m.group(1).split(","))
    return out


def run_example(example: Example, settings: Optional[Settings] = None) -> Report:
    files = {example.filename: example.source, **dict(example.files)}
    settings = settings or Settings()
    settings = settings.model_copy(update={
        "select": list(example.select) or settings.select,
        "world_size": example.world_size or settings.world_size,
        "deepspeed_version": example.deepspeed_version or settings.deepspeed_version or "0.19.8",
    })
    return check_texts(files, settings)


def example_expectations(rule: type[Rule], example: Example) -> set[tuple[str, int]]:
    """(path, line) where an INVALID example must be flagged by `rule`."""
    want = {(example.filename, line) for line in example.expect_lines}
    for name, text in [(example.filename, example.source), *example.files.items()]:
        want |= {(name, line) for line, code in expected(text) if code == rule.code}
    return want


def fix_files(files: dict[str, str], settings: Optional[Settings] = None, unsafe: bool = True):
    """Check in-memory files and apply their fixes to a fixed point (dslint.fix_command.fix_loop): the
    FixOutcome (`texts`: the fixed files; `report`: what is left)."""
    from dslint.engine import kind_of
    from dslint.fix_command import fix_loop
    from pathlib import Path

    def check(texts: dict) -> Report:
        return check_texts({**files, **texts}, settings)

    kinds = {name: kind_of(Path(name), True, text[:4096]) for name, text in files.items()}
    return fix_loop(check, check({}), dict(files), kinds, unsafe)


def example_settings(example: Example) -> Settings:
    return Settings().model_copy(update={
        "select": list(example.select),
        "world_size": example.world_size,
        "deepspeed_version": example.deepspeed_version or "0.19.8",
    })
