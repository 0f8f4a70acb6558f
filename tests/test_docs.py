"""docs/rules.md is generated from the rule classes; README's test command is what CI runs."""

import re

from dslint import ruledocs
from dslint.rules import all_rules
from tests.conftest import REPO


def test_rules_md_is_current():
    current = (REPO / "docs" / "rules.md").read_text()
    assert current == ruledocs.markdown(all_rules()), \
        "docs/rules.md is stale: run `dslint rules --format markdown > docs/rules.md`"


def test_every_design_code_family_is_documented():
    md = ruledocs.markdown(all_rules())
    for rule in all_rules():
        assert f"## {rule.code} {rule.name}" in md


def test_readme_quickstart_is_two_commands_and_ci_runs_the_second():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quickstart\s*```(?:bash|sh)?\n(.*?)```", readme, re.S)
    assert block, "README needs a Quickstart code block"
    commands = [l for l in block.group(1).splitlines() if l.strip() and not l.strip().startswith("#")]
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_family_table_matches_rule_kinds():
    from dslint.rules import FAMILIES
    for rule in all_rules():
        assert rule.__module__ in FAMILIES, rule
        assert rule.kinds <= FAMILIES[rule.__module__], (rule.code, rule.kinds)
