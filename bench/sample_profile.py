"""A sampling CPU profile of one in-process `dslint` command (docs/performance.md, corpus repositories).

    python bench/sample_profile.py PROFILE -- check --no-cache -j 1 --format json -o /dev/null .
    python bench/sample_profile.py --report PROFILE [--top 40] [--under FUNCTION]

A `SIGPROF` timer fires every `--interval` seconds of the process's CPU time and the handler records the Python
stack; the samples (stack → count) are pickled to PROFILE when the command ends (dslint leaves through
`os._exit`, which is wrapped for that). Unlike cProfile, nothing is added per call, so small hot functions
(`isinstance` against an ABC, a node's `children`) keep their share. `--report` prints the inclusive and
exclusive shares per function; `--under F` the split of the samples under the outermost frame matching F by
the frames it calls. Run with `-j 1` (forked workers are not sampled).
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import signal
import sys


def _frames(frame) -> tuple:
    out = []
    while frame is not None:
        code = frame.f_code
        out.append((code.co_filename, code.co_firstlineno, code.co_name))
        frame = frame.f_back
    return tuple(out)


def record(path: str, argv: list[str], interval: float) -> None:
    samples: collections.Counter = collections.Counter()

    def on_tick(_sig, frame) -> None:
        samples[_frames(frame)] += 1

    def dump() -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        with open(path, "wb") as fh:
            pickle.dump(dict(samples), fh)

    real_exit = os._exit

    def exit_after_dump(code: int) -> None:
        dump()
        real_exit(code)

    os._exit = exit_after_dump
    sys.argv = ["dslint", *argv]
    from dslint.cli import main
    signal.signal(signal.SIGPROF, on_tick)
    signal.setitimer(signal.ITIMER_PROF, interval, interval)
    try:
        main()
    finally:
        dump()


def _name(frame: tuple) -> str:
    return f"{frame[0]}:{frame[1]} {frame[2]}"


def report(path: str, top: int, under: str | None) -> None:
    with open(path, "rb") as fh:
        samples = pickle.load(fh)
    total = sum(samples.values()) or 1
    print(f"{total} samples")
    if under:
        split: collections.Counter = collections.Counter()
        for stack, n in samples.items():
            hits = [i for i, f in enumerate(stack) if under in _name(f)]
            if hits:
                i = hits[-1]
                split[_name(stack[i - 1]) if i else "(itself)"] += n
        for name, n in split.most_common(top):
            print(f"{100 * n / total:5.1f}% {name}")
        return
    inclusive: collections.Counter = collections.Counter()
    exclusive: collections.Counter = collections.Counter()
    for stack, n in samples.items():
        exclusive[stack[0]] += n
        for f in set(stack):
            inclusive[f] += n
    print("--- inclusive")
    for f, n in inclusive.most_common(top):
        print(f"{100 * n / total:5.1f}% {_name(f)}")
    print("--- exclusive")
    for f, n in exclusive.most_common(top):
        print(f"{100 * n / total:5.1f}% {_name(f)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--under")
    ap.add_argument("--interval", type=float, default=0.004)
    args, rest = ap.parse_known_args()
    if args.report:
        report(args.profile, args.top, args.under)
    else:
        record(args.profile, [a for a in rest if a != "--"], args.interval)


if __name__ == "__main__":
    main()
