"""The text-based position lookup agrees with libcst's PositionProvider wherever it answers."""

from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from dslint.sources.cstwalk import walk
from dslint.sources import PythonSource

FIXTURES = Path(__file__).parent / "fixtures"


def test_fast_positions_match_position_provider():
    checked = answered = 0
    for path in sorted(FIXTURES.rglob("*.py")):
        src = PythonSource(str(path), path.read_text())
        if not src.compiles:
            continue
        truth = MetadataWrapper(src.module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node in walk(src.module):
            if not isinstance(node, (cst.Call, cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.Return,
                                     cst.Assign, cst.Attribute)):
                continue
            checked += 1
            fast = src._locate(node)
            if fast is None:
                continue
            answered += 1
            rng = truth[node]
            assert (fast.line, fast.column) == (rng.start.line, rng.start.column + 1), (path, fast, rng)
            if isinstance(node, cst.BaseCompoundStatement):
                # reported at its header line: from the keyword to the colon
                header = src.lines[fast.line - 1][fast.column - 1:fast.end_column - 1]
                assert fast.end_line == fast.line and header.rstrip().endswith(":"), (path, header)
            else:
                assert (fast.end_line, fast.end_column) == (rng.end.line, rng.end.column + 1), (path, fast, rng)
    assert checked > 500 and answered > checked // 3, (checked, answered)


def test_statement_local_positions_match_position_provider():
    """The fallback for nodes whose text is ambiguous: PositionProvider on the one top-level statement, shifted
    to its place. Checked on every node kind of dslint's own sources and the fixtures (decorated definitions,
    nested blocks, multi-line calls, strings)."""
    dslint_dir = Path(__file__).parent.parent / "dslint"
    checked = 0
    for path in [*sorted(FIXTURES.rglob("*.py")), *sorted(dslint_dir.rglob("*.py"))]:
        src = PythonSource(str(path), path.read_text())
        if not src.compiles:
            continue
        truth = MetadataWrapper(src.module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node in walk(src.module):
            if isinstance(node, cst.Module):
                continue
            local = src._locate_in_statement(node)
            if local is None:
                continue
            checked += 1
            rng = truth[node]
            assert (local.line, local.column, local.end_line, local.end_column) == \
                (rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1), (path, node, local, rng)
    assert checked > 20_000, checked


def test_trees_parsed_without_validation_reproduce_the_file():
    """`dslint.sources.parse_module` skips libcst's per-node validation: the trees must still be the parser's
    exact trees (same code, same node structure as a validating parse)."""
    import libcst
    from libcst._nodes.base import CSTNode

    from dslint.sources import _VALIDATING, _no_validation, parse_module

    dslint_dir = Path(__file__).parent.parent / "dslint"
    paths = [*sorted(FIXTURES.rglob("*.py")), *sorted(dslint_dir.rglob("*.py"))]
    for path in paths:
        text = path.read_text()
        src = PythonSource(str(path), text)
        if not src.compiles:
            continue
        fast = parse_module(text)
        assert CSTNode.__post_init__ is _no_validation
        assert fast.code == text, path
        CSTNode.__post_init__ = _VALIDATING[0]     # libcst's validating parse, for reference
        try:
            slow = libcst.parse_module(text)
        finally:
            CSTNode.__post_init__ = _no_validation
        assert fast.deep_equals(slow), path
    assert len(paths) > 50
