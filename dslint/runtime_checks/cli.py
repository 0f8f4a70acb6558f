"""``dslint preflight`` command line (argparse: the launcher calls it once per rank, before typer exists)."""

from __future__ import annotations

import argparse
import sys

from dslint.runtime_checks.exit_codes import ExitCode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dslint preflight",
        description="Run a DeepSpeed/torch.distributed script for one dry step on every rank under a collective "
                    "tracer; compare the ranks through the rendezvous store; turn hangs into a diagnosis.",
        epilog="exit codes: 0 pass, 1 divergence/finding, 2 usage error, 3 hang, 4 script error, 5 internal error",
    )
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a collective (or a peer) may be pending before it counts as a hang (120)")
    parser.add_argument("--report", metavar="FILE", help="write the report as JSON to FILE (rank 0)")
    parser.add_argument("--steps", type=int, default=1, help="optimizer step boundaries in the dry step (1)")
    parser.add_argument("--continue", dest="keep_going", action="store_true",
                        help="after a pass, go on into real training with the watchdog on")
    parser.add_argument("script", help="the training/inference script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return parser


def main(argv: list[str], local_rank: int | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, errors are usage errors
        return 0 if exc.code == 0 else int(ExitCode.USAGE)
    if args.timeout <= 0 or args.steps < 1:
        print("dslint preflight: --timeout must be > 0 and --steps >= 1", file=sys.stderr)
        return int(ExitCode.USAGE)
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    from dslint.runtime_checks.dry_step import Options
    from dslint.runtime_checks.launch import run

    options = Options(timeout=args.timeout, steps=args.steps, keep_going=args.keep_going, report_path=args.report)
    try:
        return run(options, args.script, script_args, local_rank)
    except Exception:  # the pre-flight itself broke: say so with its own code
        import traceback

        traceback.print_exc()
        return int(ExitCode.INTERNAL)


def split_local_rank(argv: list[str]) -> tuple[list[str], int | None]:
    """Strip a leading ``--local_rank=N`` / ``--local_rank N`` (inserted by the deepspeed launcher)."""
    local_rank = None
    if argv and argv[0].startswith("--local_rank"):
        if "=" in argv[0]:
            local_rank, argv = int(argv[0].split("=", 1)[1]), argv[1:]
        elif len(argv) > 1:
            local_rank, argv = int(argv[1]), argv[2:]
    return argv, local_rank
