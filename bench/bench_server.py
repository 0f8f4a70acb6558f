"""`dslint server` (issue 32): diagnostics latency after a one-line edit in a warm server, and the memory of a
server holding a large workspace. A real LSP client (pygls) drives `python -m dslint server` over stdio.

    nice -n 10 python bench/bench_server.py [--edits 40] [--root R --file F] [--memory-root M [--memory-file G]]

Latency: the workspace is a scratch copy of R (default: the corpus repository open-instruct, whose
`open_instruct/grpo_fast.py` has 2,413 lines; without the corpus a 2,400-line training script is generated);
a DSL104 hazard (a 7-line function) is appended to F so that every check publishes a finding (`--no-hazard`:
F as it is); F is opened, its first diagnostics awaited (the cold check of the folder), then 3 warm-up edits, then
`--edits` one-line edits, each an incremental `didChange` appending a statement (`; _edit_N = N`) to another
single-line statement inside a function (a code edit: the file's tree, outline and analyses change);
the time from sending the change to receiving that version's `publishDiagnostics` is measured (the server's
debounce is set to 0 through `initializationOptions`, so this is the check itself, not the debounce). Prints
the median and the 95th percentile, the server's CPU time per edit (/proc), and the load average.

Memory: the server opens one file of M (default /tmp/realworld/FlagAI, 1,057 .py files; without it a 900-file
workspace is generated) and its diagnostics are awaited -- the first check reads the whole folder (outlines,
launch units) -- then one edit; the server's resident set (VmRSS) and peak (VmHWM) are read from /proc. The
same again with a second server on the result cache the first one wrote. Each run has a result cache of its own
(DSLINT_CACHE_DIR in a scratch folder).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path("/tmp/realworld")
WAIT = 600.0


def _generated_script(lines: int = 2400) -> str:
    """A DeepSpeed training script of about `lines` lines: helpers, a model, a rank-0 save (a finding)."""
    out = ["import argparse", "import deepspeed", "import torch", "import torch.distributed as dist", "", ""]
    k = 0
    while len(out) < lines - 30:
        out += [f"def helper_{k}(batch, scale={k}):", f"    total_{k} = 0",
                f"    for i, item in enumerate(batch):", f"        value = item * scale + i",
                f"        if value > {k}:", f"            total_{k} += value", "        else:",
                f"            total_{k} -= 1", f"    return total_{k}", "", ""]
        k += 1
    out += ["def main():", "    parser = argparse.ArgumentParser()",
            "    parser.add_argument('--local_rank', type=int)",
            "    args = parser.parse_args()", "    model = torch.nn.Linear(4, 4)",
            "    engine, _, _, _ = deepspeed.initialize(model=model, config='ds_config.json')",
            "    for step in range(10):", "        loss = engine(torch.randn(4, 4)).sum()",
            "        engine.backward(loss)", "        engine.step()", "    if dist.get_rank() == 0:",
            "        engine.save_checkpoint('out')", "", "", "if __name__ == '__main__':", "    main()", ""]
    return "\n".join(out)


# appended to the edited file (as bench/fix_timing.py does): a DSL104 hazard, so that every re-check publishes a
# finding with its trace and fix (the corpus file alone has none)
HAZARD = ("\n\ndef _dslint_probe(loader, args, net, expert):\n    import deepspeed\n"
          "    from deepspeed.moe.layer import MoE\n"
          "    model = net(moe=MoE(hidden_size=512, expert=expert, num_experts=8, ep_size=4))\n"
          "    engine, *_ = deepspeed.initialize(model=model, args=args)\n"
          "    for batch in loader:\n        out = engine.module.generate(**batch, do_sample=True)\n")


def _workspace(args, scratch: Path) -> tuple[Path, Path]:
    root = scratch / "latency"
    source = Path(args.root) if args.root else CORPUS / "open-instruct"
    if source.is_dir() and (source / args.file).is_file():
        shutil.copytree(source, root, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        target = root / args.file
        if not args.no_hazard:
            target.write_text(target.read_text().rstrip("\n") + "\n" + HAZARD)
        return root, target
    root.mkdir()
    (root / "train.py").write_text(_generated_script())
    (root / "ds_config.json").write_text('{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}')
    (root / "run.sh").write_text("#!/bin/bash\ndeepspeed --num_gpus 8 train.py\n")
    return root, root / "train.py"


def _memory_workspace(args, scratch: Path) -> tuple[Path, Path]:
    source = Path(args.memory_root) if args.memory_root else CORPUS / "FlagAI"
    if source.is_dir():
        files = sorted(p for p in source.rglob("*.py") if ".git" not in p.parts)
        if args.memory_file:
            target = source / args.memory_file
        else:
            target = next((p for p in files if "deepspeed.initialize" in p.read_text(errors="replace")), files[0])
        return source, target
    root = scratch / "memory"
    for i in range(900):
        pkg = root / f"pkg{i // 30}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / f"mod{i}.py").write_text(_generated_script(60 + i % 200).replace("helper_", f"h{i}_"))
    return root, root / "pkg0" / "mod0.py"


def _edit_lines(text: str, count: int) -> list[int]:
    """0-based lines of single-line simple statements inside functions, spread over the file."""
    tree = ast.parse(text)
    lines = text.split("\n")
    found = sorted({n.lineno - 1 for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in ast.walk(f) if isinstance(n, (ast.Assign, ast.Expr, ast.Return, ast.AugAssign))
                    and n.lineno == n.end_lineno and not lines[n.lineno - 1].rstrip().endswith("\\")
                    and "#" not in lines[n.lineno - 1]})
    step = max(1, len(found) // count)
    return found[::step][:count]


def _proc(pid: int) -> dict:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024      # MiB
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        pass
    return out


class Session:
    def __init__(self) -> None:
        self.client = LanguageClient("dslint-bench", "1")
        self.received: dict[tuple[str, int], float] = {}
        self.events: dict[tuple[str, int], asyncio.Event] = {}
        self.diagnostics: dict[tuple[str, int], list] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: lsp.PublishDiagnosticsParams) -> None:
            key = (params.uri, params.version)
            self.received[key] = time.perf_counter()
            self.diagnostics[key] = list(params.diagnostics)
            self.events.setdefault(key, asyncio.Event()).set()

        @self.client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def register(params: lsp.RegistrationParams) -> None:
            return None

    async def start(self, root: Path, cache: Path) -> int:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "DSLINT_CACHE_DIR": str(cache)}
        await self.client.start_io(sys.executable, "-m", "dslint", "server", env=env)
        await asyncio.wait_for(self.client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), process_id=os.getpid(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options={"debounce_ms": 0})), WAIT)
        self.client.initialized(lsp.InitializedParams())
        return self.client._server.pid

    async def wait(self, uri: str, version: int) -> float:
        event = self.events.setdefault((uri, version), asyncio.Event())
        await asyncio.wait_for(event.wait(), WAIT)
        return self.received[(uri, version)]

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=text)))
        return uri

    def change_line(self, uri: str, version: int, line: int, old: str, new: str) -> None:
        rng = lsp.Range(start=lsp.Position(line=line, character=0), end=lsp.Position(line=line, character=len(old)))
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)]))

    async def stop(self) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), WAIT)
        self.client.exit(None)
        await self.client.stop()


def _utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


async def latency(args, scratch: Path) -> None:
    root, target = _workspace(args, scratch)
    text = target.read_text()
    lines = text.split("\n")
    edits = _edit_lines(text, args.edits + 3)
    py_files = sum(1 for _ in root.rglob("*.py"))
    print(f"latency: {target.relative_to(root)} ({len(lines)} lines) in a workspace of {py_files} .py files")
    session = Session()
    pid = await session.start(root, scratch / "cache-latency")
    t0 = time.perf_counter()
    uri = session.open(target, text)
    cold = await session.wait(uri, 1) - t0
    print(f"  first diagnostics (cold check of the folder): {cold:.2f} s, "
          f"{len(session.diagnostics[(uri, 1)])} diagnostics")
    times, cpus = [], []
    version = 1
    for n, line in enumerate(edits):
        version += 1
        old = lines[line]
        new = old + f"; _edit_{n} = {n}"         # a code edit: one more statement, not a comment
        lines[line] = new
        before = _proc(pid).get("cpu", 0.0)
        sent = time.perf_counter()
        session.change_line(uri, version, line, old, new)
        got = await session.wait(uri, version)
        if n >= 3:          # the first three are warm-up
            times.append(got - sent)
            cpus.append(_proc(pid).get("cpu", 0.0) - before)
    await session.stop()
    times_ms = sorted(t * 1000 for t in times)
    p50 = statistics.median(times_ms)
    p95 = times_ms[min(len(times_ms) - 1, round(0.95 * (len(times_ms) - 1)))]
    print(f"  {len(times_ms)} one-line edits: p50 {p50:.0f} ms, p95 {p95:.0f} ms, min {times_ms[0]:.0f} ms, "
          f"max {times_ms[-1]:.0f} ms; server CPU per edit: median {statistics.median(cpus) * 1000:.0f} ms")
    print(f"  targets: p50 <= 150 ms {'met' if p50 <= 150 else 'NOT met'}, "
          f"p95 <= 300 ms {'met' if p95 <= 300 else 'NOT met'}")


async def memory(args, scratch: Path) -> None:
    root, target = _memory_workspace(args, scratch)
    py_files = sum(1 for p in root.rglob("*.py") if ".git" not in p.parts)
    print(f"memory: workspace {root} ({py_files} .py files), opened {target.relative_to(root)}")
    text = target.read_text(errors="replace")
    line = _edit_lines(text, 1)
    for label in ("empty result cache", "cache of the first server"):
        session = Session()
        pid = await session.start(root, scratch / "cache-memory")
        idle = _proc(pid)
        t0 = time.perf_counter()
        uri = session.open(target, text)
        await session.wait(uri, 1)
        first = time.perf_counter() - t0
        loaded = _proc(pid)
        if line:
            old = text.split("\n")[line[0]]
            sent = time.perf_counter()
            session.change_line(uri, 2, line[0], old, old + "; _edit = 0")
            await session.wait(uri, 2)
            edit = time.perf_counter() - sent
        edited = _proc(pid)
        await session.stop()
        print(f"  {label}: started: RSS {idle.get('VmRSS', 0):.0f} MiB; first diagnostics after {first:.1f} s: "
              f"RSS {loaded.get('VmRSS', 0):.0f} MiB; after an edit ({edit * 1000:.0f} ms): RSS "
              f"{edited.get('VmRSS', 0):.0f} MiB, peak (VmHWM) {edited.get('VmHWM', 0):.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--root", help="workspace to copy (default: the corpus's open-instruct)")
    parser.add_argument("--file", default="open_instruct/grpo_fast.py", help="the file to edit, in --root")
    parser.add_argument("--memory-root", help="workspace for the memory figure (default: the corpus's FlagAI)")
    parser.add_argument("--memory-file", help="file of --memory-root to open")
    parser.add_argument("--no-hazard", action="store_true", help="edit --file as it is (no DSL104 probe appended)")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    scratch = Path(tempfile.mkdtemp(prefix="dslint-bench-server-"))
    try:
        if not args.skip_latency:
            asyncio.run(latency(args, scratch))
        if not args.skip_memory:
            asyncio.run(memory(args, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
