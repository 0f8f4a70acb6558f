"""Launcher scripts (dslint/sources/launcher.py): launches found wherever bash would run them, at their position in the
file; DSL001 only where bash itself stops (`bash -n`), never for text the grammar cannot read."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dslint.sources.launcher import LauncherParseError, parse_launches, read_script
from dslint.sources import ShellSource

FIXTURES = Path(__file__).parent / "fixtures"
REALWORLD = Path(os.environ.get("DSLINT_REALWORLD", "/tmp/realworld"))
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
BASH = shutil.which("bash")


def _one(text: str):
    launches = parse_launches(text)
    assert len(launches) == 1, launches
    return launches[0]


def test_multi_line_command_string_run_by_eval_is_read_in_place():
    text = ('OUT=/tmp/o\nrun_cmd="CUDA_VISIBLE_DEVICES=0,1 deepspeed \\\n  --num_gpus 2 train.py \\\n'
            '  --deepspeed_config ds.json --out $OUT"\neval $run_cmd\n')
    launch = _one(text)
    assert (launch.line, launch.column) == (2, 10)          # the command inside the quotes
    assert (launch.script, launch.config_paths, launch.world_size) == ("train.py", ["ds.json"], 2)
    assert launch.script_args[-1] == "/tmp/o"


@pytest.mark.parametrize("use", ["eval $cmd", "eval \"$cmd\"", "$cmd --seed 1", "${cmd}", "bash -c \"$cmd\"",
                                 "f() { $cmd; }\nf"])
def test_command_string_counts_wherever_it_is_expanded(use):
    launch = _one(f'cmd="torchrun --nproc_per_node 4 train.py --deepspeed_config ds.json"\n{use}\n')
    assert (launch.launcher, launch.world_size, launch.line, launch.column) == ("torchrun", 4, 1, 6)


def test_command_string_never_expanded_is_not_a_launch():
    assert parse_launches('HELP="deepspeed --num_gpus 2 train.py"\necho done\n') == []


def test_strings_run_by_eval_bash_c_and_sbatch_wrap():
    text = ('eval "deepspeed --num_gpus 2 a.py"\nbash -c \'torchrun --nproc-per-node 2 b.py\'\n'
            'sbatch --wrap "deepspeed --num_gpus 8 c.py"\necho "deepspeed --num_gpus 3 d.py"\n')
    got = [(l.line, l.column, l.script, l.world_size) for l in parse_launches(text)]
    assert got == [(1, 7, "a.py", 2), (2, 10, "b.py", 2), (3, 16, "c.py", 8)]


def test_heredoc_body_is_read_at_its_lines():
    text = "N=4\nsbatch <<EOF\n#!/bin/bash\ndeepspeed --num_gpus $N t.py --deepspeed ds.json\nEOF\n"
    launch = _one(text)
    assert (launch.line, launch.world_size, launch.config_paths) == (4, 4, ["ds.json"])


def test_functions_loops_branches_case_and_pipelines():
    text = """\
f() {
  deepspeed --num_gpus 1 a.py
}
for bs in 8 16; do deepspeed --num_gpus 2 b.py --bs $bs; done
if [[ -n "$X" ]]; then torchrun --nproc_per_node 3 c.py; else echo; fi
case "$1" in
  x|y) accelerate launch --num_processes 4 d.py ;;
esac
cd work && CUDA_VISIBLE_DEVICES=0 python -m torch.distributed.run --nproc_per_node=5 e.py | tee log
srun -N 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc_per_node 6 f.py
mpirun -np 1 deepspeed --num_gpus 7 g.py
python mason.py --gpus 8 -- accelerate launch --num_processes 8 h.py
echo deepspeed --num_gpus 9 i.py
"""
    got = [(l.line, l.launcher, l.script, l.world_size) for l in parse_launches(text)]
    assert got == [(2, "deepspeed", "a.py", 1), (4, "deepspeed", "b.py", 2), (5, "torchrun", "c.py", 3),
                   (7, "accelerate", "d.py", 4), (9, "torchrun", "e.py", 5), (10, "torchrun", "f.py", 12),
                   (11, "deepspeed", "g.py", 7), (12, "accelerate", "h.py", 8)]


def test_literal_variables_and_defaults_are_substituted():
    text = 'N=${N:-2}\nexport NODES=2\nCFG="configs/z2.json"\ndeepspeed --num_gpus $N --num_nodes ${NODES} t.py --deepspeed ${CFG}\n'
    launch = _one(text)
    assert (launch.procs_per_node, launch.nodes, launch.config_paths) == (2, 2, ["configs/z2.json"])


def test_position_and_columns_of_a_plain_line():
    launch = _one("#!/bin/bash\n  deepspeed --num_gpus 2 t.py \\\n    --deepspeed ds.json\n")
    assert (launch.line, launch.column, launch.end_column) == (2, 3, 32)


def test_trailing_backslash_at_end_of_file_is_accepted():
    launch = _one("deepspeed --num_gpus 2 t.py \\\n  --deepspeed ds.json \\\n")
    assert launch.config_paths == ["ds.json"]


@pytest.mark.parametrize("text, line, column", [
    ('echo hi\nX="abc\necho there\n', 2, 3),                          # bash: line 2, looking for matching `"'
    ("deepspeed t.py --deepspeed 'ds.json\n", 1, 28),
    ('deepspeed --num_gpus 2 train.py --deepspeed "ds.json\n', 1, 45),
    ("X=$(echo a\necho b\n", 1, 3),
    ("X=`echo a\n", 1, 3),
    ("deepspeed --num_gpus 2 t.py \\\n  `# note \\\n  --deepspeed ds.json\n", 2, 3),  # a backquoted comment never closed
    ("if true; then\n  echo x\n", 2, 1),                               # bash: unexpected end of file
    ("for i in 1 2; do\n  echo $i\n", 2, 1),
])
def test_syntax_error_only_where_bash_stops(text, line, column):
    with pytest.raises(LauncherParseError) as info:
        parse_launches(text)
    assert (info.value.line, info.value.column) == (line, column)
    problem = ShellSource("run.sh", text).parse_problem()
    assert problem.message.startswith("shell syntax error: unexpected end of file") and "\n" not in problem.message


def test_backquoted_comment_between_continued_arguments_is_an_empty_word():
    # `# note` in backquotes is a comment run as a command substitution: it expands to nothing and the command
    # goes on (bash -n accepts it); the grammar's comment would swallow the closing backquote
    text = "deepspeed --num_gpus 2 t.py \\\n  --lr 1 \\\n  `# 学习率 (note)` \\\n  --deepspeed ds.json\necho `date`\n"
    launches, error = read_script(text)
    assert error is None
    assert [(l.line, l.script_args, l.config_paths) for l in launches] == \
        [(1, ["--lr", "1", "--deepspeed", "ds.json"], ["ds.json"])]


def test_grammar_gaps_are_not_errors_and_keep_the_launches():
    # a stray token bash rejects but that is not an evident unterminated construct: no DSL001 either way
    launches, error = read_script("echo a )\ndeepspeed --num_gpus 2 t.py\n")
    assert error is None and [l.line for l in launches] == [2]


def _bash_valid(paths):
    out = []
    for p in paths:
        if subprocess.run([BASH, "-n", str(p)], capture_output=True).returncode == 0:
            out.append(p)
    return out


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_no_parse_error_on_any_fixture_script_bash_accepts():
    scripts = _bash_valid(sorted(p for p in FIXTURES.rglob("*") if p.suffix in SHELL_SUFFIXES))
    assert scripts
    for p in scripts:
        assert read_script(p.read_text())[1] is None, p


@pytest.mark.skipif(BASH is None or not REALWORLD.is_dir(), reason="development corpus not materialised")
def test_no_parse_error_on_any_realworld_script_bash_accepts():
    scripts = _bash_valid(sorted(p for p in REALWORLD.rglob("*") if p.suffix in SHELL_SUFFIXES and p.is_file()))
    texts = [p.read_text(errors="replace") for p in scripts]
    wrong = [(str(p), e.line, e.message) for p, text in zip(scripts, texts) if (e := read_script(text)[1])]
    assert not wrong


def test_parsing_repeated_scripts_is_stable():
    # speed lives in the benches (docs/performance.md), not in timed tests: this checks repeated parses agree
    body = "".join(f'N{i}=4\nrun_cmd="deepspeed \\\n  --num_gpus $N{i} train{i}.py \\\n  --deepspeed ds.json"\n'
                   f"for s in 1 2; do\n  if [ $s -gt 1 ]; then eval $run_cmd --seed $s; fi\ndone\n" for i in range(8))
    first = parse_launches(body)
    assert len(first) == 8
    for _ in range(20):
        assert parse_launches(body) == first


@pytest.mark.parametrize("line, world", [
    ("deepspeed --include localhost:0 t.py", 1),
    ("deepspeed --include localhost:0,1 t.py", 2),
    ("deepspeed -i node1:0,1@node2:0,1 t.py", 4),
    ("deepspeed --include node1:0@node2:0,1 t.py", 3),
    ("deepspeed --include node1@node2 t.py", None),            # every GPU of each host
    ("deepspeed --include localhost:$GPUS t.py", None),        # a list the script does not spell
    ("deepspeed --exclude localhost:1 t.py", None),            # depends on the machine's GPU count
    ("CUDA_VISIBLE_DEVICES=0 deepspeed t.py", 1),              # the runner turns it into --include localhost:0
    ("CUDA_VISIBLE_DEVICES=0,1 deepspeed --num_gpus 4 t.py", 4),   # ... unless --num_gpus/--include is given
    ("CUDA_VISIBLE_DEVICES=0 deepspeed --hostfile hf t.py", None),
    ("deepspeed t.py", None),
    ("deepspeed --num_gpus 1 --num_nodes 1 t.py", 1),
    ("torchrun t.py", 1),                                      # --nproc-per-node and --nnodes default to 1
    ("PET_NPROC_PER_NODE=4 torchrun t.py", 4),
    ("torchrun --nproc_per_node gpu t.py", None),
    ("srun torchrun t.py", None),                              # one torchrun per task
    ("srun -N 2 torchrun --nnodes 2 --nproc_per_node 1 t.py", 2),
    ("accelerate launch --num_processes 1 t.py", 1),
    ("accelerate launch t.py", None),                          # the accelerate config file decides
])
def test_world_size_as_the_launcher_decides_it(line, world):
    assert _one(line + "\n").world_size == world


def test_world_size_from_an_exported_device_list():
    assert _one("export CUDA_VISIBLE_DEVICES=2,3\ndeepspeed t.py\n").world_size == 2


def test_a_counter_changed_by_arithmetic_has_no_literal_value():
    text = "N=0\nfor h in a b; do\n  torchrun --nnodes 2 --node_rank $N t.py &\n  ((N++))\ndone\n"
    assert _one(text).options["--node_rank"] == "$N"
    assert _one("N=0\nlet N+=1\ntorchrun --node_rank $N t.py\n").options["--node_rank"] == "$N"
    assert _one("N=3\nif (( N == 3 )); then torchrun --node_rank $N t.py; fi\n").options["--node_rank"] == "3"


@pytest.mark.parametrize("line, part", [
    ("torchrun --nnodes 2 --node_rank 1 --master_addr h1 t.py", ("h1", "1")),
    ("torchrun --nnodes=2 --rdzv_backend c10d --rdzv_endpoint h1:29400 t.py", ("h1", "")),
    ("torchrun --nnodes 1 --node_rank 0 t.py", None),
    ("torchrun --nnodes 2 t.py", None),                       # static rendezvous without a node rank
    ("deepspeed --num_nodes 2 --node_rank 1 --master_addr h1 t.py", ("h1", "1")),
    ("accelerate launch --num_machines 2 --machine_rank 1 --main_process_ip h1 t.py", ("h1", "1")),
])
def test_node_of_a_multi_node_job(line, part):
    assert _one(line + "\n").node_of_job == part


@pytest.mark.parametrize("text, cwd", [
    ("deepspeed t.py\n", None),
    ("cd finetune\ndeepspeed t.py\n", ("start", "finetune")),            # from wherever it was started
    ("cd finetune && deepspeed t.py\n", ("start", "finetune")),
    ('cd "$(dirname "$0")"\ndeepspeed t.py\n', ("script", ".")),         # the script's own folder
    ("cd $(dirname $0)/../finetune\ndeepspeed t.py\n", ("script", "../finetune")),
    ('cd "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.."\ndeepspeed t.py\n', ("script", "..")),
    ("cd ..\ncd a\ndeepspeed t.py\n", ("start", "../a")),
    ("cd $WORK\ndeepspeed t.py\n", None),                              # cannot be followed
    ("cd /abs/path\ndeepspeed t.py\n", None),
])
def test_folder_the_script_cds_into_before_the_launch(text, cwd):
    assert _one(text).cwd == cwd


def test_unquoted_multi_word_variable_splits_into_launcher_options():
    text = 'ARGS="--nproc_per_node 8 --nnodes 1"\ntorchrun $ARGS train.py --deepspeed ds.json\n'
    launch = _one(text)
    assert (launch.script, launch.world_size, launch.config_paths) == ("train.py", 8, ["ds.json"])
    # options the script does not spell out: the world size is unknown, not torchrun's default of one
    launch = _one("torchrun $DISTRIBUTED_ARGS train.py --deepspeed ds.json\n")
    assert (launch.script, launch.world_size, launch.config_paths) == ("train.py", None, ["ds.json"])


def test_a_placeholder_redirection_does_not_swallow_the_next_lines():
    # `CKPT=<Specify path>` (a template's placeholder) parses as a redirection whose target the grammar takes from
    # the next line; bash ends the command at the newline: the lines after it are the script's own
    text = ("GPUS_PER_NODE=1\nCKPT=<Specify path>\nLOG=<Specify path>\n"
            'DISTRIBUTED_ARGS="\n    --nproc_per_node $GPUS_PER_NODE \\\n    --nnodes 1\n"\n'
            "torchrun $DISTRIBUTED_ARGS tools/convert.py --load $CKPT\n")
    launches, error = read_script(text)
    assert error is None
    assert [(l.line, l.script, l.world_size) for l in launches] == [(8, "tools/convert.py", 1)]
    # a redirection continued by a backslash is bash's too: nothing is split there
    assert _one("deepspeed --num_gpus 2 t.py > \\\n  log.txt\n").world_size == 2


@pytest.mark.parametrize("line", [
    "python -m torch.distributed.run --nproc_per_node 4 t.py",
    "python3 -m torch.distributed.launch --nproc_per_node=4 --use_env t.py",
    "torchrun --nproc_per_node 4 t.py",
])
def test_module_forms_of_torchrun_are_torchrun(line):
    # `torch.distributed.launch` parses its options with torchrun's parser and runs torchrun's `run` (the same
    # elastic agent); it adds only the flag `--use_env`
    launch = _one(line + "\n")
    assert (launch.launcher, launch.script, launch.world_size) == ("torchrun", "t.py", 4)


def test_readme_launches_get_no_shell_rule():
    from dslint.engine import check_texts
    readme = ("```bash\ndeepspeed --include localhost:0,1 t.py --seed 1 &\n"
              "deepspeed --include localhost:2,3 t.py --seed 2 &\n```\n")
    report = check_texts({"README.md": readme, "sweep.sh": readme.replace("```bash\n", "").replace("```\n", "")})
    assert report.files_checked == 2
    assert [(f.path, f.code) for f in report.findings] == [("sweep.sh", "DSL502")]


def test_script_arguments_held_with_an_unknown_folder():
    # LMOps dpkd: the script's arguments are built up in OPTS, some under a folder the launcher only knows as
    # `$1`: read after the script for the config they name, never as launcher options
    text = ('BASE_PATH=${1-"PATH_TO_CODE"}\nOPTS=""\nOPTS+=" --batch_size 4"\n'
            'OPTS+=" --deepspeed_config ${BASE_PATH}/configs/deepspeed/ds_config.json"\n'
            'CMD="torchrun --nproc_per_node 8 ${BASE_PATH}/main.py ${OPTS} $@"\n${CMD}\n')
    launch = _one(text)
    assert launch.script == "${1-PATH_TO_CODE}/main.py" and launch.world_size == 8
    assert launch.config_paths == ["${1-PATH_TO_CODE}/configs/deepspeed/ds_config.json"]
    assert launch.script_args == ["${OPTS}", "$@"]        # what else they say waits for the variable's value
    # the same words before the script stay opaque launcher options
    opaque = _one('ROOT=$1\nARGS="--nproc_per_node 8 --master_addr $ROOT"\ntorchrun $ARGS t.py\n')
    assert opaque.script == "t.py" and opaque.world_size is None
