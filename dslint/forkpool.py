"""Forked workers, one process per task.

`check` runs its whole-project analyses once in the main process and then deals contiguous runs of files to
children forked from it, which inherit those analyses without pickling them. Each child handles one run and
exits, so the syntax trees it parsed (the files of its run and those their analysis read) are returned to
the system with it: memory is bounded by the size of a run, not of the repository (DESIGN.md §5, ISSUE 6).

`concurrent.futures` cannot do this: its `max_tasks_per_child` refuses the fork start method. Results come
back pickled through a pipe; a child that dies (the OOM killer) or fails yields `FAILED` for its task, and
the caller redoes that task in the main process.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
from typing import Any, Callable, Iterator, Optional, Sequence

FAILED: Any = type("Failed", (), {"__repr__": lambda self: "FAILED"})()
_LIVE: set[int] = set()          # pids of the children running now (for `kill_children` on Ctrl-C)


def kill_children() -> None:
    """SIGKILL every child still running (an interrupted run exits without waiting for them)."""
    for pid in list(_LIVE):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run_forked(fn: Callable[[Any], Any], tasks: Sequence[Any], jobs: int,
               statuses: Optional[dict] = None, while_running: Optional[Callable[[], bool]] = None
               ) -> Iterator[tuple[int, Any]]:
    """(index, fn(task)) for every task, in task order, each computed in a child forked for it; at most
    `jobs` children at a time. A child that exits abnormally gives (index, FAILED), and its exit code in
    `statuses[index]` when given (negative: the signal that ended it). `while_running`: work this process
    does while its children run instead of waiting for them, one small step per call: called when every
    child slot is taken (or no task is left to start), it returns True when it did a step (the children's
    pipes are then polled, and it is called again), False when it has nothing to do until a child ends
    (this process then waits for one). No child is forked during a step."""
    results: dict[int, Any] = {}
    running: dict[int, tuple[int, int, list[bytes]]] = {}     # read end → (task index, pid, bytes so far)
    sel = selectors.DefaultSelector()
    started = done = 0
    try:
        while done < len(tasks):
            while started < len(tasks) and len(running) < jobs:
                read, pid = _start(fn, tasks[started])
                _LIVE.add(pid)
                running[read] = (started, pid, [])
                sel.register(read, selectors.EVENT_READ)
                started += 1
            stepped = while_running is not None and while_running()
            for key, _ in sel.select(0 if stepped else None):
                fd = key.fd
                data = os.read(fd, 1 << 20)
                if data:
                    running[fd][2].append(data)
                    continue
                sel.unregister(fd)
                os.close(fd)
                index, pid, parts = running.pop(fd)
                results[index] = _collect(pid, parts, index, statuses)
                _LIVE.discard(pid)
            while done in results:
                yield done, results.pop(done)
                done += 1
    finally:
        for fd, (_, pid, _) in running.items():     # the consumer stopped early, or an error: end the rest
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            _LIVE.discard(pid)
            os.close(fd)
        sel.close()


def _start(fn: Callable[[Any], Any], task: Any) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: never returns into the caller's code
        code = 1
        try:
            # Ctrl-C reaches the whole process group: a child ends at once, even inside native code (the parent
            # kills those it started when it is interrupted alone)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.close(read)
            view = memoryview(pickle.dumps(fn(task), protocol=pickle.HIGHEST_PROTOCOL))
            while view:
                view = view[os.write(write, view):]
            code = 0
        except BaseException:                       # noqa: BLE001 -- reported to the parent as FAILED
            pass
        finally:
            os._exit(code)                          # no atexit handlers, no flush of the parent's buffers
    os.close(write)
    return read, pid


def _collect(pid: int, parts: list[bytes], index: int = 0, statuses: Optional[dict] = None) -> Any:
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if statuses is not None:
        statuses[index] = code
    if code != 0:
        return FAILED
    try:
        return pickle.loads(b"".join(parts))
    except Exception:                               # noqa: BLE001 -- a truncated result: redo the task
        return FAILED
