"""Wall-clock timeline of a check run, for measuring where a whole-repository run waits (docs/performance.md).

`DSLINT_TIMELINE=PATH dslint check ...` appends one line per phase or task to PATH as it ends:
`pid<TAB>name<TAB>start<TAB>end<TAB>cpu` (wall times in seconds since the epoch, `time.time()`; the CPU seconds
the process spent in between, `time.process_time()`), written by the process that ran it
(the main process and every forked worker; one `O_APPEND` write per line, so lines of different processes
do not interleave). `python -m dslint.timeline PATH [--every]` prints the phases per process, relative to the
first start (per-file spans and libcst parses summed per process unless --every). Unset, `span` costs one global lookup and records nothing."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

PATH = os.environ.get("DSLINT_TIMELINE") or None


@contextmanager
def span(name: str):
    """Record the wall time of the body as `name` (nothing when DSLINT_TIMELINE is unset). Each span also lets
    the run's progress display redraw (`TICK`, dslint.progress: no thread of its own)."""
    if TICK is not None:
        TICK()
    if PATH is None:
        yield
        return
    start, cpu = time.time(), time.process_time()
    try:
        yield
    finally:
        record(name, start, time.time(), time.process_time() - cpu)


TICK = None        # dslint.progress: the display's refresh while a check runs on a terminal


def span_iter(name: str, items):
    """Yield from `items`, recording the wall time from the first request to the last item as `name`."""
    if PATH is None:
        yield from items
        return
    start, cpu = time.time(), time.process_time()
    try:
        yield from items
    finally:
        record(name, start, time.time(), time.process_time() - cpu)


def record_process(name: str) -> None:
    """Record this process's life so far as `name` (its start read from /proc; nothing where there is none)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return
    now = time.time()
    record(name, now - uptime + ticks / os.sysconf("SC_CLK_TCK"), now, time.process_time())


def record(name: str, start: float, end: float, cpu: float) -> None:
    if PATH is None:
        return
    line = f"{os.getpid()}\t{name}\t{start:.6f}\t{end:.6f}\t{cpu:.6f}\n".encode()
    fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def summary(path: str, every: bool = False) -> str:
    """The recorded spans per process, in start order: start and end relative to the earliest start, wall
    and CPU seconds. Per-file spans (names indented by two spaces) and libcst parses are summed per process
    unless `every`."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            pid, name, start, end, cpu = line.rstrip("\n").split("\t")
            rows.append((int(pid), name, float(start), float(end), float(cpu)))
    if not rows:
        return ""
    t0 = min(r[2] for r in rows)
    out = []
    for pid in dict.fromkeys(r[0] for r in sorted(rows, key=lambda r: r[2])):
        out.append(f"process {pid}:")
        sums: dict[str, list] = {}
        for _, name, start, end, cpu in sorted((r for r in rows if r[0] == pid), key=lambda r: (r[2], -r[3])):
            kind = "files" if name.startswith("  ") else "libcst parses" if name.startswith("libcst parse") else None
            if kind is not None and not every:
                total = sums.setdefault(kind, [0, 0.0, 0.0])
                total[0] += 1
                total[1] += end - start
                total[2] += cpu
                continue
            out.append(f"  {start - t0:8.3f} {end - t0:8.3f} {end - start:7.3f} {cpu:7.3f}  {name}")
        for kind, (count, wall, cpu) in sums.items():
            out.append(f"  {'':17} {wall:7.3f} {cpu:7.3f}  {count} {kind} (sum)")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(sys.argv[1], "--every" in sys.argv[2:]))
