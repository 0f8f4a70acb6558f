"""Comparison flags (`statements._compared_flag`) and their exclusion (`collective_switches.contradicts`)."""
import libcst as cst

from dslint.program.collective_switches import contradicts
from dslint.program.statement_walks import branch_facts, member_key


def facts(test: str, truth: bool = True) -> frozenset:
    return branch_facts(cst.parse_expression(test), truth)


def test_comparisons_are_flags():
    assert facts('split == "train"') == {(member_key("name:split", ["train"]), True)}
    assert facts("args.local_rank not in [-1, 0]") == {(member_key("name:args.local_rank", [-1, 0]), False)}
    assert facts('self.mode != "eval"', False) == {(member_key("self.mode", ["eval"]), True)}
    assert facts("x == None") == frozenset() and facts("x in [a, 1]") == frozenset()


def test_contradicts():
    rank01 = facts("args.local_rank in [-1, 0]")
    assert contradicts(rank01, facts("args.local_rank not in [-1, 0]"))
    assert contradicts(rank01, facts("args.local_rank == 3"))
    assert not contradicts(rank01, facts("args.local_rank == 0"))
    assert contradicts(facts('split == "dev"'), facts('split == "train"'))
    assert not contradicts(facts('split != "dev"'), facts('split == "train"'))
    assert contradicts(facts('split != "dev"'), facts('split == "dev"'))
    assert contradicts(facts('split not in ("dev", "test")'), facts('split in ["test"]'))
    assert not contradicts(facts("rank == 0"), facts("other == 1"))
