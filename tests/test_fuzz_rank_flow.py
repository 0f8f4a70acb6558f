"""Property-based suite: generated programs of rank-dependent control flow (`if`/`elif` chains, `match`, `while`,
`for`, `try`, comprehensions, early exits, module scope and function bodies) with collectives inside and
outside the branches (hypothesis strategies, shrinkable).

Every batch of generated programs is analysed in-process without workers or cache: no exception, no internal
error. Then every program of the session, in one folder, goes through the command line twice -- with two forked
workers filling a result cache, and answered from that cache -- which must exit 0 or 1, print no traceback and
report exactly the in-process findings.

Size: `DSLINT_FUZZ_EXAMPLES` batches of `BATCH` programs (default 500 x 20 = 10,000 programs: the CI-sized run,
part of the normal suite). The longer run and the figures: docs/performance.md ("Fuzzing").
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("hypothesis", reason="the test extra installs it (constraints/test.txt pins it)")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dslint.pipeline import workers  # noqa: E402
from dslint.config import Settings  # noqa: E402
from dslint.engine import Checker  # noqa: E402
from dslint.sources import make_source  # noqa: E402


EXAMPLES = int(os.environ.get("DSLINT_FUZZ_EXAMPLES", "500"))
BATCH = 20

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="compares runs with forked workers")

# --- the generator ---------------------------------------------------------------------------------------
RANK_TESTS = ("rank == 0", "rank != 0", "rank % 2", "local_rank in (0, 1)", "rank > world // 2", "is_main",
              "not is_main")
UNIFORM_TESTS = ("world > 1", "flag", "step % 10 == 0", "n")
COLLECTIVES = ("dist.barrier()", "dist.all_reduce(t)", "dist.broadcast(t, src=0)", "dist.all_gather(out, t)",
               "engine.save_checkpoint(d)", "torch.distributed.reduce(t, 0)")
PLAIN = ("pass", "t.add_(1)", "x = [a for a in data if a > rank]", "y = len(data)", "print(rank)",
         "shard = data[rank::world]")
PATTERNS = ("0", "1", "1 | 2", "[a, b]", "int()", "0 if True else 1")


def _leaf(in_loop: bool):
    exits = ["return", "raise RuntimeError('x')"] + (["continue", "break"] if in_loop else [])
    return st.one_of(st.sampled_from(COLLECTIVES).map(lambda s: [s]),
                     st.sampled_from(PLAIN).map(lambda s: [s]),
                     st.sampled_from(exits).map(lambda s: [s]),
                     st.sampled_from(COLLECTIVES).map(lambda s: [f"[{s} for _ in range(rank)]"]))


def _test():
    return st.sampled_from(RANK_TESTS + UNIFORM_TESTS)


def _block(depth: int, in_loop: bool = False):
    """A block: a list of source lines (unindented), one or two statements."""
    return st.lists(_statement(depth, in_loop), min_size=1, max_size=2).map(lambda parts: sum(parts, []))


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


@st.composite
def _if_chain(draw, depth, in_loop):
    lines = [f"if {draw(_test())}:"] + _indent(draw(_block(depth - 1, in_loop)))
    for _ in range(draw(st.integers(0, 2))):
        lines += [f"elif {draw(_test())}:"] + _indent(draw(_block(depth - 1, in_loop)))
    if draw(st.booleans()):
        lines += ["else:"] + _indent(draw(_block(depth - 1, in_loop)))
    return lines


@st.composite
def _match(draw, depth, in_loop):
    subject = draw(st.sampled_from(("rank", "dist.get_rank()", "local_rank", "world", "mode")))
    lines = [f"match {subject}:"]
    for _ in range(draw(st.integers(1, 2))):
        pattern = draw(st.sampled_from(PATTERNS[:5]))
        guard = draw(st.sampled_from(("", " if flag", " if rank == 0")))
        lines += _indent([f"case {pattern}{guard}:"] + _indent(draw(_block(depth - 1, in_loop))))
    if draw(st.booleans()):
        lines += _indent(["case _:"] + _indent(draw(_block(depth - 1, in_loop))))
    return lines


@st.composite
def _loop(draw, depth, in_loop):
    head = draw(st.sampled_from(("for b in loader:", "for i in range(rank):", "for s in shard:",
                                 "while i < rank:", "while not done:", "for i in range(4):")))
    body = draw(_block(depth - 1, True))
    if head.startswith("while"):
        body = body + ["i += 1", "done = rank > i"]
    return [head] + _indent(body)


@st.composite
def _try(draw, depth, in_loop):
    lines = ["try:"] + _indent(draw(_block(depth - 1, in_loop)))
    lines += ["except Exception:"] + _indent(draw(_block(depth - 1, in_loop)))
    if draw(st.booleans()):
        lines += ["finally:"] + _indent(draw(_block(depth - 1, in_loop)))
    return lines


def _statement(depth: int, in_loop: bool):
    if depth <= 0:
        return _leaf(in_loop)
    return st.one_of(_leaf(in_loop), _if_chain(depth, in_loop), _match(depth, in_loop),
                     _loop(depth, in_loop), _try(depth, in_loop))


PROLOGUE = "import os\nimport sys\nimport torch\nimport torch.distributed as dist\n"
ENGINE = "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config={'zero_optimization': {'stage': 3}})\n"
SETUP = ["rank = dist.get_rank()", "world = dist.get_world_size()", "local_rank = int(os.environ['LOCAL_RANK'])",
         "is_main = rank == 0", "i = 0", "done = False", "shard = data[rank::world]"]


@st.composite
def program(draw) -> str:
    setup = draw(st.lists(st.sampled_from(SETUP), min_size=1, max_size=3, unique=True))
    body = setup + draw(st.lists(_statement(2, False), min_size=1, max_size=3).map(lambda p: sum(p, [])))
    head = PROLOGUE + (ENGINE if draw(st.integers(0, 9)) == 0 else "")
    if draw(st.booleans()):            # inside a function (returns allowed), else at module scope
        return head + "\n\ndef train(loader, data, t, out, d, flag, step, n, mode):\n" + \
            "\n".join(_indent(body)) + "\n"
    lines = [line.replace("return", "sys.exit(0)") if line.strip() == "return" else line for line in body]
    return head + "\n" + "\n".join(lines) + "\n"


# --- the properties ----------------------------------------------------------------------------------------
_SESSION: dict = {}


@pytest.fixture(scope="module", autouse=True)
def _session():
    """The folder every generated program of the module is written to (for the command-line run), and workers
    forked from two files on (the CLI's threshold is 24: a batch is smaller)."""
    saved = workers.PARALLEL_MIN_FILES
    workers.PARALLEL_MIN_FILES = 2
    with tempfile.TemporaryDirectory(prefix="dslint-fuzz-") as scratch:
        (Path(scratch) / "programs").mkdir()
        _SESSION.update(dir=Path(scratch) / "programs", expected=set(), count=0)
        yield
    workers.PARALLEL_MIN_FILES = saved
    _SESSION.clear()


def _key(findings) -> list:
    return sorted((f.path, f.line, f.column, f.code, f.message) for f in findings)


def _run(texts: dict[str, str], **kwargs):
    sources = [make_source(Path(n), n, "python", t) for n, t in texts.items()]
    report = Checker(Settings(), **kwargs).check_sources(sources)
    assert not report.errors, report.errors[:3]
    return report


@pytest.mark.timeout(3600)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(program(), min_size=BATCH, max_size=BATCH))
def test_generated_rank_flow_never_crashes(programs):
    """One in-process run per batch (no workers, no cache): no exception, no internal error."""
    first = _SESSION["count"]
    texts = {f"p{first + i:06d}.py": text for i, text in enumerate(programs)}
    _SESSION["count"] += len(texts)
    for text in texts.values():
        compile(text, "<generated>", "exec")           # the generator writes valid Python
    alone = _run(texts, jobs=1, file_timeout=0)
    for name, text in texts.items():
        (_SESSION["dir"] / name).write_text(text)
    _SESSION["expected"] |= {(f.path, f.line, f.column, f.code, f.message) for f in alone.findings}


def _cli(folder: Path, cache: str, *args: str) -> tuple[set, dict]:
    env = {**os.environ, "NO_COLOR": "1", "DSLINT_CACHE_DIR": cache, "DSLINT_FILE_TIMEOUT": "0"}
    proc = subprocess.run([sys.executable, "-m", "dslint", "check", "--format", "json", *args, "."],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=folder)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["files_checked"] == _SESSION["count"] and not data["errors"], data["errors"][:3]
    return {(Path(f["path"]).name, f["line"], f["column"], f["code"], f["message"]) for f in data["findings"]}, data


@pytest.mark.timeout(3600)
def test_the_command_line_with_workers_and_from_its_cache_agrees_over_every_generated_program():
    """Every generated program in one folder, one run: the command line with two forked workers (filling a
    result cache), then again answered from that cache. Exit codes 0/1 only, no traceback, and the findings
    of the in-process runs, exactly."""
    if not _SESSION.get("count"):
        pytest.skip("runs after the generated batches (the whole module)")
    folder, cache = _SESSION["dir"], str(_SESSION["dir"].parent / (_SESSION["dir"].name + "-cache"))
    forked, _ = _cli(folder, cache, "--jobs", "2")
    cached, _ = _cli(folder, cache, "--jobs", "2")
    assert forked == _SESSION["expected"]
    assert cached == _SESSION["expected"]
