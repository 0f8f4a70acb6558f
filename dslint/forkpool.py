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


# --- work stealing: long-lived workers served one item at a time ------------------------------------------

_EXIT = -1


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


def _serve(fn: Callable[[Any], Any], commands: int, results: int, lane: int,
           on_exit: Optional[Callable[[int], None]]) -> None:
    """A stealing worker's loop (in the child): read an item index, answer fn(index), until told to exit."""
    code = 1
    served = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        while True:
            head = b""
            while len(head) < 8:
                part = os.read(commands, 8 - len(head))
                if not part:
                    raise EOFError
                head += part
            item = int.from_bytes(head, "little", signed=True)
            if item == _EXIT:
                break
            view = memoryview(_frame(pickle.dumps(fn(item), protocol=pickle.HIGHEST_PROTOCOL)))
            while view:
                view = view[os.write(results, view):]
            served += 1
        if on_exit is not None:
            on_exit(served)
        code = 0
    except BaseException:                           # noqa: BLE001 -- reported to the parent as FAILED
        pass
    finally:
        os._exit(code)


class _Worker:
    """The parent's end of one stealing worker: its pid, pipes, the item it is on and what it has served."""

    def __init__(self, fn: Callable[[Any], Any], lane: int, on_exit: Optional[Callable[[int], None]]):
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(cmd_w)
            os.close(res_r)
            _serve(fn, cmd_r, res_w, lane, on_exit)
        os.close(cmd_r)
        os.close(res_w)
        self.pid, self.commands, self.results, self.lane = pid, cmd_w, res_r, lane
        self.item: Optional[int] = None
        self.buffer = bytearray()
        self.weight = 0.0
        _LIVE.add(pid)

    def send(self, item: int) -> None:
        self.item = item
        try:
            os.write(self.commands, item.to_bytes(8, "little", signed=True))
        except OSError:
            pass        # it has died: its results pipe ends, and the item is reported FAILED

    def frames(self) -> list[Any]:
        """The whole results read so far (each unpickled), leaving a partial one in the buffer."""
        out = []
        while len(self.buffer) >= 8:
            size = int.from_bytes(self.buffer[:8], "little")
            if len(self.buffer) < 8 + size:
                break
            out.append(pickle.loads(bytes(self.buffer[8:8 + size])))
            del self.buffer[:8 + size]
        return out

    def end(self, statuses: Optional[dict] = None, kill: bool = False) -> int:
        if kill:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            try:
                os.write(self.commands, _EXIT.to_bytes(8, "little", signed=True))
            except OSError:
                pass
        for fd in (self.commands, self.results):
            try:
                os.close(fd)
            except OSError:
                pass
        _, status = os.waitpid(self.pid, 0)
        _LIVE.discard(self.pid)
        return os.waitstatus_to_exitcode(status)


def run_stealing(fn: Callable[[int], Any], lanes: list[list[int]], weights: dict[int, float], budget: float = 0,
                 sizes: Optional[dict[int, float]] = None, statuses: Optional[dict] = None,
                 on_exit: Optional[Callable[[int], None]] = None, lane_times: Optional[list] = None
                 ) -> Iterator[tuple[int, Any]]:
    """(item, fn(item)) for every item (an int >= 0) of `lanes`, as they come (not in order): one forked worker
    per lane takes the lane's items from its front, one at a time, keeping what it computed for the earlier
    ones (a file's neighbours parsed once); a worker whose lane is empty takes items from the back of the
    lane with the most weight left (work stealing), so that the workers end together whatever the estimated
    `weights` got wrong. A worker that has served `budget` (0: no limit) of `sizes` (else of `weights`) is told
    to exit and a fresh one forked for its lane (its memory returned to the system). A worker that dies or fails gives
    (its item, FAILED), its exit code in `statuses[item]`, and is replaced. `on_exit(served)` runs in each
    worker as it exits normally; `lane_times[k]`, when given, gets the wall seconds lane k was busy."""
    import time
    from collections import deque
    queues = [deque(lane) for lane in lanes if lane]
    left = [sum(weights.get(i, 0.0) for i in q) for q in queues]
    busy = [0.0] * len(queues)
    workers: dict[int, _Worker] = {}        # results fd -> worker
    sel = selectors.DefaultSelector()
    started = [time.perf_counter()] * len(queues)

    def take(lane: int) -> Optional[int]:
        if queues[lane]:
            item = queues[lane].popleft()
            left[lane] -= weights.get(item, 0.0)
            return item
        richest = max(range(len(queues)), key=lambda k: (left[k], len(queues[k])), default=None)
        if richest is None or not queues[richest]:
            return None
        item = queues[richest].pop()
        left[richest] -= weights.get(item, 0.0)
        return item

    def start(lane: int, item: int) -> None:
        worker = _Worker(fn, lane, on_exit)
        workers[worker.results] = worker
        sel.register(worker.results, selectors.EVENT_READ)
        worker.send(item)

    def retire(worker: _Worker, kill: bool = False) -> int:
        sel.unregister(worker.results)
        del workers[worker.results]
        return worker.end(kill=kill)

    try:
        for lane in range(len(queues)):
            item = take(lane)
            if item is not None:
                start(lane, item)
        while workers:
            for key, _ in sel.select():
                worker = workers[key.fd]
                data = os.read(key.fd, 1 << 20)
                if data:
                    worker.buffer += data
                    done = worker.frames()
                    if not done:
                        continue
                    item, worker.item = worker.item, None
                    busy[worker.lane] = time.perf_counter() - started[worker.lane]
                    worker.weight += (sizes if sizes is not None else weights).get(item, 0.0)
                    nxt = take(worker.lane)
                    if nxt is None:
                        retire(worker)
                    elif budget and worker.weight >= budget:
                        retire(worker)
                        start(worker.lane, nxt)
                    else:
                        worker.send(nxt)
                    yield item, done[0]
                    continue
                # the worker ended without answering its item: it died (or fn raised)
                item = worker.item
                code = retire(worker)
                if statuses is not None and item is not None:
                    statuses[item] = code
                nxt = take(worker.lane)
                if nxt is not None:
                    start(worker.lane, nxt)
                if item is not None:
                    yield item, FAILED
    finally:
        for worker in list(workers.values()):
            retire(worker, kill=True)
        sel.close()
        if lane_times is not None:
            lane_times[:] = busy
