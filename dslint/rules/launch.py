"""DSL5xx: launcher lines (`deepspeed …`, `torchrun …`, `accelerate launch …`) whose world size or ports
conflict with the rest of the run. Findings sit on the launcher line: that is where the fix goes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from dslint.findings import Severity
from dslint.rules.base import Clue, Diagnostic, Example, Rule, RuleContext

DEFAULT_PORT = "29500"      # deepspeed, torchrun and accelerate all default to 29500
PORT_OPTIONS = ("--master_port", "--master-port", "--main_process_port", "--main-process-port", "--rdzv-endpoint",
                "--rdzv_endpoint")
MODEL_PARALLEL_HINTS = ("model-parallel", "model_parallel", "tensor-parallel", "tensor_parallel", "pipeline-parallel",
                        "pipeline_parallel", "--tp", "--pp", "tp_size", "pp_size", "sequence-parallel", "ulysses")


def ex(source: str, **kw) -> Example:
    return Example(textwrap.dedent(source).lstrip("\n"), **kw)


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class LauncherBatchMismatch(Rule):
    """A launcher's world size that the DeepSpeed config's batch arithmetic cannot accept.

    **Why it fails**: DeepSpeed requires `train_batch_size == train_micro_batch_size_per_gpu ×
    gradient_accumulation_steps × data-parallel world size` (and derives a missing term by exact division). With
    `--num_gpus 2` and a config written for 4 GPUs, `deepspeed.initialize` raises "Check batch related
    parameters" on every rank — after the job waited in the queue. The finding sits on the launcher line that
    fixes the world size (`--num_gpus`/`--num_nodes`, `--nproc-per-node`/`--nnodes`, `--num_processes`) when
    the config is launched with several world sizes and this one is the odd one out; a config with a single
    world size is reported on the config itself (DSL406). Launches with tensor/pipeline/sequence parallel arguments (data-parallel size unknown) are skipped.
    """

    code = "DSL501"
    name = "launcher-batch-mismatch"
    severity = Severity.ERROR
    summary = "launcher world size incompatible with the config's batch arithmetic"
    fix_advice = ("Launch the number of ranks the config was written for, or change train_batch_size / micro batch / "
                  "gradient_accumulation_steps to match the launcher.")
    references = ("deepspeed/runtime/config.py _batch_assertion",)
    versions = "All versions."
    suppress_when = "The run uses model parallelism that dslint cannot see (data-parallel size < world size)."
    kinds = frozenset({"shell"})
    _CFG = '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}'
    VALID = (
        ex("""\
        deepspeed --num_gpus 4 train.py --deepspeed --deepspeed_config ds.json
        deepspeed --num_nodes 2 --num_gpus 2 eval.py --deepspeed --deepspeed_config ds.json
        """, filename="run.sh", files={"ds.json": _CFG}),
    )
    INVALID = (
        ex("""\
        deepspeed --num_gpus 4 train.py --deepspeed --deepspeed_config ds.json
        deepspeed --num_gpus 2 train.py --deepspeed --deepspeed_config ds.json --debug  # expect: DSL501
        """, filename="run.sh", files={"ds.json": _CFG}),
    )

    def check(self, ctx: RuleContext):
        program, sh = ctx.program, ctx.source
        for launch in sh.launches:
            world = launch.world_size
            if not world or not launch.config_paths:
                continue
            if any(h in a for a in launch.script_args for h in MODEL_PARALLEL_HINTS):
                continue
            for ref in launch.config_paths:
                for cfg in program.launch_configs(sh, launch, ref):
                    data = cfg.data if isinstance(cfg.data, dict) else {}
                    if "tensor_parallel" in data or "pipeline" in data and isinstance(data.get("pipeline"), dict) \
                            and data["pipeline"].get("stages", 1) not in (1, None):
                        continue
                    if program.world_size_for(cfg) == world:
                        continue    # the config's only world size: DSL406 reports it on the config itself
                    msg = self._mismatch(data, world)
                    if msg:
                        batch = next(((k,) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                                          "gradient_accumulation_steps") if k in data), None)
                        # the launcher line and the config whose arithmetic it breaks: a change to either takes
                        # part in the finding (dslint.changed: the pre-commit hook reports it for a staged config)
                        yield Diagnostic(f"this launch runs {world} ranks but {cfg.path} {msg}: `deepspeed.initialize` "
                                         f"fails its batch-size check on every rank.",
                                         (launch.line, launch.column),
                                         evidence=[Clue("launcher", "launcher line", (launch.line, launch.column)),
                                                   Clue("config", "the config it launches with", batch, cfg)])

    @staticmethod
    def _mismatch(data: dict, world: int) -> str:
        tbs = _int(data.get("train_batch_size"))
        mbs = _int(data.get("train_micro_batch_size_per_gpu"))
        gas = _int(data.get("gradient_accumulation_steps"))
        if tbs and mbs and gas:
            if tbs != mbs * gas * world:
                need = tbs / (mbs * gas)
                needs = f"{int(need)} data-parallel ranks" if need == int(need) else "a fractional number of ranks"
                return (f"sets train_batch_size={tbs} = micro batch {mbs} × accumulation {gas} × world size, "
                        f"which needs {needs}")
        elif tbs and mbs:
            if tbs % (mbs * world):
                return (f"sets train_batch_size={tbs} and micro batch {mbs}: the accumulation steps "
                        f"{tbs}/({mbs}×{world}) are not an integer")
        elif tbs and gas:
            if tbs % (gas * world):
                return (f"sets train_batch_size={tbs} and accumulation {gas}: the micro batch "
                        f"{tbs}/({gas}×{world}) is not an integer")
        return ""


class ConcurrentLaunchPortClash(Rule):
    """Two launches started in the background from one script (`… &`) before a `wait`, on the same rendezvous
    port.

    **Why it fails**: `deepspeed`, `torchrun` and `accelerate launch` all default to master port 29500. The
    second job's rank 0 cannot bind the port ("address already in use") and dies, or — with torchrun's c10d
    rendezvous or a TCPStore that is already up — its ranks join the first job's store and the two jobs'
    collectives mix until they hang. Give each concurrent launch its own `--master_port`.

    Not flagged: the nodes of ONE multi-node job started side by side (`srun -w $NODE torchrun --nnodes 2
    --node_rank $i --master_addr $HEAD …  &` in a loop over nodes): each launch is told that the job spans
    several nodes (`--nnodes`/`--num_nodes`/`--num_machines` not 1) and which node it is (`--node_rank`,
    `--machine_rank` that differ or are computed, or a c10d rendezvous), at the same address -- the port is
    where they meet. Two launches that both claim the same node rank are still two jobs.
    """

    code = "DSL502"
    name = "concurrent-launch-port-clash"
    severity = Severity.ERROR
    summary = "background launches in one script sharing a master/rendezvous port"
    fix_advice = "Pass a distinct `--master_port` (`--master-port`, `--main_process_port`) to each concurrent launch."
    references = ("torch.distributed.run --master-port", "deepspeed launcher --master_port")
    versions = "All versions."
    suppress_when = "The launches run on different hosts (hostfiles/--include of disjoint nodes)."
    kinds = frozenset({"shell"})
    VALID = (
        ex("""\
        deepspeed --include localhost:0,1 --master_port 29501 train.py --seed 1 &
        deepspeed --include localhost:2,3 --master_port 29502 train.py --seed 2 &
        wait
        """, filename="sweep.sh"),
        ex("""\
        for NODE in $NODES; do
          if [ "$NODE" == "$HEAD" ]; then
            srun -w $NODE torchrun --nnodes 2 --nproc_per_node 8 --node_rank 0 --master_addr $HEAD train.py &
          else
            srun -w $NODE torchrun --nnodes 2 --nproc_per_node 8 --node_rank 1 --master_addr $HEAD train.py &
          fi
        done
        wait
        """, filename="multinode.sh"),
    )
    INVALID = (
        ex("""\
        deepspeed --include localhost:0,1 train.py --seed 1 &
        deepspeed --include localhost:2,3 train.py --seed 2 &  # expect: DSL502
        wait
        """, filename="sweep.sh"),
    )

    def check(self, ctx: RuleContext):
        sh = ctx.source
        lines = sh.lines
        by_line = {launch.line: launch for launch in sh.launches}
        active: dict[str, int] = {}
        active_launch: dict[str, object] = {}
        env_port = None
        for number, raw in enumerate(lines, 1):
            text = raw.split("#", 1)[0].strip()
            if re.match(r"^wait\b", text):
                active.clear()
                continue
            m = re.match(r"^(?:export\s+)?MASTER_PORT=(\S+)", text)
            if m:
                env_port = m.group(1)
                continue
            launch = by_line.get(number)
            if launch is None:
                continue
            end = self._logical_end(lines, number)
            background = bool(re.search(r"(?<!&)&\s*$", end)) and not end.rstrip().endswith("&&")
            if not background:
                continue
            port = next((launch.options[o] for o in PORT_OPTIONS if o in launch.options), None)
            if port is None:
                inline = re.search(r"\bMASTER_PORT=(\S+)", text)
                port = inline.group(1) if inline else env_port or DEFAULT_PORT
            port = port.rsplit(":", 1)[-1]
            if "$" in port:
                continue        # a computed port ($((29500 + i))): cannot tell
            if port in active and self._one_job(active_launch[port], launch):
                continue        # another node of the same multi-node job: they meet at that port
            if port in active:
                yield Diagnostic(f"this launch runs in the background on master port {port}, which the launch on "
                                 f"line {active[port]} (also in the background, no `wait` in between) already "
                                 f"uses: the second job fails to bind it or its ranks join the first job's "
                                 f"rendezvous. Give each concurrent launch its own `--master_port`.",
                                 (launch.line, launch.column))
            else:
                active[port] = number
                active_launch[port] = launch

    @staticmethod
    def _one_job(first, second) -> bool:
        """Are two launches nodes of ONE multi-node job (each told the job spans several nodes and which node it
        is, at the same rendezvous address, as different nodes: ranks that differ or are computed, `$i`), not
        two jobs? Then they are meant to share the port: it is where the nodes meet."""
        a, b = first.node_of_job, second.node_of_job
        if a is None or b is None or first.launcher != second.launcher or a[0] != b[0]:
            return False
        return a[1] != b[1] or "$" in a[1] or a[1] == ""

    @staticmethod
    def _logical_end(lines: list[str], start: int) -> str:
        i = start - 1
        while i < len(lines) - 1 and lines[i].rstrip().endswith("\\"):
            i += 1
        return lines[i].split(" #", 1)[0]
