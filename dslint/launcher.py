"""Launcher lines in shell scripts: `deepspeed …`, `torchrun …`, `python -m torch.distributed.run …`,
`accelerate launch …`. They pair a training script with its DeepSpeed config and tell the world size.
Variables assigned literally in the same script are substituted (`NUM_GPUS=4 … --num_gpus $NUM_GPUS`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Optional


class LauncherParseError(ValueError):
    def __init__(self, message: str, line: int, column: int = 1):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass
class Launch:
    launcher: str                    # "deepspeed" | "torchrun" | "accelerate"
    line: int
    column: int
    end_column: int
    script: Optional[str] = None     # path of the user script, as written
    module: Optional[str] = None     # for `--module` / `-m` launches
    script_args: list[str] = field(default_factory=list)
    nodes: Optional[int] = None
    procs_per_node: Optional[int] = None
    config_paths: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)

    @property
    def world_size(self) -> Optional[int]:
        if self.procs_per_node is None:
            return None
        return self.procs_per_node * (self.nodes or 1)


_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_CONFIG_FLAGS = {"--deepspeed", "--deepspeed_config", "--deepspeed-config", "--ds_config", "--ds-config",
                 "--config_file", "--deepspeed_config_file"}
# launcher options that take a value (everything else before the script is a flag)
_VALUED = {
    "deepspeed": {"--num_gpus", "--num-gpus", "--num_nodes", "--num-nodes", "--include", "-i", "--exclude", "-e",
                  "--master_port", "--master_addr", "--hostfile", "-H", "--launcher", "--launcher_args",
                  "--node_rank", "--bind_core_list", "--ssh_port", "--elastic_training", "--min_elastic_nodes",
                  "--max_elastic_nodes"},
    "torchrun": {"--nproc-per-node", "--nproc_per_node", "--nnodes", "--node-rank", "--node_rank",
                 "--master-addr", "--master_addr", "--master-port", "--master_port", "--rdzv-backend",
                 "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--max-restarts",
                 "--max_restarts", "--rdzv-conf", "--rdzv_conf", "--log-dir", "--log_dir", "--redirects", "--tee",
                 "--local-addr", "--local_addr", "--monitor-interval", "--role", "--start-method"},
    "accelerate": {"--num_processes", "--num-processes", "--num_machines", "--num-machines", "--config_file",
                   "--config-file", "--main_process_port", "--main_process_ip", "--machine_rank", "--mixed_precision",
                   "--deepspeed_config_file", "--zero_stage", "--gradient_accumulation_steps", "--gpu_ids",
                   "--dynamo_backend", "--deepspeed_hostfile", "--offload_optimizer_device", "--offload_param_device"},
}


def _logical_lines(text: str):
    """Join backslash continuations; yield (first physical line number, column of first char, text)."""
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = number
        stripped = raw.rstrip()
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            buf += stripped[:-1] + " "
            continue
        buf += raw
        yield start, buf
        buf = ""
    if buf:
        yield start, buf


def _substitute(word: str, env: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        return m.group(0)
    return _VAR.sub(repl, word)


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    value = value.split(":")[-1]           # torchrun --nnodes 1:4 → the maximum
    return int(value) if value.isdigit() else None


def _split_commands(words: list[str]) -> list[list[str]]:
    out, cur = [], []
    for w in words:
        if w in ("&&", "||", ";", "|", "&"):
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    out.append(cur)
    return [c for c in out if c]


def _launcher_of(words: list[str]) -> tuple[Optional[str], int]:
    """Name of the launcher and index of its first option, skipping env prefixes / wrappers."""
    i = 0
    while i < len(words) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]) or words[i] in
                              ("env", "exec", "nohup", "time", "srun", "CUDA_VISIBLE_DEVICES")):
        i += 1
    if i >= len(words):
        return None, 0
    head = words[i].rsplit("/", 1)[-1]
    if head == "deepspeed":
        return "deepspeed", i + 1
    if head == "torchrun":
        return "torchrun", i + 1
    if head == "accelerate" and i + 1 < len(words) and words[i + 1] == "launch":
        return "accelerate", i + 2
    if re.match(r"python[0-9.]*$", head) and i + 2 < len(words) and words[i + 1] == "-m":
        if words[i + 2] in ("torch.distributed.run", "torch.distributed.launch"):
            return "torchrun", i + 3
        if words[i + 2] in ("deepspeed.launcher.runner",):
            return "deepspeed", i + 3
    return None, 0


def _parse_command(launcher: str, words: list[str], start: int, launch: Launch) -> None:
    valued = _VALUED[launcher]
    i = start
    while i < len(words):
        w = words[i]
        if w in ("--module", "-m") and launcher != "accelerate" or (launcher == "accelerate" and w == "-m"):
            launch.module = words[i + 1] if i + 1 < len(words) else None
            i += 2
            break
        if w.startswith("-"):
            key, eq, val = w.partition("=")
            if eq:
                launch.options[key] = val
                i += 1
            elif key in valued and i + 1 < len(words):
                launch.options[key] = words[i + 1]
                i += 2
            else:
                launch.options[key] = ""
                i += 1
            continue
        launch.script = w
        i += 1
        break
    launch.script_args = words[i:]
    args = launch.script_args
    for j, a in enumerate(args):
        key, eq, val = a.partition("=")
        if key in _CONFIG_FLAGS:
            value = val if eq else (args[j + 1] if j + 1 < len(args) else "")
            if value.endswith(".json"):
                launch.config_paths.append(value)
    opts = launch.options
    if launcher == "deepspeed":
        launch.procs_per_node = _int(opts.get("--num_gpus", opts.get("--num-gpus")))
        if launch.procs_per_node is None and "--include" in opts:
            hosts = opts["--include"].split("@")
            if len(hosts) == 1 and ":" in hosts[0]:
                launch.procs_per_node = len(hosts[0].split(":", 1)[1].split(","))
        launch.nodes = _int(opts.get("--num_nodes", opts.get("--num-nodes")))
    elif launcher == "torchrun":
        launch.procs_per_node = _int(opts.get("--nproc-per-node", opts.get("--nproc_per_node")))
        launch.nodes = _int(opts.get("--nnodes"))
    else:
        total = _int(opts.get("--num_processes", opts.get("--num-processes")))
        machines = _int(opts.get("--num_machines", opts.get("--num-machines"))) or 1
        launch.procs_per_node = total // machines if total and total % machines == 0 else total
        launch.nodes = machines if total and total % machines == 0 else 1
        cfg = opts.get("--deepspeed_config_file")
        if cfg and cfg.endswith(".json"):
            launch.config_paths.append(cfg)


def parse_launches(text: str) -> list[Launch]:
    env: dict[str, str] = {}
    launches: list[Launch] = []
    for line_no, logical in _logical_lines(text):
        stripped = logical.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _ASSIGN.match(logical)
        if m and " " not in m.group(2).strip().strip("\"'"):
            try:
                value = shlex.split(m.group(2), comments=True)
            except ValueError:
                value = [m.group(2)]
            env[m.group(1)] = _substitute(value[0] if value else "", env)
            continue
        try:
            lexer = shlex.shlex(logical, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        except ValueError as exc:
            raise LauncherParseError(str(exc), line_no) from None
        words = [_substitute(w, env) for w in words]
        for command in _split_commands(words):
            launcher, start = _launcher_of(command)
            if launcher is None:
                continue
            first = text.splitlines()[line_no - 1]
            col = len(first) - len(first.lstrip()) + 1
            launch = Launch(launcher, line_no, col, len(first.rstrip()) + 1)
            _parse_command(launcher, command, start, launch)
            launches.append(launch)
    return launches
