"""Launcher lines in shell scripts: `deepspeed …`, `torchrun …`, `python -m torch.distributed.run …`,
`accelerate launch …`. They pair a training script with its DeepSpeed config and tell the world size.

Scripts are parsed with tree-sitter-bash (a maintained grammar with error recovery, see
docs/architecture.md for the choice over bashlex). Every simple command of the tree is a candidate: in
functions, `if`/`case` branches, loops, pipelines and `&&` lists, behind environment prefixes
(`CUDA_VISIBLE_DEVICES=0,1 deepspeed …`) and wrappers (`srun …`, `mpirun …`, `… -- accelerate launch`).
Command strings that are run later are parsed again in place: a string assigned to a variable that the
script expands elsewhere (`cmd="deepspeed …"; eval $cmd`, `$cmd`, `bash -c "$cmd"`), the string of
`eval "…"`, `bash -c "…"`, `sbatch --wrap "…"`, and heredoc bodies (`sbatch <<EOF`). Variables assigned
literally earlier in the script are substituted (`NUM_GPUS=4 … --num_gpus $NUM_GPUS`, `${VAR:-default}`).

A syntax error (`LauncherParseError`, DSL001) is reported only where bash itself would stop: an
unterminated quote, `$(`, backquote, or a block (`if`/`for`/`case`/`{`) still open at the end of the file.
Where the grammar cannot parse text that may well be valid bash, the region falls back to a per-line
reading and nothing is reported."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Optional

from dslint.sources.astsplice import physical_lines


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
    # the folder the script has `cd`-ed into before this launch: ("script", path) relative to the script's own
    # folder (`cd "$(dirname "$0")/.."`), ("start", path) relative to the folder it was started from (`cd
    # finetune`); None when it did not, or went where dslint cannot follow (`cd $WORK`, `cd /abs`)
    cwd: Optional[tuple[str, str]] = field(default=None, compare=False)

    @property
    def node_of_job(self) -> Optional[tuple[str, str]]:
        """(rendezvous address, node rank) when this launch starts ONE node of a multi-node job -- its launcher
        is told that the job spans several nodes (`--nnodes`/`--num_nodes`/`--num_machines` not 1) and which
        node this is (`--node_rank`, `--machine_rank`; or a c10d rendezvous that assigns it) -- else None.
        The node rank is "" where a rendezvous assigns it."""
        count = next((self.options[o] for o in _NODE_COUNT.get(self.launcher, ()) if o in self.options), None)
        if count is None or _int(count) == 1:
            return None
        address = next((self.options[o] for o in _RENDEZVOUS.get(self.launcher, ()) if o in self.options), "")
        rank = next((self.options[o] for o in _NODE_RANK.get(self.launcher, ()) if o in self.options), None)
        if rank is None:
            backend = self.options.get("--rdzv_backend", self.options.get("--rdzv-backend"))
            if self.launcher != "torchrun" or backend in (None, "static"):
                return None
            rank = ""
        return address.rsplit(":", 1)[0] if ":" in address and "[" not in address else address, rank

    @property
    def world_size(self) -> Optional[int]:
        if self.procs_per_node is None:
            return None
        return self.procs_per_node * (self.nodes or 1)


# the options that make a launch one node of a multi-node job (Launch.node_of_job)
_NODE_COUNT = {"torchrun": ("--nnodes",), "deepspeed": ("--num_nodes", "--num-nodes"),
               "accelerate": ("--num_machines", "--num-machines")}
_NODE_RANK = {"torchrun": ("--node_rank", "--node-rank"), "deepspeed": ("--node_rank",),
              "accelerate": ("--machine_rank", "--machine-rank")}
_RENDEZVOUS = {"torchrun": ("--rdzv_endpoint", "--rdzv-endpoint", "--master_addr", "--master-addr"),
               "deepspeed": ("--master_addr",), "accelerate": ("--main_process_ip", "--main-process-ip")}
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
                   "--dynamo_backend", "--deepspeed_hostfile", "--offload_optimizer_device", "--offload_param_device",
                   "--deepspeed_multinode_launcher", "--deepspeed_exclusion_filter", "--deepspeed_inclusion_filter",
                   "--zero3_init_flag", "--zero3_save_16bit_model", "--gradient_clipping", "--num_cpu_threads_per_process",
                   "--main_training_function", "--rdzv_backend", "--rdzv_conf", "--max_restarts", "--monitor_interval",
                   "--deepspeed_moe_layer_cls_names", "--fsdp_sharding_strategy", "--fsdp_auto_wrap_policy",
                   "--fsdp_transformer_layer_cls_to_wrap", "--fsdp_state_dict_type", "--fsdp_offload_params",
                   "--fsdp_backward_prefetch", "--fsdp_min_num_params", "--fsdp_use_orig_params",
                   "--fsdp_cpu_ram_efficient_loading", "--fsdp_sync_module_states", "--fsdp_version",
                   "--dynamo_mode", "--tpu_zone", "--tpu_name", "--gpu-ids", "--mixed-precision"},
}


def _logical_lines(text: str):
    """Join backslash continuations; yield (first physical line number, column of first char, text)."""
    buf, start = "", 0
    for number, raw in enumerate(physical_lines(text), 1):
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


_PLAIN_WRAPPERS = ("env", "exec", "nohup", "time", "command", "builtin", "CUDA_VISIBLE_DEVICES")
# wrappers with options of their own: the launcher is the first launcher word after them, before any script
_OPTION_WRAPPERS = ("srun", "mpirun", "mpiexec", "numactl", "taskset", "stdbuf", "nice", "ionice", "timeout",
                    "uv", "conda", "poetry", "pipenv", "pdm", "hatch", "singularity", "apptainer", "xargs")
_ASSIGN_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")


def _launcher_at(words: list[str], i: int) -> tuple[Optional[str], int]:
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


def _launcher_of(words: list[str]) -> tuple[Optional[str], int]:
    """Name of the launcher and index of its first option, skipping env prefixes and wrappers (`srun -N 2
    torchrun …`, `mpirun -np 2 deepspeed …`, `python mason.py … -- accelerate launch …`)."""
    i = 0
    while i < len(words) and (_ASSIGN_WORD.match(words[i]) or words[i] in _PLAIN_WRAPPERS):
        i += 1
    if i >= len(words):
        return None, 0
    found = _launcher_at(words, i)
    if found[0] is not None:
        return found
    wrapped = words[i].rsplit("/", 1)[-1] in _OPTION_WRAPPERS
    for j in range(i + 1, len(words)):
        if words[j - 1] in ("--", "&&", "||", ";") or wrapped:     # `mason.py … -- cd x \&\& deepspeed …`
            found = _launcher_at(words, j)
            if found[0] is not None:
                return found
        if words[j].endswith(".py"):
            wrapped = False             # a script of the wrapper's own: what follows are its arguments
    return None, 0


# environment variables and script options by which processes started one by one find each other (torch's env://
# rendezvous, the `--local_rank` a launcher passes): a plain `python x.py` that sets one is one rank of several
_RANK_ENV = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"})
_RANK_ARGS = ("--local_rank", "--local-rank", "--rank", "--node_rank", "--node-rank", "--world_size", "--world-size",
              "--nproc_per_node", "--nproc-per-node", "--dist-url", "--dist_url", "--init_method", "--init-method")
_PYTHON_OPTS_VALUED = frozenset({"-W", "-X", "-Q"})


def python_run(words: list[str], background: bool = False) -> Optional[Launch]:
    """A plain `python [opts] x.py args` / `python -m pkg.x args` command: ONE process (no launcher, no wrapper
    that replicates it -- srun/mpirun -- and nothing on the line that makes it one rank of several: a rank
    variable in its environment, a rank option, `&` starting it in the background beside others). Returned as a
    `Launch` of launcher "python" with world size 1, or None. Whether the program spawns processes itself
    (`mp.spawn`) is the program model's to say."""
    i = 0
    while i < len(words) and (_ASSIGN_WORD.match(words[i]) or words[i] in _PLAIN_WRAPPERS):
        name = words[i].partition("=")[0].rstrip("+")
        if name in _RANK_ENV:
            return None
        i += 1
    if background or i >= len(words) or not re.match(r"python[0-9.]*$", words[i].rsplit("/", 1)[-1]):
        return None
    launch = Launch("python", 0, 1, 1)
    j = i + 1
    while j < len(words):
        w = words[j]
        if w == "-m" and j + 1 < len(words):
            launch.module = words[j + 1]
            j += 2
            break
        if w == "-c" or w == "-":
            return None
        if w.startswith("-"):
            j += 2 if w in _PYTHON_OPTS_VALUED else 1
            continue
        if not w.endswith(".py"):
            return None
        launch.script = w
        j += 1
        break
    if launch.script is None and launch.module is None:
        return None
    if launch.module and launch.module.startswith(("torch.distributed", "deepspeed", "accelerate")):
        return None
    launch.script_args = words[j:]
    if any(a.partition("=")[0] in _RANK_ARGS for a in launch.script_args):
        return None
    launch.procs_per_node, launch.nodes = 1, 1
    return launch


def _parse_command(launcher: str, words: list[str], start: int, launch: Launch,
                   env: Optional[dict[str, str]] = None) -> None:
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
        if _UNEXPANDED.fullmatch(w) and any(x.endswith(".py") or x in ("--module", "-m") and launcher != "accelerate"
                                            for x in words[i + 1:]):
            # `torchrun $DISTRIBUTED_ARGS train.py`, `deepspeed $FLAGS --module pkg.train`: launcher options the
            # script does not spell out
            launch.options.setdefault(_OPAQUE, w)
            i += 1
            continue
        launch.script = w
        i += 1
        break
    launch.script_args = words[i:]
    launch.config_paths.extend(_config_paths(launch.script_args))
    opts = launch.options
    if launcher == "accelerate":
        cfg = opts.get("--deepspeed_config_file")
        if cfg and cfg.endswith(".json"):
            launch.config_paths.append(cfg)
    launch.procs_per_node, launch.nodes = _processes(launcher, opts, words[:start], env or {})


# a reference to a variable the script leaves unknown, as `_expand` keeps it (`$ROOT`, `${ROOT}`, `${1-default}`)
_UNKNOWN_REF = re.compile(r"\$(?:\{[A-Za-z_0-9][^{}$`()]*\}|[A-Za-z_]\w*)")
_UNEXPANDED = re.compile(r"\$(?:\{[A-Za-z_]\w*\}|[A-Za-z_]\w*)")
_OPAQUE = "$"               # Launch.options key: launcher options held in a variable dslint could not expand

# wrappers that start the command once per task (`srun -N 2 torchrun …` runs two torchruns)
_REPLICATING = ("srun", "mpirun", "mpiexec", "xargs")


def _config_paths(args: list[str]) -> list[str]:
    """The JSON paths a script's arguments hand it as its DeepSpeed config (`--deepspeed_config ds.json`)."""
    out = []
    for j, a in enumerate(args):
        key, eq, val = a.partition("=")
        if key in _CONFIG_FLAGS:
            value = val if eq else (args[j + 1] if j + 1 < len(args) else "")
            if value.endswith(".json"):
                out.append(value)
    return out


def _known(value: str) -> bool:
    return bool(value) and "$" not in value and "`" not in value


# the env key (no shell name can hold it) under which an array assignment leaves how many devices one element names
_ELEMENT = "[]"
_ARRAY_ELEMENT = re.compile(r"\$\{([A-Za-z_]\w*)\[[^\]]*\]\}")


def _slots(include: str, env: Optional[dict[str, str]] = None) -> Optional[tuple[int, int]]:
    """(processes, hosts) of a deepspeed `--include` filter that names its slots on every host
    (`localhost:0,1`, `node1:0,1@node2:2,3`); None where a host takes all its GPUs (`node1`) or a slot list
    is not literal (`localhost:$GPUS`). One element of an array of literal device lists (`localhost:${GPULIST[$IDX]}`
    with `GPULIST=(0 1 2 3)`, a loop starting one job per device) names as many as its largest element, whichever
    element the index picks."""
    total, hosts = 0, 0
    for host in include.split("@"):
        name, colon, slots = host.partition(":")
        element = _ARRAY_ELEMENT.fullmatch(slots.strip("'\"")) if colon else None
        if element is not None and env and (env.get(element.group(1) + _ELEMENT) or "").isdigit():
            total += int(env[element.group(1) + _ELEMENT])
            hosts += 1
            continue
        if not colon or not _known(slots) or not all(s.strip().isdigit() for s in slots.split(",")):
            return None
        total += len(set(slots.split(",")))
        hosts += 1
    return (total, hosts) if hosts else None


def _processes(launcher: str, opts: dict[str, str], prefix: list[str], env: dict[str, str]
               ) -> tuple[Optional[int], Optional[int]]:
    """(processes per node, nodes) a launch starts, as its launcher decides them from its options and the
    environment it runs in (assignments in front of it, literal ones earlier in the script); (None, None)
    where they depend on the machine (all visible GPUs, an accelerate config file, a hostfile)."""
    local = dict(env)
    for word in prefix:
        name, eq, value = word.partition("=")
        if eq and _ASSIGN_WORD.match(word):
            local[name.rstrip("+")] = value
    replicated = any(w.rsplit("/", 1)[-1] in _REPLICATING for w in prefix)
    if _OPAQUE in opts:
        return None, None
    if launcher == "deepspeed":
        gpus = _int(opts.get("--num_gpus", opts.get("--num-gpus")))
        nodes = _int(opts.get("--num_nodes", opts.get("--num-nodes")))
        include = opts.get("--include", opts.get("-i"))
        if gpus is None and include is not None:
            found = _slots(include, env)
            if found is None:
                return None, nodes
            total, hosts = found
            return (total, 1) if hosts == 1 or total % hosts else (total // hosts, hosts)
        if gpus is None and include is None and nodes in (None, 1) and not any(
                k in opts for k in ("--exclude", "-e", "--hostfile", "-H")):
            # deepspeed's runner turns CUDA_VISIBLE_DEVICES into `--include localhost:<devices>` (runner.py)
            visible = local.get("CUDA_VISIBLE_DEVICES")
            found = _slots(f"localhost:{visible}", local) if visible is not None else None
            if found is not None:
                return found[0], 1
        return gpus, nodes
    if launcher == "torchrun":
        # torch.distributed.run: --nproc-per-node defaults to 1 and --nnodes to 1 (or PET_NPROC_PER_NODE /
        # PET_NNODES); under srun/mpirun each task starts its own torchrun, so the defaults tell nothing there
        procs = opts.get("--nproc-per-node", opts.get("--nproc_per_node", local.get("PET_NPROC_PER_NODE")))
        nodes = opts.get("--nnodes", local.get("PET_NNODES"))
        if replicated and (procs is None or nodes is None):
            return _int(procs), _int(nodes)
        return _int("1" if procs is None else procs), _int("1" if nodes is None else nodes)
    total = _int(opts.get("--num_processes", opts.get("--num-processes")))
    machines = _int(opts.get("--num_machines", opts.get("--num-machines"))) or 1
    if total and total % machines == 0:
        return total // machines, machines
    return total, 1


def _line_launches(text: str, first_line: int, env: dict[str, str]) -> list[Launch]:
    """The per-line reading, for a region the grammar could not parse: backslash continuations joined,
    `shlex` words; a line that does not split is skipped (the grammar's gap is not the user's error)."""
    launches: list[Launch] = []
    lines = physical_lines(text)
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
        except ValueError:
            continue
        words = [_substitute(w, env) for w in words]
        for command in _split_commands(words):
            launcher, start = _launcher_of(command)
            if launcher is None:
                continue
            first = lines[line_no - 1]
            col = len(first) - len(first.lstrip()) + 1
            launch = Launch(launcher, line_no + first_line - 1, col, len(first.rstrip()) + 1)
            _parse_command(launcher, command, start, launch, env)
            launches.append(launch)
    return launches


# --- the tree-sitter reader ----------------------------------------------------------------------------
_KEYWORD = re.compile(rb"(?<![\w.-])(deepspeed|torchrun|accelerate|torch\.distributed\.(?:run|launch))(?![\w-])")
_STRING_NODES = ("string", "raw_string", "concatenation")
_MAX_DEPTH = 4                     # command strings inside command strings


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter
    import tree_sitter_bash
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _expand(raw: str, env: dict[str, str]) -> str:
    """The value of one shell word as bash would pass it: quotes removed, backslash escapes and
    backslash-newlines resolved, `$VAR`/`${VAR:-default}` substituted outside single quotes."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "'":
            j = raw.find("'", i + 1)
            j = n if j < 0 else j
            out.append(raw[i + 1:j])
            i = j + 1
        elif c == "$" and raw.startswith("$'", i):
            j = raw.find("'", i + 2)
            j = n if j < 0 else j
            out.append(raw[i + 2:j])
            i = j + 1
        elif c == '"':
            j, buf = i + 1, []
            while j < n and raw[j] != '"':
                if raw[j] == "\\" and j + 1 < n:
                    if raw[j + 1] == "\n":
                        j += 2
                        continue
                    if raw[j + 1] in '"\\$`':
                        buf.append(raw[j + 1])
                        j += 2
                        continue
                buf.append(raw[j])
                j += 1
            out.append(_substitute("".join(buf), env))
            i = j + 1
        elif c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
        else:
            j = i
            while j < n and raw[j] not in "'\"\\" and not raw.startswith("$'", j):
                j += 1
            out.append(_substitute(raw[i:j], env))
            i = j
    return "".join(out)


# A block still open at the end of the file: the node that opens it, named for the message
_CLOSERS = {'"': "double-quoted string", "`": "backquoted command", ")": "`$(…)` / `(…)`", "fi": "`if`",
            "done": "loop", "esac": "`case`", "}": "`{ … }` block", "then": "`if`", "do": "loop",
            "]]": "`[[ … ]]` test", "))": "arithmetic `((…))`"}


_ARITHMETIC_WRITE = re.compile(r"(?:\(\(|\blet\s+|\$\(\()[^)]*?\b([A-Za-z_]\w*)\s*(?:\+\+|--|[-+*/%]?=(?!=))"
                               r"|(?:\(\(|\blet\s+)\s*(?:\+\+|--)([A-Za-z_]\w*)|\blet\s+\"?([A-Za-z_]\w*)")
_OPENERS = {'"': '"', "`": "`", "$(": ")", "$((": "))"}


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.data = text.encode("utf-8")
        self.lines = self.data.split(b"\n")
        self.env: dict[str, str] = {}
        self.split_env: dict[str, list[str]] = {}     # literal values of several words
        # values of several words some of which hold a variable the script leaves unknown (`OPTS+=" --deepspeed_config
        # ${BASE_PATH}/configs/ds.json"`): read after the launched script only, for the config path they name
        self.arg_env: dict[str, list[str]] = {}
        self.cwd: Optional[tuple[str, str]] = None     # see Launch.cwd
        self.launches: list[Launch] = []
        self.python_runs: list[Launch] = []      # plain `python x.py` commands (`python_run`): one process each
        self.seen: set[int] = set()     # command strings already read (by their first byte in the file)
        # variables the script changes by arithmetic (`((i++))`, `let i+=1`, `: $((i=i+1))`): no one literal value
        self.counters = {m.group(1) or m.group(2) or m.group(3) for m in _ARITHMETIC_WRITE.finditer(text)}

    # positions: (row, byte column) in the file → 1-based line and character column
    def column(self, row: int, byte_col: int) -> int:
        line = self.lines[row] if row < len(self.lines) else b""
        return len(line[:byte_col].decode("utf-8", "replace")) + 1

    def read(self, data: bytes, at: tuple[int, int, int], depth: int = 0):
        """Parse `data`, a verbatim slice of the file starting at `at` (row, byte column, byte), and collect its
        launches. Returns the tree (the caller checks the top level for syntax errors)."""
        tree = _parser().parse(data)
        self.walk(tree.root_node, at, depth)
        return tree

    @staticmethod
    def place(point, at: tuple[int, int, int]) -> tuple[int, int]:
        row, col = point
        return (at[0] + row, at[1] + col) if row == 0 else (at[0] + row, col)

    def walk(self, root, at: tuple[int, int], depth: int) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind == "ERROR":
                self.fallback(node, at)
                continue
            if kind == "redirected_statement" and self.split_at_newline(node, at, depth):
                continue
            if kind == "variable_assignment" and (node.parent is None or node.parent.type != "command"):
                self.assignment(node, at, depth)
            elif kind == "command":
                self.command(node, at, depth)
            elif kind == "heredoc_body" and depth < _MAX_DEPTH and _KEYWORD.search(node.text):
                self.nested(node, at, depth, node.start_byte, node.end_byte)
                continue
            if kind in ("string", "raw_string", "comment"):
                continue
            stack.extend(reversed(node.children))

    def split_at_newline(self, node, at, depth: int) -> bool:
        """A redirection whose target the grammar took from a later line (`CKPT=<Specify path>`, a template's
        placeholder, parses as `CKPT=` `<Specify` `path>` and the next line's first word as the target of that
        `>`): bash ends a command at the newline and never reads a target there (it stops at the syntax error
        instead, until the placeholder is filled in). The statement is read up to that line, and the lines after
        it again as a script of their own -- their assignments and launches are the script's. False (nothing
        done) where every redirection's target is on its operator's line."""
        kids = node.children
        for i, kid in enumerate(kids):
            if kid.type != "file_redirect" or kid.child_count < 2:
                continue
            operator, target = kid.children[0], kid.children[-1]
            gap = node.text[operator.end_byte - node.start_byte: target.start_byte - node.start_byte]
            if target.start_point.row == operator.end_point.row or re.search(rb"(?<!\\)\n", gap) is None:
                continue
            for before in kids[:i]:
                self.walk(before, at, depth)
            row = target.start_point.row
            line_start = target.start_byte - target.start_point.column
            tail = node.text[line_start - node.start_byte:]
            self.read(tail, (at[0] + row, 0, at[2] + line_start), depth)
            return True
        return False

    def nested(self, node, at, depth: int, start: int, end: int) -> None:
        """Read a command string (the inside of a quoted word, a heredoc body) as a script of its own."""
        where = self.place(node.start_point, at)
        key = at[2] + start
        if key in self.seen:
            return
        self.seen.add(key)
        offset = start - node.start_byte
        inner = node.text[offset: offset + (end - start)]
        self.read(inner, (where[0], where[1] + offset, at[2] + start), depth + 1)

    def string_inside(self, node, at, depth: int) -> None:
        """A quoted word holding a command (`"deepspeed …"`, `'deepspeed …'`): read between the quotes."""
        if depth >= _MAX_DEPTH or not _KEYWORD.search(node.text):
            return
        if node.type == "concatenation":
            for kid in node.children:
                if kid.type in ("string", "raw_string"):
                    self.string_inside(kid, at, depth)
            return
        if node.type in ("string", "raw_string") and len(node.text) >= 2:
            self.nested(node, at, depth, node.start_byte + 1, node.end_byte - 1)

    def assignment(self, node, at, depth: int) -> None:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None or name_node.type != "variable_name":
            return
        name = name_node.text.decode("utf-8", "replace")
        words_before = self.split_env.pop(name, None)
        args_before = self.arg_env.pop(name, None)
        if name in self.counters:
            self.env.pop(name, None)
            return
        if value is None:
            self.env[name] = ""
            return
        if value.type == "array":
            # `GPULIST=(0 1 2 3)`: what one element `${GPULIST[$i]}` may hold, for a deepspeed `--include` slot list
            # (`_slots`): the most devices any element names, when every element is a literal device list
            elements = [_expand(kid.text.decode("utf-8", "replace"), self.env).strip("'\"")
                        for kid in value.named_children if kid.type != "comment"]
            lists = [e.split(",") for e in elements]
            self.env.pop(name + _ELEMENT, None)
            if lists and all(d.strip().isdigit() for devices in lists for d in devices):
                self.env[name + _ELEMENT] = str(max(len(set(devices)) for devices in lists))
            return
        raw = value.text.decode("utf-8", "replace")
        expanded = _expand(raw, self.env)
        appended = any(kid.type == "+=" for kid in node.children)
        whole = expanded
        if appended:
            before = args_before or words_before
            whole = (" ".join(before) if before else self.env.get(name, "")) + expanded
            expanded = (" ".join(words_before) if words_before else self.env.get(name, "")) + expanded
        if expanded.strip() and not re.search(r"\s", expanded.strip()):
            self.env[name] = expanded.strip()
        else:
            self.env.pop(name, None)
            if expanded.strip() and not re.search(r"[$`;&|<>(){}]", expanded) and \
                    not _KEYWORD.search(expanded.encode("utf-8", "replace")):
                # `ARGS="--nproc_per_node 8 --nnodes 1"`: an unquoted `$ARGS` splits into these words (only
                # literal words; a command string naming a launcher is read in place instead, `string_inside`)
                self.split_env[name] = expanded.split()
        if re.search(r"\s", whole.strip()) and re.search(r"[$`;&|<>(){}]", whole) and \
                not re.search(r"[$`;&|<>(){}]", _UNKNOWN_REF.sub("", whole)):
            self.arg_env[name] = whole.split()
        if value.type in _STRING_NODES and self.expanded_elsewhere(name, node, at):
            self.string_inside(value, at, depth)

    def expanded_elsewhere(self, name: str, node, at) -> bool:
        """Is `$name` / `${name}` expanded anywhere in the file outside this assignment's own value (before
        or after it: a function may run it)?"""
        start = at[2] + node.start_byte
        end = at[2] + node.end_byte
        pattern = re.compile(rb"\$\{?" + re.escape(name.encode()) + rb"(?![\w])")
        return any(not start <= m.start() < end for m in pattern.finditer(self.data))

    def command(self, node, at, depth: int) -> None:
        words: list[str] = []
        args = []
        loose: dict[int, tuple] = {}        # index in words → (words it took there, its `arg_env` words)
        for i, kid in enumerate(node.children):
            fieldname = node.field_name_for_child(i)
            if kid.type == "variable_assignment" or fieldname in ("name", "argument"):
                raw = kid.text.decode("utf-8", "replace")
                split = _UNEXPANDED.fullmatch(raw) and self.split_env.get(raw.strip("${}"))
                if _UNEXPANDED.fullmatch(raw) and raw.strip("${}") in self.arg_env:
                    loose[len(words)] = (len(split or [raw]), self.arg_env[raw.strip("${}")])
                for word in split or [_expand(raw, self.env)]:
                    words.append(word)
                    args.append(kid)
        if not words:
            return
        if words[0] in ("cd", "pushd"):
            self.cwd = _change_folder(self.cwd, words[1:])
            return
        launcher, start = _launcher_of(words)
        if launcher is not None:
            row, col = self.place(node.start_point, at)
            first = self.lines[row].decode("utf-8", "replace") if row < len(self.lines) else ""
            end = self.place(node.end_point, at)
            end_col = self.column(*end) if end[0] == row else len(first.rstrip()) + 1
            launch = Launch(launcher, row + 1, self.column(row, col), end_col, cwd=self.cwd)
            _parse_command(launcher, words, start, launch, self.env)
            first = len(words) - len(launch.script_args)
            if any(k >= first for k in loose):
                # `torchrun ... $ROOT/main.py ${OPTS}`: the script's own arguments, read for the config they name
                # alone (`script_args` keeps the word: what else they say waits for the variable's value)
                spread, k = [], first
                while k < len(words):
                    taken, whole = loose.get(k, (1, [words[k]]))
                    spread += whole
                    k += taken
                launch.config_paths.extend(p for p in _config_paths(spread) if p not in launch.config_paths)
            self.launches.append(launch)
            return
        run = python_run(words, _in_background(node))
        if run is not None:
            row, col = self.place(node.start_point, at)
            run.line, run.column, run.end_column, run.cwd = row + 1, self.column(row, col), self.column(row, col), self.cwd
            self.python_runs.append(run)
            return
        # a command string run by this command: eval "…", bash -c "…", sbatch --wrap "…"
        head = words[0].rsplit("/", 1)[-1]
        for k, kid in enumerate(args):
            before = words[k - 1] if k else ""
            if head == "eval" and k or before in ("-c", "--wrap") or words[k].startswith("--wrap="):
                self.string_inside(kid, at, depth)

    def fallback(self, node, at) -> None:
        """A region the grammar could not parse: read its whole lines one by one as before."""
        first_row = self.place(node.start_point, at)[0]
        last_row = self.place(node.end_point, at)[0]
        region = b"\n".join(self.lines[first_row:last_row + 1]).decode("utf-8", "replace")
        for launch in _line_launches(region, first_row + 1, self.env):
            if not any(l.line == launch.line for l in self.launches):
                self.launches.append(launch)


_SCRIPT_DIR = re.compile(r"^(?:\$\(\s*(?:cd\s+)?(?:\$\(\s*)?dirname\s+[^)]*(?:\$0|\$\{0\}|BASH_SOURCE)[^)]*\)+"
                         r"(?:\s*(?:&&|;)\s*pwd\s*\))?|`dirname\s+\S*\$0`)")


def _change_folder(cwd: Optional[tuple[str, str]], args: list[str]) -> Optional[tuple[str, str]]:
    """The folder after `cd ARGS` (Launch.cwd); None where it cannot be followed."""
    args = [a for a in args if a not in ("-P", "-L", "--")]
    if not args:
        return None                     # `cd` alone: $HOME
    target = args[0]
    m = _SCRIPT_DIR.match(target)
    if m:
        rest = target[m.end():].lstrip("/")
        return None if "$" in rest else ("script", posixpath.normpath(rest or "."))
    if "$" in target or "`" in target or target.startswith(("/", "~")) or target == "-":
        return None
    anchor, base = cwd if cwd is not None else ("start", ".")
    return anchor, posixpath.normpath(posixpath.join(base, target))


def _syntax_error(tree, text: str) -> Optional[LauncherParseError]:
    """An error bash would report too: the file ends inside a quote, `$(`, backquote or block. Other parse
    errors of the grammar (text bash may well accept) are not reported."""
    root = tree.root_node
    if not root.has_error:
        return None
    data = text.encode("utf-8")
    lines = data.split(b"\n")

    def at_end(byte: int) -> bool:
        rest = data[byte:].decode("utf-8", "replace")
        return all(not ln.strip() or ln.lstrip().startswith("#") for ln in rest.splitlines())

    def col(row: int, byte_col: int) -> int:
        return len(lines[row][:byte_col].decode("utf-8", "replace")) + 1 if row < len(lines) else 1

    last = len(text.rstrip("\n").split("\n"))
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing and node.type in _CLOSERS and at_end(node.start_byte):
            opener = node.parent if node.parent is not None else root
            if node.type in ("done", "do") and opener.type == "do_group" and opener.parent is not None:
                opener = opener.parent
            row, bcol = opener.start_point
            what = _CLOSERS[node.type]
            if node.type in ('"', "`", ")"):
                return LauncherParseError(f"unexpected end of file: the {what} opened here is never closed "
                                          f"(bash: looking for matching `{node.type}`)", row + 1, col(row, bcol))
            return LauncherParseError(f"unexpected end of file: the {what} at line {row + 1} is never closed by "
                                      f"`{node.type}`", last, 1)
        if node.type == "ERROR" and at_end(node.end_byte):
            body = node.text
            if node.child_count == 0 and body.startswith((b"'", b"$'")) and body.count(b"'") == 1:
                row, bcol = node.start_point
                return LauncherParseError("unexpected end of file: the single-quoted string opened here is never "
                                          "closed (bash: looking for matching `'`)", row + 1, col(row, bcol))
            kids = node.children
            for i, kid in enumerate(kids):
                closer = _OPENERS.get(kid.type) if not kid.is_named else None
                if closer and not any(k.type == closer and not k.is_named for k in kids[i + 1:]):
                    row, bcol = kid.start_point
                    return LauncherParseError(f"unexpected end of file: the {_CLOSERS[closer]} opened here is never "
                                              f"closed (bash: looking for matching `{closer}`)", row + 1, col(row, bcol))
        if node.has_error:
            stack.extend(node.children)
    return None


# `` `# a comment` `` inside a command line (a comment between backslash-continued arguments): bash ends the
# backquoted command at the next backquote and runs a comment, which expands to nothing; the grammar lets the
# comment run to the end of the line, over the closing backquote, and then misses it at the end of the file.
_COMMENT_SUBSTITUTION = re.compile(rb"(?<![^\s;&|(])`[ \t]*#[^`\n]*`")


def _blank_comment_substitutions(data: bytes) -> bytes:
    """The script with each backquoted comment blanked byte for byte (positions unchanged): what bash expands
    it to, an empty word."""
    if b"`" not in data:
        return data
    return _COMMENT_SUBSTITUTION.sub(lambda m: b" " * len(m.group(0)), data)


def _in_background(node) -> bool:
    """Is this command started with `&` (in the background, beside others: each one rank of a job)?"""
    while node is not None and node.type not in ("program", "compound_statement", "do_group", "subshell"):
        sibling = node.next_sibling
        if sibling is not None and sibling.type == "&":
            return True
        node = node.parent
    return False


def read_python_runs(text: str) -> list[Launch]:
    """The plain `python x.py` commands of a shell script (`python_run`), at their lines: they start the script
    as one process. Empty where the script does not parse."""
    if "python" not in text:
        return []
    reader = _Reader(text)
    try:
        reader.read(_blank_comment_substitutions(reader.data), (0, 0, 0))
    except Exception:
        return []
    return sorted(reader.python_runs, key=lambda l: (l.line, l.column))


def read_script(text: str) -> tuple[list[Launch], Optional[LauncherParseError]]:
    """The launches of a shell script, and the syntax error bash would stop at (None when there is none)."""
    stripped = text.rstrip(" \t\r\n")
    if stripped.endswith("\\") and not stripped.endswith("\\\\"):
        # a continuation at the end of the file ends the last command for bash; the grammar wants a line
        cut = len(stripped) - 1
        text = text[:cut] + " " + text[cut + 1:]
    reader = _Reader(text)
    tree = reader.read(_blank_comment_substitutions(reader.data), (0, 0, 0))
    reader.launches.sort(key=lambda l: (l.line, l.column))
    return reader.launches, _syntax_error(tree, text)


def parse_launches(text: str) -> list[Launch]:
    """The launches of a script; raises LauncherParseError where bash itself would report a syntax error."""
    launches, error = read_script(text)
    if error is not None:
        raise error
    return launches


# --- launcher lines in Markdown (a README's fenced shell blocks) -----------------------------------------
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^\s`{]*)")
_SHELL_INFO = frozenset({"", "bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession", "terminal"})
_PROMPT = re.compile(r"^(\s*)(\$|>|%)(\s)")


def _shell_blocks(text: str) -> Optional[str]:
    """The Markdown text with everything but the bodies of its fenced shell blocks blanked (line numbers kept),
    a `$ ` prompt blanked too; None when no such block mentions a launcher."""
    lines = text.split("\n")
    out = [""] * len(lines)
    fence = None            # the opening fence while inside a block: (marker char, length, shell?)
    found = False
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(2)[0], len(m.group(2)), m.group(3).lower() in _SHELL_INFO)
            continue
        if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] and not m.group(3):
            fence = None
            continue
        if fence[2]:
            body = _PROMPT.sub(lambda p: p.group(1) + " " + p.group(3), line)
            out[i] = body
            found = found or bool(_KEYWORD.search(body.encode("utf-8", "replace")))
    return "\n".join(out) if found else None


_CELL_MAGIC = re.compile(r"%%(bash|sh|script\s+(ba)?sh)\b")


def notebook_shell(text: str) -> Optional[str]:
    """The shell commands of a Jupyter notebook (`.ipynb`): the `!cmd` lines of its code cells (with their
    backslash continuations) and the bodies of its `%%bash` / `%%sh` cells, each at the line of the notebook's
    file its source string is written on, everything else blank (as `_shell_blocks` does for Markdown); None
    when the notebook does not parse or no such command mentions a launcher."""
    import json
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return None
    raw = text.split("\n")
    out = [""] * len(raw)
    at = 0                  # the raw line the search for the next source string starts from
    found = False
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        parts = [source] if isinstance(source, str) else [p for p in source or [] if isinstance(p, str)]
        lines: list[tuple[int, str]] = []     # (raw line, the source line)
        for part in parts:
            # nbformat writes each source string on a line of its own: "...",
            quoted = {json.dumps(part, ensure_ascii=False), json.dumps(part)}
            hit = next((i for i in range(at, len(raw)) if raw[i].strip().rstrip(",") in quoted), None)
            if hit is not None:
                at = hit + 1
            for k, piece in enumerate(part.split("\n")):
                if piece or k == 0:
                    lines.append(((hit if hit is not None else at) + k, piece))
        if not lines:
            continue
        whole_cell = bool(_CELL_MAGIC.match(lines[0][1].strip()))
        going = False           # inside a `!` command continued by a backslash
        for n, (i, line) in enumerate(lines):
            body = None
            if whole_cell:
                body = line if n else None
            elif going:
                body = line
            elif line.lstrip().startswith("!"):
                body = line.lstrip()[1:]
            going = body is not None and not whole_cell and body.rstrip().endswith("\\")
            if body is not None and i < len(out):
                out[i] = body = _interpolated(body) if not whole_cell else body
                found = found or bool(_KEYWORD.search(body.encode("utf-8", "replace")))
    return "\n".join(out) if found else None


_IPYTHON_EXPR = re.compile(r"\{[^{}\n]*\}")


def _interpolated(line: str) -> str:
    """An IPython shell escape's `{expr}` (`!deepspeed {num_gpus_flag} --module x`) is the value of a Python
    expression, substituted before the shell reads the line: a word dslint cannot expand, as a shell variable
    is (`$_`, one word, whatever the expression spells)."""
    return _IPYTHON_EXPR.sub("$_", line) if "{" in line else line


DATABRICKS_HEADER = "# Databricks notebook source"
_DATABRICKS_ESCAPE = re.compile(r"^[ \t]*!\S", re.MULTILINE)
_DATABRICKS_SH = re.compile(r"#[ \t]*MAGIC[ \t]+%sh\b")
_DATABRICKS_MAGIC = re.compile(r"#[ \t]*MAGIC ?")


def is_databricks_shell_notebook(text: str) -> bool:
    """Is this `.py` a Databricks notebook export (`# Databricks notebook source` on its first line, cells
    split by `# COMMAND ----------`) that holds IPython shell escapes (`!deepspeed ...` lines)? Such a file is
    no Python module -- CPython cannot read a `!` line -- but a notebook, run cell by cell in one driver process:
    it is read as a Jupyter notebook is, for the launches of its shell commands (`databricks_shell`). An export
    without shell escapes is valid Python and stays a Python file."""
    return text.startswith(DATABRICKS_HEADER) and _DATABRICKS_ESCAPE.search(text) is not None


def databricks_shell(text: str) -> Optional[str]:
    """The shell commands of a Databricks notebook export, as `notebook_shell` gives those of a Jupyter notebook:
    its `!cmd` lines (with their backslash continuations) and the bodies of its `# MAGIC %sh` cells, each at its
    line, everything else blank; None when no such command mentions a launcher."""
    raw = text.split("\n")
    out = [""] * len(raw)
    found = False
    going = False               # inside a `!` command continued by a backslash
    in_sh = False               # inside a `# MAGIC %sh` cell
    for i, line in enumerate(raw):
        stripped = line.strip()
        body = None
        if stripped.startswith("# COMMAND ----------"):
            in_sh = going = False
            continue
        if going:
            body = line
        elif stripped.startswith("!"):
            body = stripped[1:]
        elif _DATABRICKS_SH.match(stripped):
            in_sh = True
            body = stripped[_DATABRICKS_SH.match(stripped).end():]
        elif in_sh and _DATABRICKS_MAGIC.match(stripped):
            body = stripped[_DATABRICKS_MAGIC.match(stripped).end():]
        going = body is not None and not in_sh and body.rstrip().endswith("\\")
        if body is not None:
            out[i] = body = body if in_sh else _interpolated(body)
            found = found or bool(_KEYWORD.search(body.encode("utf-8", "replace")))
    return "\n".join(out) if found else None


_COG_PREDICT = re.compile(r"""^(predict|train):[ \t]*["']?([^"'\s:#]+\.py):\w+""", re.MULTILINE)


def cog_launches(text: str) -> list[Launch]:
    """The programs a Cog configuration (`cog.yaml`) runs: its `predict: "predict.py:Predictor"` (and `train:`)
    entry. Cog imports that file in ONE process and calls the class there: a launch of world size 1."""
    out = []
    for m in _COG_PREDICT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Launch("cog", line, 1, 1 + len(m.group(0)), script=m.group(2), nodes=1, procs_per_node=1))
    return out


def markdown_mentions_launcher(text: str, notebook: bool = False) -> bool:
    """Does a fenced shell block of this Markdown text (a shell command of this notebook) hold a launcher word
    (cheap: read before keeping it)?"""
    if not _KEYWORD.search(text.encode("utf-8", "replace")):
        return False
    return _commands(text, notebook) is not None


def _commands(text: str, notebook: bool) -> Optional[str]:
    if notebook:
        return databricks_shell(text) if text.startswith(DATABRICKS_HEADER) else notebook_shell(text)
    return _shell_blocks(text)


def markdown_launches(text: str, notebook: bool = False) -> list[Launch]:
    """The launches in the fenced shell blocks of a Markdown file (the shell commands of a notebook), at their
    lines. A block is a snippet, not a script: a syntax error in it is nobody's (never DSL001), and the launches
    read around it are kept."""
    blocks = _commands(text, notebook)
    if blocks is None:
        return []
    launches = read_script(blocks)[0]
    if notebook:
        return launches
    # the blocks read as one script keep what an earlier block's `cd` set; a snippet the shell grammar reads
    # past its end (`--nproc_per_node <num-of-gpus>` is a redirection to bash) can swallow the blocks after it:
    # a block whose launcher lines gave no launch that way is read again on its own
    lines = blocks.split("\n")
    for first, last in _block_spans(text):
        body = lines[first:last]
        if any(first < l.line <= last for l in launches) or \
                not _KEYWORD.search("\n".join(body).encode("utf-8", "replace")):
            continue
        launches += read_script("\n" * first + "\n".join(body))[0]
    launches.sort(key=lambda l: (l.line, l.column))
    return launches


def _block_spans(text: str) -> list[tuple[int, int]]:
    """(first, end) line indexes (0-based, end excluded) of the bodies of the fenced shell blocks of Markdown."""
    spans, fence, start = [], None, 0
    for i, line in enumerate(text.split("\n")):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, start = (m.group(2)[0], len(m.group(2)), m.group(3).lower() in _SHELL_INFO), i + 1
            continue
        if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] and not m.group(3):
            if fence[2]:
                spans.append((start, i))
            fence = None
    return spans
