"""`dslint server` end to end: a real LSP client (pytest-lsp) drives the server over stdio on small workspaces
written here. Every wait is bounded (`WAIT` seconds); diagnostics are matched to the document version they
were computed for, so a test never reads a stale publication."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

from tests.conftest import REPO, _fresh_cache_dir

WAIT = 90.0           # seconds: the machine running the suite may be loaded; a cold first check imports the rules

# a patched server for the crash test: the analysis of a text holding CRASH raises
CRASH = "# crash-the-analysis"
CRASHING_SERVER = f"""
import sys
from dslint import engine
original = engine.Checker.check_sources
def check_sources(self, sources):
    if any({CRASH!r} in s.text for s in sources):
        raise RuntimeError("injected failure")
    return original(self, sources)
engine.Checker.check_sources = check_sources
from dslint.cli import main
sys.exit(main(["server"]))
"""

INFER = '''"""Batch inference with a DeepSpeed-MoE model, one shard of the prompts per rank."""
import json

import torch
import torch.distributed as dist
from deepspeed.moe.layer import MoE
from torch import nn
from transformers import PreTrainedModel


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.moe = MoE(hidden_size=hidden, expert=nn.Linear(hidden, hidden), num_experts=4, ep_size=1, k=1)

    def forward(self, x):
        out, _aux, _counts = self.moe(x)
        return out


class MoELM(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.block = Block(config.hidden_size)

    def forward(self, input_ids, **kwargs):
        return self.block(input_ids)


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = MoELM.from_pretrained("ckpt").cuda().eval()
    with open("prompts.jsonl") as f:
        batches = [json.loads(line) for line in f]
    for batch in batches[rank::world]:
        ids = torch.tensor(batch["input_ids"]).cuda()
        model.generate(ids, do_sample=True, max_new_tokens=16)


if __name__ == "__main__":
    main()
'''

RUN_INFER = "#!/bin/bash\ntorchrun --nproc-per-node 4 infer.py\n"
REQUIREMENTS = "deepspeed==0.15.1\ntransformers==4.46.3\n"     # the releases the MoE hazard is judged at


def _infer_workspace(root: Path) -> None:
    (root / "infer.py").write_text(INFER)
    (root / "run.sh").write_text(RUN_INFER)
    (root / "requirements.txt").write_text(REQUIREMENTS)

SAVE = '''import deepspeed

engine, _, _, _ = deepspeed.initialize(model=model, config="ds.json")
if engine.global_rank == 0:
    engine.save_checkpoint("out")
'''

GEN = '''import argparse

import deepspeed
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    parser.parse_args()
    deepspeed.init_distributed()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    engine, _, _, _ = deepspeed.initialize(model=model, config="ds_config.json")
    prompts = torch.load("prompts.pt")
    rank = dist.get_rank()
    engine.module.generate(prompts[rank].cuda(), do_sample=True, max_new_tokens=32)


if __name__ == "__main__":
    main()
'''

RUN_GEN = "#!/bin/bash\ndeepspeed --num_gpus 2 gen.py\n"
ZERO = '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": %d}\n}\n'


def _client() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics (uri, version, diagnostics) in order."""
    client = make_test_lsp_client()
    client.published = []
    handle = client.protocol._handle_notification

    def record(method, params):
        if method == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            client.published.append(params)
        return handle(method, params)

    client.protocol._handle_notification = record
    client.registrations = []

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register(params: lsp.RegistrationParams) -> None:       # as an editor does: accepted
        client.registrations += [r.method for r in params.registrations]

    return client


_CACHE = _fresh_cache_dir()         # the servers' result cache, this module's own
atexit.register(shutil.rmtree, _CACHE, True)


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "DSLINT_CACHE_DIR": _CACHE}
    env.pop("DSLINT_DEBUG", None)
    return env


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "dslint", "server"], client_factory=_client,
                            server_env=_env())
CRASHING = ClientServerConfig(server_command=[sys.executable, "-c", CRASHING_SERVER], client_factory=_client,
                              server_env=_env())


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def _start(client: LanguageClient, root: Path, debounce_ms: int = 50) -> None:
    await asyncio.wait_for(client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"debounce_ms": debounce_ms})), WAIT)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await _start(lsp_client, workspace)
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), WAIT)


@pytest_lsp.fixture(config=CRASHING)
async def crashing_client(lsp_client: LanguageClient, workspace: Path):
    await _start(lsp_client, workspace)
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), WAIT)


def _open(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    language = {".py": "python", ".json": "json", ".sh": "shellscript"}.get(path.suffix, "plaintext")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri, language_id=language, version=version, text=path.read_text() if text is None else text)))
    return uri


def _replace(client: LanguageClient, uri: str, text: str, version: int) -> None:
    """A whole-text change (the server syncs incrementally; a change without a range replaces everything)."""
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))


def _edit_line(client: LanguageClient, uri: str, line: int, old: str, new: str, version: int) -> None:
    """An incremental change: line `line` (0-based), `old` (its whole text) replaced by `new`."""
    rng = lsp.Range(start=lsp.Position(line=line, character=0), end=lsp.Position(line=line, character=len(old)))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)]))


async def _diagnostics(client: LanguageClient, uri: str, version: int, timeout: float = WAIT) -> list:
    """The diagnostics published for `uri` at `version` (the latest such publication)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in client.published if p.uri == uri and p.version == version]
        if found:
            await asyncio.sleep(0.2)        # a later publication for the same version would replace it
            found = [p for p in client.published if p.uri == uri and p.version == version]
            return list(found[-1].diagnostics)
        await asyncio.sleep(0.05)
    seen = [(p.uri, p.version, [d.code for d in p.diagnostics]) for p in client.published]
    raise AssertionError(f"no diagnostics for {uri} version {version} within {timeout} s; published: {seen}")


def _codes(diags) -> list[str]:
    return sorted(str(d.code) for d in diags)


def _apply(text: str, edits: list) -> str:
    """Apply LSP text edits (UTF-16 positions; the fixtures are ASCII) to `text`."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(pos):
        return starts[pos.line] + pos.character

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
    return text


@pytest.mark.asyncio
async def test_open_publishes_findings_with_trace_and_hover(client: LanguageClient, workspace: Path):
    _infer_workspace(workspace)
    uri = _open(client, workspace / "infer.py")
    diags = await _diagnostics(client, uri, 1)
    assert "DSL104" in _codes(diags)
    generate = next(d for d in diags if d.code == "DSL104")
    assert generate.range.start.line == INFER.splitlines().index(
        "        model.generate(ids, do_sample=True, max_new_tokens=16)")
    assert generate.source == "dslint" and generate.severity == lsp.DiagnosticSeverity.Error
    # the trace: the rank-dependent input, located in this file
    assert generate.related_information and all(r.location.uri == uri for r in generate.related_information)
    assert any("rank" in r.message for r in generate.related_information)
    hover = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=generate.range.start)), WAIT)
    assert hover is not None and "DSL104 generate-not-synced" in hover.contents.value
    assert "synced_gpus" in hover.contents.value


@pytest.mark.asyncio
async def test_edit_updates_and_code_action_removes_finding(client: LanguageClient, workspace: Path):
    _infer_workspace(workspace)
    uri = _open(client, workspace / "infer.py")
    assert "DSL104" in _codes(await _diagnostics(client, uri, 1))
    # an edit that adds a hazard: a rank-0-only save through an engine (DSL101)
    lines = INFER.split("\n")
    at = lines.index("        model.generate(ids, do_sample=True, max_new_tokens=16)")
    added = "    if rank == 0:\n        dist.barrier()"
    _edit_line(client, uri, at + 1, lines[at + 1], added + "\n" + lines[at + 1], 2)
    text = "\n".join(lines[:at + 1] + [added + "\n" + lines[at + 1]] + lines[at + 2:])
    diags = await _diagnostics(client, uri, 2)
    assert "DSL101" in _codes(diags) and "DSL104" in _codes(diags)
    # the safe fix of DSL104 as a code action
    generate = next(d for d in diags if d.code == "DSL104")
    actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=generate.range,
        context=lsp.CodeActionContext(diagnostics=[generate]))), WAIT)
    fixes = [a for a in actions if a.diagnostics and a.diagnostics[0].code == "DSL104"]
    assert len(fixes) == 1 and fixes[0].kind == lsp.CodeActionKind.QuickFix and fixes[0].is_preferred
    assert "unsafe" not in fixes[0].title
    fixed = _apply(text, fixes[0].edit.changes[uri])
    assert "synced_gpus=True" in fixed
    _replace(client, uri, fixed, 3)
    diags = await _diagnostics(client, uri, 3)
    assert "DSL104" not in _codes(diags) and "DSL101" in _codes(diags)


@pytest.mark.asyncio
async def test_unsafe_fix_is_marked(client: LanguageClient, workspace: Path):
    (workspace / "ds.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimisation": {"stage": 2}\n}\n')
    (workspace / "train.py").write_text(SAVE)
    uri = _open(client, workspace / "ds.json")
    diags = await _diagnostics(client, uri, 1)
    unknown = next(d for d in diags if d.code == "DSL401")
    actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=unknown.range,
        context=lsp.CodeActionContext(diagnostics=[unknown]))), WAIT)
    assert actions and all("(unsafe: may change behaviour)" in a.title for a in actions)
    assert {a.kind for a in actions} == {"quickfix.dslint.unsafe"}
    fixed = _apply((workspace / "ds.json").read_text(), actions[0].edit.changes[uri])
    assert '"zero_optimization"' in fixed
    _replace(client, uri, fixed, 2)
    assert "DSL401" not in _codes(await _diagnostics(client, uri, 2))


@pytest.mark.asyncio
async def test_syntax_error_mid_edit_keeps_the_rest(client: LanguageClient, workspace: Path):
    _infer_workspace(workspace)
    (workspace / "save.py").write_text(SAVE)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    infer = _open(client, workspace / "infer.py")
    save = _open(client, workspace / "save.py")
    assert "DSL104" in _codes(await _diagnostics(client, infer, 1))
    assert "DSL101" in _codes(await _diagnostics(client, save, 1))
    broken = INFER.replace("def main():", "def main(:")
    _replace(client, infer, broken, 2)
    diags = await _diagnostics(client, infer, 2)
    assert _codes(diags) == ["DSL001"]
    assert diags[0].range.start.line == INFER.splitlines().index("def main():")
    assert "DSL101" in _codes(await _diagnostics(client, save, 1))      # the other file's, published again
    _replace(client, infer, INFER, 3)
    assert "DSL104" in _codes(await _diagnostics(client, infer, 3))


@pytest.mark.asyncio
async def test_config_in_workspace_decides_the_script_finding(client: LanguageClient, workspace: Path):
    """The launch unit's context: gen.py's generate is a collective only because ds_config.json (given to
    deepspeed.initialize) is ZeRO-3, and run.sh starts two ranks; editing the config buffer (not saved) to
    ZeRO-2 removes the script's finding, back to 3 brings it back."""
    (workspace / "gen.py").write_text(GEN)
    (workspace / "run.sh").write_text(RUN_GEN)
    (workspace / "ds_config.json").write_text(ZERO % 3)
    script = _open(client, workspace / "gen.py")
    diags = await _diagnostics(client, script, 1)
    assert "DSL104" in _codes(diags)
    config = _open(client, workspace / "ds_config.json")
    await _diagnostics(client, config, 1)
    _replace(client, config, ZERO % 2, 2)
    await _diagnostics(client, config, 2)
    # one run publishes both open documents: the script's publication of that run precedes the config's
    assert "DSL104" not in _codes([p for p in client.published if p.uri == script][-1].diagnostics)
    _replace(client, config, ZERO % 3, 3)
    await _diagnostics(client, config, 3)
    assert "DSL104" in _codes([p for p in client.published if p.uri == script][-1].diagnostics)


@pytest.mark.asyncio
async def test_one_process_launcher_means_no_collective_finding(client: LanguageClient, workspace: Path):
    """The same script launched on one process (run.sh) has no collective hazard: the launcher is context."""
    (workspace / "gen.py").write_text(GEN)
    (workspace / "run.sh").write_text(RUN_GEN.replace("--num_gpus 2", "--num_gpus 1"))
    (workspace / "ds_config.json").write_text(ZERO % 3)
    script = _open(client, workspace / "gen.py")
    assert "DSL104" not in _codes(await _diagnostics(client, script, 1))


@pytest.mark.asyncio
async def test_tool_dslint_settings_are_honoured(client: LanguageClient, workspace: Path):
    (workspace / "pyproject.toml").write_text('[tool.dslint]\nignore = ["DSL104"]\n')
    _infer_workspace(workspace)
    uri = _open(client, workspace / "infer.py")
    diags = await _diagnostics(client, uri, 1)
    assert diags and "DSL104" not in _codes(diags)


@pytest.mark.asyncio
async def test_crash_publishes_dsl001_and_server_stays_up(crashing_client: LanguageClient, workspace: Path):
    (workspace / "save.py").write_text(SAVE)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    uri = _open(crashing_client, workspace / "save.py", SAVE + CRASH + "\n")
    diags = await _diagnostics(crashing_client, uri, 1)
    assert _codes(diags) == ["DSL001"]
    assert "internal error: RuntimeError: injected failure" in diags[0].message
    _replace(crashing_client, uri, SAVE, 2)
    assert "DSL101" in _codes(await _diagnostics(crashing_client, uri, 2))


@pytest.mark.asyncio
async def test_stale_runs_are_not_published(client: LanguageClient, workspace: Path):
    """Edits faster than the checks: only the last version's diagnostics may be the final word."""
    (workspace / "save.py").write_text(SAVE)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    uri = _open(client, workspace / "save.py")
    await _diagnostics(client, uri, 1)
    for version in range(2, 12):
        _replace(client, uri, SAVE + f"# edit {version}\n", version)
    diags = await _diagnostics(client, uri, 11)
    assert "DSL101" in _codes(diags)
    # debounced: far fewer publications than edits, and none after the last version's
    versions = [p.version for p in client.published if p.uri == uri]
    assert versions[-1] == 11 and len(versions) < 10


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.asyncio
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
async def test_shutdown_during_a_check_leaves_no_process(workspace: Path):
    """shutdown + exit while a first check of a 40-file workspace runs (forked outline workers): the server
    process and every child it had are gone."""
    for i in range(40):
        (workspace / f"mod{i}.py").write_text(SAVE.replace('"out"', f'"out{i}"') + "\n" * i)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    client = await SERVER.start()
    try:
        await _start(client, workspace)
        pid = client._server.pid
        _open(client, workspace / "mod0.py")
        deadline = time.monotonic() + 5
        children: set[int] = set()
        while time.monotonic() < deadline and not children:
            children |= _children(pid)
            await asyncio.sleep(0.02)
        await asyncio.wait_for(client.shutdown_async(None), WAIT)
        client.exit(None)
        await asyncio.wait_for(client._server.wait(), WAIT)
        assert client._server.returncode == 0
        assert not _alive(pid)
        deadline = time.monotonic() + 10
        while any(_alive(c) for c in children) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(_alive(c) for c in children), children
    finally:
        await client.stop()


@pytest.mark.asyncio
async def test_closed_stdin_ends_the_server(workspace: Path):
    client = await SERVER.start()
    try:
        await _start(client, workspace)
        pid = client._server.pid
        client._server.stdin.close()
        await asyncio.wait_for(client._server.wait(), WAIT)
        assert not _alive(pid)
    finally:
        await client.stop()


PROBE = """
import atexit, sys, runpy
def report():
    print("LOADED:" + ",".join(sorted({m.split(".")[0] for m in sys.modules
                                       if m.split(".")[0] in ("pygls", "lsprotocol", "cattrs")})), file=sys.stderr)
atexit.register(report)
sys.argv = ["dslint", *sys.argv[1:]]
runpy.run_module("dslint", run_name="__main__")
"""


@pytest.mark.parametrize("args", [["check", "--no-cache", "--format", "json"],
                                  ["check", "--no-cache", "--format", "json", "--select", "DSL1"]])
def test_check_never_imports_pygls(tmp_path, args):
    (tmp_path / "save.py").write_text(SAVE)
    out = subprocess.run([sys.executable, "-c", PROBE, *args, "save.py"], capture_output=True, text=True,
                         timeout=WAIT, cwd=tmp_path, env=_env())
    assert [f["code"] for f in json.loads(out.stdout)["findings"]] == ["DSL101"]
    assert [line for line in out.stderr.splitlines() if line.startswith("LOADED:")] == ["LOADED:"], out.stderr


@pytest.mark.asyncio
async def test_file_changed_on_disk_is_read_again(client: LanguageClient, workspace: Path):
    """A config that is not open, changed on disk: the client's watched-file event makes the next check read
    it (the server registered the watcher), and the open script's finding follows it."""
    (workspace / "gen.py").write_text(GEN)
    (workspace / "run.sh").write_text(RUN_GEN)
    (workspace / "ds_config.json").write_text(ZERO % 3)
    script = _open(client, workspace / "gen.py")
    assert "DSL104" in _codes(await _diagnostics(client, script, 1))
    assert lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES in client.registrations
    (workspace / "ds_config.json").write_text(ZERO % 2)
    count = len(client.published)
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
        uri=(workspace / "ds_config.json").as_uri(), type=lsp.FileChangeType.Changed)]))
    deadline = time.monotonic() + WAIT
    while len(client.published) == count and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert client.published[-1].uri == script and "DSL104" not in _codes(client.published[-1].diagnostics)


@pytest.mark.asyncio
async def test_hover_on_a_code_in_a_comment(client: LanguageClient, workspace: Path):
    text = SAVE.replace('engine.save_checkpoint("out")', 'engine.save_checkpoint("out")  # dslint: ignore[DSL101]')
    (workspace / "save.py").write_text(text)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    uri = _open(client, workspace / "save.py")
    assert "DSL101" not in _codes(await _diagnostics(client, uri, 1))        # suppressed, as by `check`
    line = text.splitlines().index('    engine.save_checkpoint("out")  # dslint: ignore[DSL101]')
    character = text.splitlines()[line].index("DSL101") + 2
    hover = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=line, character=character))),
        WAIT)
    assert hover is not None and hover.contents.value.startswith("DSL101 ")
    nothing = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=0, character=0))), WAIT)
    assert nothing is None


@pytest.mark.asyncio
async def test_a_file_created_after_the_first_check_is_checked(client: LanguageClient, workspace: Path):
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    (workspace / "other.py").write_text("x = 1\n")
    first = _open(client, workspace / "other.py")
    await _diagnostics(client, first, 1)
    (workspace / "save.py").write_text(SAVE)          # written after the folder was read, no watcher event
    uri = _open(client, workspace / "save.py")
    assert "DSL101" in _codes(await _diagnostics(client, uri, 1))


# --- the analysis behind the server (dslint.server.workspace), without the protocol ---------------------------

def _findings(run, path):
    return [(f.code, f.line, f.column, f.message) for f in run.findings[str(path)]]


def test_recheck_of_edits_equals_a_fresh_check(workspace: Path):
    """A chain of edits re-checked from the previous run's sources (carried over, spliced trees) reports what
    a fresh check of the same texts reports, the edits' findings included."""
    from dslint.server.workspace import Workspace
    _infer_workspace(workspace)
    (workspace / "save.py").write_text(SAVE)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    infer, save = workspace / "infer.py", workspace / "save.py"
    folder = Workspace([workspace]).folder_of(str(infer))
    lines = INFER.split("\n")
    at = lines.index("        model.generate(ids, do_sample=True, max_new_tokens=16)")
    texts = [INFER,
             "\n".join(lines[:at] + ["        model.generate(ids, do_sample=True, max_new_tokens=16, synced_gpus=True)"]
                       + lines[at + 1:]),
             "\n".join(lines[:at + 1] + ["    if rank == 0:", "        dist.barrier()"] + lines[at + 1:]),
             INFER.replace("def main():", "def main(:"),
             INFER]
    seen = []
    for text in texts:
        run = folder.run({str(infer): text, str(save): SAVE})
        fresh = Workspace([workspace]).folder_of(str(infer)).run({str(infer): text, str(save): SAVE})
        assert _findings(run, infer) == _findings(fresh, infer)
        assert _findings(run, save) == _findings(fresh, save)
        seen.append({f[0] for f in _findings(run, infer)})
    assert "DSL104" in seen[0] and "DSL104" not in seen[1] and "DSL101" in seen[2] and seen[3] == {"DSL001"}
    assert seen[4] == seen[0]


def test_a_cancelled_run_leaves_a_usable_state(workspace: Path):
    """`stop` turning true mid-run raises Cancelled (between phases, files and rules); the next run, from
    whatever the cancelled one left, reports what a fresh check does."""
    from dslint.engine import Cancelled
    from dslint.server.workspace import Workspace
    _infer_workspace(workspace)
    infer = workspace / "infer.py"
    expected = _findings(Workspace([workspace]).folder_of(str(infer)).run({str(infer): INFER}), infer)
    assert any(code == "DSL104" for code, *_ in expected)
    folder = Workspace([workspace]).folder_of(str(infer))
    for budget in (0, 1, 3, 6, 10):
        asked = [0]

        def stop():
            asked[0] += 1
            return asked[0] > budget

        with pytest.raises(Cancelled):
            folder.run({str(infer): INFER.replace("max_new_tokens=16", f"max_new_tokens={budget}")}, stop)
    edited = INFER.replace("max_new_tokens=16", "max_new_tokens=17")
    assert _findings(folder.run({str(infer): edited}), infer) == \
        _findings(Workspace([workspace]).folder_of(str(infer)).run({str(infer): edited}), infer)
    assert _findings(folder.run({str(infer): INFER}), infer) == expected


def test_result_cache_answers_documents_whose_context_did_not_change(workspace: Path, tmp_path, monkeypatch):
    """With `check`'s result cache, a new server's first run answers from what an earlier one cached, and an
    edit re-analyses only the open documents whose launch-unit context holds the edited file."""
    from dslint.pipeline.rule_runs import RuleRun
    from dslint.server.workspace import Workspace
    _infer_workspace(workspace)
    (workspace / "save.py").write_text(SAVE)
    (workspace / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    infer, save = str(workspace / "infer.py"), str(workspace / "save.py")
    cache = tmp_path / "cache"
    first = Workspace([workspace], cache_dir=cache).folder_of(infer).run({infer: INFER, save: SAVE})
    analysed: list[str] = []
    original = RuleRun.results_for
    monkeypatch.setattr(RuleRun, "results_for",
                        lambda self, source, view: analysed.append(Path(source.path).name) or original(self, source,
                                                                                                     view))
    folder = Workspace([workspace], cache_dir=cache).folder_of(infer)
    second = folder.run({infer: INFER, save: SAVE})
    assert analysed == []
    assert _findings(second, infer) == _findings(first, infer) and _findings(second, save) == _findings(first, save)
    third = folder.run({infer: INFER, save: SAVE + "steps = 1\n"})
    assert analysed == ["save.py"]
    assert _findings(third, infer) == _findings(first, infer)


def test_server_without_pygls_says_how_to_install_it(tmp_path):
    shadow = tmp_path / "shadow" / "pygls"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('pygls is not installed', name='pygls')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "shadow"), env["PYTHONPATH"]])
    out = subprocess.run([sys.executable, "-m", "dslint", "server"], capture_output=True, text=True, timeout=WAIT,
                         env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "pip install 'dslint[server]'" in out.stderr and out.stdout == ""


def test_statement_offsets_carried_through_a_chain_of_splices():
    """The re-check after each edit splices the new tree from the previous one (`sources.splice`) and carries
    the top-level statements' offsets along, for the next splice: they are what `statement_offsets` computes
    on the spliced tree (node identity included), edit after edit."""
    import random

    from dslint.sources import PythonSource, statement_offsets
    from tests.test_fix_rounds import _real_files, _same_tree, random_edits
    rng = random.Random(32)
    snippets = [", synced_gpus=True", "x", "\n", "# c\n", "    y = 1\n", "pass\n", "; z = 2", "'s'", ""]
    carried = 0
    for path in _real_files():
        previous = PythonSource("t.py", path.read_text())
        previous.module       # noqa: B018 -- parsed, as the first check parses it
        for _ in range(6):
            starts = [a for a, _, _ in statement_offsets(previous)]
            _, text = next(random_edits(rng, previous.text, starts, snippets, 1))
            src = PythonSource("t.py", text)
            src.__dict__["_derived_from"] = previous
            module = src.module
            pieces = src.__dict__.pop("_dslint_fix_pieces", None)
            if pieces is not None:
                assert _same_tree(module, text)
                fresh = statement_offsets(src)
                assert [(a, b) for a, b, _ in pieces] == [(a, b) for a, b, _ in fresh], path
                assert all(x is y for (_, _, x), (_, _, y) in zip(pieces, fresh))
                carried += 1
            if src.__dict__.get("_libcst_error") is None and src.compiles:
                previous = src
    assert carried >= 20


def test_each_workspace_folder_has_its_own_settings(tmp_path):
    """Two workspace folders: a document is checked with the `[tool.dslint]` of its own folder (the innermost
    one holding it); a document outside both is checked with its own folder as the workspace."""
    from dslint.server.workspace import Workspace
    quiet, loud, loose = tmp_path / "quiet", tmp_path / "loud", tmp_path / "loose"
    for root in (quiet, loud, loose):
        root.mkdir()
        (root / "save.py").write_text(SAVE)
        (root / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2}\n')
    (quiet / "pyproject.toml").write_text('[tool.dslint]\nignore = ["DSL101"]\n')
    nested = loud / "sub"
    nested.mkdir()
    (nested / "pyproject.toml").write_text('[tool.dslint]\nignore = ["DSL101"]\n')
    (nested / "save.py").write_text(SAVE)
    ws = Workspace([quiet, loud, nested])
    codes = {}
    for path in (quiet / "save.py", loud / "save.py", nested / "save.py", loose / "save.py"):
        folder = ws.folder_of(str(path))
        codes[path.parent.name] = [f[0] for f in _findings(folder.run({str(path): SAVE}), path)]
    assert codes == {"quiet": [], "loud": ["DSL101"], "sub": [], "loose": ["DSL101"]}
    assert ws.folder_of(str(nested / "save.py")).root == nested.resolve()
