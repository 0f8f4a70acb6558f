"""Every rule's VALID examples produce none of its findings; every INVALID example is flagged on exactly the
lines it announces (Fixit's pattern: the examples are the rule's tests)."""

import pytest

from dslint.rules import all_rules
from dslint.testing import example_expectations, run_example

CASES = [(rule, kind, i) for rule in all_rules() for kind in ("valid", "invalid")
         for i, _ in enumerate(rule.examples(kind))]


@pytest.mark.parametrize("rule,kind,index", CASES, ids=[f"{r.code}-{k}-{i}" for r, k, i in CASES])
def test_rule_example(rule, kind, index):
    example = rule.examples(kind)[index]
    report = run_example(example)
    assert not report.errors, report.errors
    got = {(f.path, f.line) for f in report.findings if f.code == rule.code}
    if kind == "valid":
        assert not got, f"{rule.code} flagged a VALID example: {[f.message for f in report.findings]}"
    else:
        want = example_expectations(rule, example)
        assert want, f"INVALID example of {rule.code} announces no expected line"
        assert got == want, [f"{f.path}:{f.line} {f.code} {f.message}" for f in report.findings]


def test_every_rule_has_examples_of_both_kinds():
    for rule in all_rules():
        assert rule.examples("valid") and rule.examples("invalid"), rule.code
        assert rule.documentation() and rule.summary, rule.code
