"""Pre-flight on real GPUs with NCCL (ISSUE 7): run ``dslint preflight`` on the reference hazards and their
clean twins, on N GPUs (1, 2 or 4), with the machine's own PyTorch. Not collected by pytest (see conftest.py).

    python3 tests/gpu/run_gpu_checks.py [--gpus N] [--launcher deepspeed|torchrun] [--timeout 15]
                                        [--cases a,b] [--out DIR] [--name gpu_checks] [--list]

Without a GPU it falls back to CPU + gloo with 2 ranks (DS_ACCELERATOR=cpu), to check the script itself.

For every case it records: the exit code (the JSON report's, and the launcher's), the time to diagnosis
(from the rank's mark at the start of its dry work, or at the stall, to the first line of the report), the
report, the output tail, the processes carrying the run's marker that were left behind, the GPU memory in use
per GPU before and after (nvidia-smi; torch.cuda.mem_get_info in a subprocess if there is no nvidia-smi),
and, sampled during the run, which GPUs each rank's process held memory on (a rank holding memory on a GPU
other than its own has created a stray CUDA context there). Writes ``<name>.json`` and ``<name>.md`` to
``--out`` (default ``$OUT``, else ./gpu-out).

With N = 1 the multi-rank hazards cannot diverge (one rank runs every forward, has every gradient and stops
generating alone): they are expected to pass there, and the run still validates the NCCL path end to end.
The CUDA-only stream-stall cases check that a collective queued behind a long kernel counts as pending.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MARKER = "DSLINT_GPU_CHECK_RUN"
PASS, DIVERGENCE, HANG = 0, 1, 3


@dataclass
class Case:
    name: str
    script: str
    args: list[str]
    hazard: bool
    # (exit code, diagnosis rule code or None) expected on >= 2 ranks; a hazard passes on 1 rank
    expect: tuple[int, str | None] = (PASS, None)
    min_world: int = 1
    cuda_only: bool = False
    uses_deepspeed: bool = True
    env: dict[str, str] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)
    expect_single: tuple[int, str | None] | None = None  # what 1 rank should give, if not a pass

    def expected(self, world: int) -> tuple[int, str | None]:
        if world >= 2:
            return self.expect
        return self.expect_single or (PASS, None)


CASES = [
    Case("moe_uneven_eval", "moe_uneven_eval.py", [], True, (HANG, "DSL102")),
    Case("moe_uneven_eval_twin", "moe_uneven_eval.py", ["--even_slices"], False),
    Case("conditional_param_zero2", "conditional_param.py", ["--stage", "2"], True, (DIVERGENCE, "DSL303")),
    Case("conditional_param_zero2_twin", "conditional_param.py", ["--stage", "2", "--images_everywhere"], False),
    Case("zero3_generate", "zero3_generate.py", [], True, (HANG, "DSL104")),
    Case("zero3_generate_twin", "zero3_generate.py", ["--synced_gpus"], False),
    # a post-issue hang (p2p is not compared before issue): only the watchdog's timeout can see it
    Case("unmatched_recv", "unmatched_recv.py", [], True, (HANG, None), min_world=2, uses_deepspeed=False),
    Case("unmatched_recv_twin", "unmatched_recv.py", ["--matched"], False, min_world=2, uses_deepspeed=False),
    # a sync all_reduce queued behind an 8 s kernel, --timeout 2: pending on the stream although the host
    # call returned; without the stream marks (the tracer before ISSUE 7) the run passes instead
    Case("stream_stall", "stream_stall.py", ["--stall_s", "8"], True, (HANG, None), cuda_only=True,
         uses_deepspeed=False, options=["--timeout", "2"], expect_single=(HANG, None)),
    Case("stream_stall_no_marks", "stream_stall.py", ["--stall_s", "8"], True, (PASS, None), cuda_only=True,
         uses_deepspeed=False, options=["--timeout", "2"], env={"DSLINT_PREFLIGHT_STREAM_MARKS": "0"}),
]


# ---- the machine ------------------------------------------------------------------------------------------
def gpu_count() -> int:
    if os.environ.get("DSLINT_GPU_FORCE_CPU") == "1":
        return 0
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        if out.returncode == 0:
            return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def gpu_memory_used() -> dict[str, float] | None:
    """MiB in use per GPU index."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return {line.split(",")[0].strip(): float(line.split(",")[1]) for line in out.stdout.strip().splitlines()}
    code = ("import json,torch; print(json.dumps({str(i): (lambda f,t: (t-f)/2**20)(*torch.cuda.mem_get_info(i)) "
            "for i in range(torch.cuda.device_count())}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def compute_apps() -> list[tuple[int, str, float]]:
    """(pid, GPU uuid, MiB) of every process holding GPU memory."""
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    apps = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            try:
                apps.append((int(parts[0]), parts[1], float(parts[2])))
            except ValueError:
                apps.append((int(parts[0]), parts[1], -1.0))
    return apps


def processes_with_marker(marker: str) -> list[int]:
    found, needle = [], f"{MARKER}={marker}".encode()
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- one run ----------------------------------------------------------------------------------------------
def command(case: Case, launcher: str, world: int, timeout: float, report: Path) -> list[str]:
    pre = ["preflight", "--timeout", str(timeout), "--report", str(report), *case.options,
           str(FIXTURES / case.script), *case.args]
    port = str(free_port())
    if launcher == "deepspeed":
        return [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(world), "--master_port", port,
                "--module", "dslint", *pre]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port", port,
            "-m", "dslint", *pre]


def base_env(cuda: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env.update({"PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"})
    # NVLink multicast stays off (the device machines' rule), also for processes the launchers start
    env.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
    if not cuda:
        env["DS_ACCELERATOR"] = "cpu"
        env["DSLINT_GPU_FORCE_CPU"] = "1"
    return env


def run_case(case: Case, launcher: str, world: int, timeout: float, cuda: bool, workdir: Path) -> dict:
    report_path = workdir / f"{case.name}-{launcher}.json"
    report_path.unlink(missing_ok=True)
    marker = uuid.uuid4().hex
    env = base_env(cuda)
    env.update(case.env)
    env[MARKER] = marker
    cmd = command(case, launcher, world, timeout, report_path)
    mem_before = gpu_memory_used() if cuda else None
    apps_before = {pid for pid, _, _ in compute_apps()} if cuda else set()
    lines: list[tuple[float, str]] = []
    held: dict[int, set[str]] = {}
    done = threading.Event()

    def sample() -> None:  # which GPUs the run's processes hold memory on
        while not done.wait(1.0):
            ours = set(processes_with_marker(marker))
            for pid, uuid_, _ in compute_apps():
                if pid in ours:
                    held.setdefault(pid, set()).add(uuid_)

    start_wall, start = time.time(), time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sampler = threading.Thread(target=sample, daemon=True)
    if cuda:
        sampler.start()
    limit = timeout + 90
    killed = False
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        killed = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    wall = time.monotonic() - start
    reader.join(timeout=10)
    deadline = time.monotonic() + 15
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    leftovers = processes_with_marker(marker)
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    done.set()
    gpu_leftover_apps: list = []
    mem_after = None
    if cuda:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            gpu_leftover_apps = [a for a in compute_apps() if a[0] not in apps_before]
            if not gpu_leftover_apps:
                break
            time.sleep(0.5)
        mem_after = gpu_memory_used()
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    marks = [float(text.split()[2]) for _, text in lines if text.startswith("DSLINT_GPU_MARK ")]
    report_at = next((t for t, text in lines if text.startswith("dslint preflight:")), None)
    exit_code = report.get("exit_code") if report else None
    diagnosis_code = ((report or {}).get("diagnosis") or {}).get("code")
    expected_exit, expected_code = case.expected(world)
    mem_delta = ({k: round(mem_after.get(k, 0.0) - v, 1) for k, v in mem_before.items()}
                 if mem_before and mem_after else None)
    problems = []
    effective = exit_code if exit_code is not None else proc.returncode
    if effective != expected_exit:
        problems.append(f"exit {effective} (launcher {proc.returncode}), expected {expected_exit}")
    if expected_code and diagnosis_code != expected_code:
        problems.append(f"diagnosis {diagnosis_code}, expected {expected_code}")
    if report is None:
        problems.append("no JSON report")
    if killed:
        problems.append(f"killed after {limit:g} s")
    if leftovers:
        problems.append(f"processes left behind: {leftovers}")
    if gpu_leftover_apps:
        problems.append(f"GPU processes left behind: {gpu_leftover_apps}")
    if mem_delta and any(abs(d) > 64 for d in mem_delta.values()):
        problems.append(f"GPU memory in use changed by {mem_delta} MiB")
    stray = {pid: sorted(g) for pid, g in held.items() if len(g) > 1}
    if stray:
        problems.append(f"ranks held memory on more than one GPU (stray CUDA contexts): {stray}")
    pending = {}
    for rank, info in ((report or {}).get("ranks") or {}).items():
        if isinstance(info, dict) and info.get("pending"):
            p = info["pending"]
            pending[rank] = {k: p.get(k) for k in ("op", "group", "seq", "module", "phase", "async", "on_stream")}
    return {
        "case": case.name, "launcher": launcher, "world_size": world, "backend": "nccl" if cuda else "gloo",
        "hazard": case.hazard, "command": " ".join(cmd[1:]), "env": case.env,
        "expected": {"exit_code": expected_exit, "diagnosis": expected_code},
        "exit_code": exit_code, "launcher_exit_code": proc.returncode,
        "verdict": (report or {}).get("verdict"), "diagnosis": diagnosis_code,
        "detail": ((report or {}).get("abort") or {}).get("detail"),
        "pending": pending,
        "wall_s": round(wall, 2),
        "report_after_launch_s": round(report_at - start_wall, 2) if report_at else None,
        "time_to_diagnosis_s": round(report_at - min(marks), 2) if report_at and marks else None,
        "processes_left": leftovers, "gpu_processes_left": gpu_leftover_apps,
        "gpu_mem_before_mib": mem_before, "gpu_mem_after_mib": mem_after, "gpu_mem_delta_mib": mem_delta,
        "gpus_held_per_pid": {str(k): sorted(v) for k, v in held.items()},
        "ok": not problems, "problems": problems,
        "report": report, "output_tail": "\n".join(text for _, text in lines)[-5000:],
    }


# ---- summary ----------------------------------------------------------------------------------------------
def markdown(summary: dict) -> str:
    out = [f"# dslint preflight on GPU: {summary['world_size']} rank(s), {summary['backend']}, "
           f"launcher {summary['launcher']}", "",
           f"torch {summary['torch']}, deepspeed {summary['deepspeed']}, GPUs: {summary['gpus']}, "
           f"--timeout {summary['timeout_s']:g} s", "",
           "| case | expected | exit | diagnosis | time to diagnosis (s) | wall (s) | left behind | GPU mem Δ (MiB) | ok |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["results"]:
        exp = f"{r['expected']['exit_code']} {r['expected']['diagnosis'] or ''}".strip()
        left = "none" if not (r["processes_left"] or r["gpu_processes_left"]) else \
            f"{len(r['processes_left'])} proc, {len(r['gpu_processes_left'])} GPU proc"
        out.append(f"| {r['case']} | {exp} | {r['exit_code']} (launcher {r['launcher_exit_code']}) | "
                   f"{r['diagnosis'] or r['verdict'] or '-'} | {r['time_to_diagnosis_s']} | {r['wall_s']} | {left} | "
                   f"{r['gpu_mem_delta_mib']} | {'yes' if r['ok'] else 'NO: ' + '; '.join(r['problems'])} |")
    if summary["skipped"]:
        out += ["", "Not run: " + "; ".join(summary["skipped"])]
    out += [""]
    for r in summary["results"]:
        if r["detail"] or r["pending"]:
            out.append(f"- **{r['case']}**: {r['detail'] or ''} pending: {json.dumps(r['pending'])}")
    return "\n".join(out) + "\n"


def versions() -> tuple[str, str]:
    code = "import torch,deepspeed; print(torch.__version__, deepspeed.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=base_env(gpu_count() > 0))
    parts = out.stdout.strip().split()
    return (parts[-2], parts[-1]) if len(parts) >= 2 else ("?", "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, help="world size (default: GPUs on the machine, at most 4; 2 on CPU)")
    parser.add_argument("--launcher", choices=("deepspeed", "torchrun"), default="deepspeed",
                        help="launcher for the DeepSpeed cases (the plain torch.distributed ones use torchrun)")
    parser.add_argument("--timeout", type=float, default=15.0, help="dslint preflight --timeout (15)")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-out")
    parser.add_argument("--name", default="gpu_checks", help="output file stem")
    parser.add_argument("--list", action="store_true", help="print the cases and commands, run nothing")
    args = parser.parse_args()

    gpus = gpu_count()
    cuda = gpus > 0
    world = args.gpus or (min(gpus, 4) if cuda else 2)
    if cuda and world > gpus:
        print(f"asked for {world} ranks but the machine has {gpus} GPU(s)", file=sys.stderr)
        return 2
    chosen = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"dslint-gpu-{uuid.uuid4().hex[:8]}"
    workdir.mkdir(parents=True)
    results, skipped = [], []
    for case in chosen:
        launcher = args.launcher if case.uses_deepspeed else "torchrun"
        if case.min_world > world:
            skipped.append(f"{case.name} (needs {case.min_world} ranks)")
            continue
        if case.cuda_only and not cuda:
            skipped.append(f"{case.name} (needs CUDA)")
            continue
        if args.list:
            print(case.name, "expect", case.expected(world), ":",
                  " ".join(command(case, launcher, world, args.timeout, workdir / "report.json")))
            continue
        print(f"== {case.name} ({launcher}, {world} rank(s), {'nccl' if cuda else 'gloo'})", flush=True)
        result = run_case(case, launcher, world, args.timeout, cuda, workdir)
        results.append(result)
        print(f"   exit {result['exit_code']} (launcher {result['launcher_exit_code']}) verdict {result['verdict']} "
              f"diagnosis {result['diagnosis']} ttd {result['time_to_diagnosis_s']} s wall {result['wall_s']} s "
              f"mem Δ {result['gpu_mem_delta_mib']} -> {'ok' if result['ok'] else result['problems']}", flush=True)
        if not result["ok"]:
            print(result["output_tail"][-3000:], flush=True)
    if args.list:
        print("not run:", skipped)
        return 0
    torch_v, ds_v = versions()
    summary = {"world_size": world, "backend": "nccl" if cuda else "gloo", "launcher": args.launcher,
               "gpus": gpus, "timeout_s": args.timeout, "torch": torch_v, "deepspeed": ds_v,
               "python": sys.version.split()[0], "skipped": skipped,
               "all_ok": all(r["ok"] for r in results), "results": results}
    (out / f"{args.name}.json").write_text(json.dumps(summary, indent=2, default=str))
    (out / f"{args.name}.md").write_text(markdown(summary))
    print(markdown(summary))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if summary["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
