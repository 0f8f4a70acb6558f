"""``dslint preflight`` command line (argparse: the launcher calls it once per rank, before typer exists)."""

from __future__ import annotations

import argparse
import sys

from dslint.runtime_checks.exit_codes import ExitCode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dslint preflight",
        description="Run a DeepSpeed/torch.distributed script in dry steps on every rank under a collective "
                    "tracer, after auditing its data loaders; compare the ranks through the rendezvous store; turn "
                    "hangs into a diagnosis.",
        epilog="exit codes: 0 pass, 1 divergence/finding, 2 usage error, 3 hang, 4 script error, 5 internal error, "
               "6 not fully covered (the dry run stopped before the script's end: a bound, or a loop it cannot end)",
    )
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a collective (or a peer) may be pending before it counts as a hang (120)")
    parser.add_argument("--report", metavar="FILE", help="write the report as JSON to FILE (rank 0)")
    parser.add_argument("--steps", type=int, default=None,
                        help="end the dry step after exactly K optimizer step boundaries (default: run until the "
                             "audited loaders' first epoch end, bounded by --max-steps and --max-time)")
    parser.add_argument("--max-steps", type=int, default=50,
                        help="at most this many optimizer step boundaries in the default dry run (50)")
    parser.add_argument("--max-time", type=float, default=600.0,
                        help="seconds after which the default dry run ends at the next step boundary (600)")
    parser.add_argument("--audit-budget", type=float, default=120.0,
                        help="seconds each rank may spend walking its data loaders' epochs (collate only) "
                             "before the dry steps (120; 0 turns the loader audit off)")
    parser.add_argument("--keep-range-loops", dest="end_range_loops", action="store_false",
                        help="do not end a `for ... in range(...)` loop of the script around the optimizer step with "
                             "the dry steps (by default it ends there as a DataLoader epoch does, so the code after "
                             "it runs under the check)")
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
    if args.timeout <= 0 or (args.steps is not None and args.steps < 1) or args.max_steps < 1 \
            or args.max_time <= 0 or args.audit_budget < 0:
        print("dslint preflight: error: --timeout, --max-time must be > 0, --steps, --max-steps >= 1, "
              "--audit-budget >= 0", file=sys.stderr)
        return int(ExitCode.USAGE)
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    from dslint.runtime_checks.dry_step import Options
    from dslint.runtime_checks.launch import run

    options = Options(timeout=args.timeout, steps=args.steps, keep_going=args.keep_going, report_path=args.report,
                      max_steps=args.max_steps, max_time=args.max_time, audit_budget=args.audit_budget,
                      end_range_loops=args.end_range_loops)
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
