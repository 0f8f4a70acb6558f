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


def test_listed_severities_are_the_ones_findings_have():
    """`dslint rules` names every severity a rule's findings can have (issue 20: DSL204 was listed as an error
    and reported as a warning): checked on every finding of the fixtures and the examples."""
    import json
    import os
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", "--format", "json", "--select",
                          "DSL", "tests/fixtures/static", "examples"], capture_output=True, text=True, cwd=REPO,
                         timeout=300, env={**os.environ, "NO_COLOR": "1"})
    findings = json.loads(out.stdout)["findings"]
    assert len(findings) > 100
    rules = {r.code: r for r in all_rules()}
    for f in findings:
        rule = rules[f["code"]]
        allowed = {rule.severity.value, (rule.severity_when_unsure or rule.severity).value}
        assert f["severity"] in allowed, (f["code"], f["severity"], ruledocs.severity_label(rule), f["path"])
    listing = subprocess.run([sys.executable, "-m", "dslint", "rules"], capture_output=True, text=True, cwd=REPO,
                             timeout=60).stdout
    assert re.search(r"DSL204  moe-token-count-varies\s+error, warning when unsure", listing)


def test_readme_and_docs_cite_only_what_the_repository_has():
    """No links to files the repository lacks, no DESIGN document (it is not part of the repository), and a
    pre-commit `rev:` that pre-commit can install: there are no release tags, so it is a full commit sha."""
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for target in re.findall(r"\]\(([\w./-]+\.(?:md|py|json|sh|toml|ya?ml|txt))(?:#[^)]*)?\)", text):
            assert (doc.parent / target).exists(), (doc.name, target)
    readme = (REPO / "README.md").read_text()
    assert "DESIGN" not in readme
    assert "DESIGN" not in (REPO / "docs" / "rules.md").read_text()
    revs = re.findall(r"^\s*rev:\s*(\S+)", readme, re.M)
    assert revs and all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in revs), revs
