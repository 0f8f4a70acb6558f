"""Launching real multi-process pre-flight runs on CPU (gloo), every wait bounded, every process accounted for.

Each run gets a unique marker in its environment; after the run no process carrying it may remain.
The launcher is started in its own session so a timeout can kill exactly what the test started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "runtime"
RUN_MARKER = "DSLINT_PREFLIGHT_TEST_RUN"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/runtime" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.runtime)


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    })
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_with_marker(marker: str) -> list[int]:
    found = []
    needle = f"{RUN_MARKER}={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def own_shm_files(port: str) -> list[Path]:
    """``deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>``: the segments of the ranks of the run on ``port``."""
    return sorted(Path("/dev/shm").glob(f"deepspeed_*_{os.getuid()}_*_{port}_*"))


@dataclass
class PreflightRun:
    returncode: int
    output: str
    report: dict | None
    wall_s: float


@pytest.fixture(scope="session")
def warm_shm_op():
    """DeepSpeed JIT-builds its CPU shm comm op on the first init_distributed (40–80 s); build it once."""
    code = ("from deepspeed.accelerator import get_accelerator; "
            "get_accelerator().create_op_builder('ShareMemCommBuilder').load()")
    subprocess.run([sys.executable, "-c", code], env=base_env(), capture_output=True, timeout=240, check=True)


@pytest.fixture
def preflight(tmp_path, warm_shm_op):
    """Run ``dslint preflight`` under a launcher; returns exit code, output, JSON report, wall time."""

    def run(script: str, *script_args: str, launcher: str = "deepspeed", ranks: int = 2, timeout: float = 20,
            options: tuple[str, ...] = (), limit_s: float = 150, plain: bool = False,
            check_left: bool = False) -> PreflightRun:
        """``plain``: run the script itself under the launcher (no ``dslint preflight``), e.g. for guard().
        ``check_left``: fail when the run left a scratch folder or a /dev/shm file of the pre-flight's own
        (DeepSpeed's own shm workspaces created by the run are removed either way)."""
        report = tmp_path / f"report-{uuid.uuid4().hex[:6]}.json"
        marker = uuid.uuid4().hex
        port = str(free_port())
        pre = ["preflight", "--timeout", str(timeout), "--report", str(report), *options,
               str(FIXTURES / script), *script_args]
        if plain:
            pre = [str(FIXTURES / script), *script_args]
            cmd = ["torchrun", "--nproc-per-node", str(ranks), "--master-port", port, *pre]
        elif launcher == "deepspeed":
            cmd = ["deepspeed", "--num_gpus", str(ranks), "--master_port", port, "--module", "dslint", *pre]
        elif launcher == "none":
            cmd = []
        elif launcher == "torchrun":
            cmd = ["torchrun", "--nproc-per-node", str(ranks), "--master-port", port, "-m", "dslint", *pre]
        else:
            raise ValueError(launcher)
        env = base_env()
        env[RUN_MARKER] = marker
        scratch_root = tmp_path / f"tmp-{marker[:6]}"  # the ranks' TMPDIR: their scratch folders land here
        scratch_root.mkdir()
        env["TMPDIR"] = str(scratch_root)
        shm_before = _shm_entries()
        start = time.monotonic()
        if launcher == "none":  # ranks started one by one, no launcher watching them (as on other nodes)
            run = _run_unwatched(pre, ranks, port, env, tmp_path, marker, limit_s, report, start)
            _assert_nothing_left(scratch_root, shm_before, check_left, port)
            return run
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in processes_with_marker(marker):
                os.kill(pid, signal.SIGKILL)
            output, _ = proc.communicate(timeout=10)
            pytest.fail(f"preflight run exceeded {limit_s} s:\n{output[-4000:]}")
        wall = time.monotonic() - start
        deadline = time.monotonic() + 10
        while processes_with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = processes_with_marker(marker)
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"processes left behind by the pre-flight run: {leftovers}\n{output[-3000:]}"
        shm = own_shm_files(port)  # DeepSpeed's CPU shm comm buffers of this run's ranks (named by its port)
        for path in shm:
            path.unlink(missing_ok=True)
        scratch = sorted(p.name for p in scratch_root.glob("dslint-preflight-*"))
        assert not scratch, f"scratch folders left behind by the pre-flight run: {scratch}\n{output[-3000:]}"
        assert not shm, f"/dev/shm files left behind by the run: {[p.name for p in shm]}\n{output[-3000:]}"
        data = json.loads(report.read_text()) if report.exists() else None
        _assert_nothing_left(scratch_root, shm_before, check_left, port)
        return PreflightRun(proc.returncode, output, data, wall)

    return run


def _shm_entries() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("deepspeed_") or "dslint" in n}
    except OSError:
        return set()


def _assert_nothing_left(scratch_root: Path, shm_before: set[str], check: bool, port: str) -> None:
    """No scratch folder (dslint-preflight-*) and no /dev/shm file of the pre-flight's own. DeepSpeed's CPU
    comm op never unlinks its workspaces (``deepspeed_*``, shm.cpp has no caller of shared_close), on a
    plain run too: those of this run's ranks (named by its port) are removed here, not counted against the
    pre-flight; nothing of another run is touched."""
    for path in own_shm_files(port):
        path.unlink(missing_ok=True)
    if not check:
        return
    left = sorted(p.name for p in scratch_root.glob("dslint-preflight-*"))
    assert not left, f"scratch folders left behind: {left}"
    own = sorted(n for n in _shm_entries() - shm_before if "dslint" in n)
    assert not own, f"/dev/shm files of the pre-flight left behind: {own}"


def _run_unwatched(pre, ranks, port, env, cwd, marker, limit_s, report, start) -> PreflightRun:
    """``python -m dslint preflight …`` once per rank with the env:// variables set by hand. Returns rank 0's
    exit code (the report writer's) and every rank's output."""
    procs = []
    for rank in range(ranks):
        rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks),
                        LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, "-m", "dslint", *pre], cwd=cwd, env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    outputs = []
    deadline = time.monotonic() + limit_s
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=10)
            outputs.append(out)
            pytest.fail(f"unwatched preflight run exceeded {limit_s} s:\n" + "\n".join(o[-2000:] for o in outputs))
        outputs.append(out)
    wall = time.monotonic() - start
    leftovers = processes_with_marker(marker)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes left behind: {leftovers}"
    data = json.loads(report.read_text()) if report.exists() else None
    output = "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n{o}" for r, (p, o) in enumerate(zip(procs, outputs)))
    return PreflightRun(procs[0].returncode, output, data, wall)
