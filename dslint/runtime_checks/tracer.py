"""The collective tracer: wraps every torch.distributed collective (deepspeed.comm reaches them too).

Each call becomes a record: per-group sequence number, op, group, tensor shapes/dtypes, all_to_all split
sizes, innermost module path, phase and first user source line.  In the dry step a ``before_issue``
callback compares the call's fingerprint with the peers' (see ``dry_step``) before the call is issued.

Pending: a sync collective is pending while the main thread is inside the call.  On CUDA (NCCL) the call
returns as soon as the work is enqueued and the wait happens on the stream, so a sync collective on CUDA
tensors is issued as async work and waited for exactly as c10d's sync path does (``work.wait()`` makes the
current stream wait), and it stays pending until ``Work.is_completed()`` (GPU completion).  Ops without an
``async_op`` parameter (sync send/recv) get a CUDA event recorded on the current stream after the call
instead (a "stream mark").  Async work stays pending until its ``Work.is_completed()``, not ``wait()``
having returned.
"""

from __future__ import annotations

import collections
import inspect
import os
import threading
import time
from typing import Any, Callable

from dslint.runtime_checks.execution_context import ExecutionContext
from dslint.runtime_checks.fingerprint import POINT_TO_POINT_OPS

# op name -> (input argument names, output argument names)
TRACED_OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "all_reduce": (("tensor",), ()),
    "all_reduce_coalesced": (("tensors",), ()),
    "broadcast": (("tensor",), ()),
    "reduce": (("tensor",), ()),
    "all_gather": (("tensor",), ("tensor_list",)),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",)),
    "_all_gather_base": (("input_tensor",), ("output_tensor",)),
    "reduce_scatter": (("input_list",), ("output",)),
    "reduce_scatter_tensor": (("input",), ("output",)),
    "_reduce_scatter_base": (("input",), ("output",)),
    "all_to_all_single": (("input",), ("output",)),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",)),
    "gather": (("tensor",), ()),
    "scatter": ((), ("tensor",)),
    "barrier": ((), ()),
    "monitored_barrier": ((), ()),
    "all_gather_object": ((), ()),
    "broadcast_object_list": ((), ()),
    "gather_object": ((), ()),
    "scatter_object_list": ((), ()),
    "send": (("tensor",), ()),
    "recv": ((), ("tensor",)),
    "isend": (("tensor",), ()),
    "irecv": ((), ("tensor",)),
    "batch_isend_irecv": ((), ()),
}
SYMMETRIC_NUMEL_OPS = frozenset({"all_gather_into_tensor", "_all_gather_base", "reduce_scatter_tensor",
                                 "_reduce_scatter_base"})
# at most this many uncompleted works/stream marks are kept (the oldest are dropped): a Work holds its tensors
MAX_TRACKED = 4096
# DSLINT_PREFLIGHT_STREAM_MARKS=0 turns off tracking the GPU completion of sync CUDA collectives (Work or stream
# mark): they then count as done when the host call returns, as before ISSUE 7. For measuring the cost.
STREAM_MARKS = os.environ.get("DSLINT_PREFLIGHT_STREAM_MARKS", "1") != "0"


def _tensors(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for t in value if hasattr(t, "shape")]
    return [value] if hasattr(value, "shape") else []


def _shape(t: Any) -> tuple[tuple[int, ...], str]:
    return tuple(t.shape), str(t.dtype).removeprefix("torch.")


class GroupInfo:
    __slots__ = ("name", "ranks", "my_index", "size")

    def __init__(self, name: str, ranks: tuple[int, ...], my_index: int) -> None:
        self.name, self.ranks, self.my_index, self.size = name, ranks, my_index, len(ranks)


class Tracer:
    """Installed once per process; ``mode`` is "dry" (pre-issue checks), "watch" (record only) or "off"."""

    def __init__(self, context: ExecutionContext, keep_last: int | None = None) -> None:
        self.context = context
        self.mode = "dry"
        self.records: collections.deque[dict[str, Any]] | list[dict[str, Any]] = (
            collections.deque(maxlen=keep_last) if keep_last else []
        )
        self.counts: dict[str, int] = collections.defaultdict(int)  # group name -> collectives issued
        self.p2p_counts: dict[str, int] = collections.defaultdict(int)  # group name -> p2p ops issued
        self.op_counts: dict[tuple[str, str], int] = collections.defaultdict(int)
        self.groups: dict[str, GroupInfo] = {}
        self.pending: dict[str, Any] | None = None  # the sync collective the main thread is inside
        # uncompleted async works and CUDA stream marks of sync collectives, oldest first
        self.pending_async: collections.deque[tuple[dict[str, Any], Any]] = collections.deque()
        self.cuda_device: int | None = None  # the device of the first CUDA collective (for the watchdog thread)
        self.stream_marks = STREAM_MARKS
        self._event_pool: list[Any] = []
        self.before_issue: Callable[[GroupInfo, dict[str, Any], dict[str, Any]], bool] | None = None
        self._group_cache: dict[int, GroupInfo] = {}
        self._local = threading.local()
        self._originals: list[tuple[Any, str, Any]] = []
        self._world: Any = None

    def watch(self, keep_last: int = 256) -> None:
        """Record-only mode for the rest of the run: a bounded ring of records (an ever-growing list makes
        the garbage collector rescan it on every allocation burst) and no pre-issue exchange."""
        self.records = collections.deque(self.records, maxlen=keep_last)
        self.mode = "watch"

    # ---- installation -------------------------------------------------------------------------------
    def install(self) -> None:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        self._world_group = lambda: c10d.GroupMember.WORLD
        for op in TRACED_OPS:
            original = getattr(c10d, op, None)
            if original is None:
                continue
            wrapper = self._wrap(op, original)
            for namespace in (dist, c10d):
                if getattr(namespace, op, None) is original:
                    self._originals.append((namespace, op, original))
                    setattr(namespace, op, wrapper)
        self._rebind_deepspeed_backend()

    def _rebind_deepspeed_backend(self) -> None:
        """DeepSpeed's TorchBackend caches all_gather_into_tensor/reduce_scatter_tensor at construction."""
        import sys

        comm = sys.modules.get("deepspeed.comm.comm")
        cdb = getattr(comm, "cdb", None) if comm else None
        if cdb is None:
            return
        import torch.distributed as dist

        for attr, op in (("all_gather_function", "all_gather_into_tensor"),
                         ("reduce_scatter_function", "reduce_scatter_tensor")):
            if hasattr(cdb, attr):
                setattr(cdb, attr, getattr(dist, op))

    def uninstall(self) -> None:
        for namespace, op, original in reversed(self._originals):
            setattr(namespace, op, original)
        self._originals.clear()
        self.mode = "off"

    # ---- groups -------------------------------------------------------------------------------------
    def group_info(self, group: Any) -> GroupInfo:
        if group is None:
            group = self._world_group()
        info = self._group_cache.get(id(group))
        if info is None:
            import torch.distributed as dist

            ranks = tuple(dist.get_process_group_ranks(group))
            name = getattr(group, "group_name", None) or ",".join(map(str, ranks))
            info = GroupInfo(name, ranks, ranks.index(dist.get_rank()))
            self._group_cache[id(group)] = info
            self.groups[name] = info
        return info

    # ---- the wrapper --------------------------------------------------------------------------------
    def _wrap(self, op: str, original: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(original).parameters)
        in_names, out_names = TRACED_OPS[op]
        # position of async_op: a sync call on CUDA tensors is issued with async_op=True unless the caller
        # passed async_op positionally (then the stream-mark path is used)
        async_index = params.index("async_op") if "async_op" in params else -1
        local = self._local
        tracer = self

        def traced(*args: Any, **kwargs: Any) -> Any:
            if tracer.mode == "off" or getattr(local, "depth", 0):
                return original(*args, **kwargs)
            bound = dict(zip(params, args))
            bound.update(kwargs)
            record, fingerprint, info = tracer._describe(op, bound, in_names, out_names)
            if tracer.mode == "dry" and tracer.before_issue is not None:
                if not tracer.before_issue(info, record, fingerprint):
                    return None  # simulated: the peers disagreed and the call is not issued
            is_async = bool(bound.get("async_op")) or op in ("isend", "irecv", "batch_isend_irecv")
            record["async"] = is_async
            device = None
            if not is_async:
                tracer.pending = record
                if tracer.stream_marks:
                    device = _cuda_device(bound, in_names, out_names)
            local.depth = 1
            try:
                if device is not None and async_index >= len(args):
                    # CUDA (NCCL): the host call returns at enqueue and the wait happens on the stream. Issue
                    # it as async work and wait as c10d's sync path does, keeping the Work: its
                    # is_completed() tells when the GPU is past the collective.
                    work = original(*args, **dict(kwargs, async_op=True))
                    if work is not None:
                        work.wait()
                        record["on_stream"] = True
                        tracer._track(record, work)
                    result = None
                else:
                    result = original(*args, **kwargs)
                    if device is not None:  # an op without async_op (send/recv): an event after the call
                        record["on_stream"] = True
                        tracer._track(record, _StreamMark(device, tracer._event_pool))
            finally:
                local.depth = 0
                if not is_async:
                    tracer.pending = None
                    record["t1"] = time.monotonic()
            if is_async:
                if result is not None:
                    for work in (result if isinstance(result, list) else [result]):
                        tracer._track(record, work)
            elif device is not None and tracer.cuda_device is None:
                tracer.cuda_device = device.index
            return result

        traced.__wrapped__ = original  # type: ignore[attr-defined]
        traced.__name__ = getattr(original, "__name__", op)
        traced.__doc__ = original.__doc__
        return traced

    def _describe(self, op: str, bound: dict[str, Any], in_names: tuple[str, ...],
                  out_names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any], GroupInfo]:
        info = self.group_info(bound.get("group"))
        # point-to-point ops pair across ranks, not per group: a counter of their own, so that a send on one
        # rank and a recv on another leave the group's collective sequence numbers aligned
        counts = self.p2p_counts if op in POINT_TO_POINT_OPS else self.counts
        seq = counts[info.name]
        counts[info.name] = seq + 1
        self.op_counts[(info.name, op)] += 1
        ins = [_shape(t) for name in in_names for t in _tensors(bound.get(name))]
        outs = [_shape(t) for name in out_names for t in _tensors(bound.get(name))]
        dry = self.mode == "dry"
        fp: dict[str, Any] = self._fingerprint(op, bound, ins, outs, info) if dry else {}
        # watch mode keeps only the innermost user frame: the full stack is for dry-step diagnoses
        frames = self.context.user_frames(3, 12 if dry else 1)
        record = {
            "group": info.name, "seq": seq, "op": op, "ins": ins, "outs": outs,
            "splits": fp.get("splits"), "root": fp.get("root"),
            "module": self.context.module_path(), "phase": self.context.phase(),
            "source": list(frames[0]) if frames else None, "user_stack": [list(f) for f in frames],
            "t0": time.monotonic(), "t1": None,
        }
        if counts is self.p2p_counts:
            record["p2p"] = True
        elif dry:
            reduced = self.context.gradient_params()
            if reduced is not None:  # a gradient reduction: attributed through the parameters it reduces
                record["params"], record["params_from"] = reduced[0][:64], reduced[1]
                record["params_count"] = len(reduced[0])
        self.records.append(record)
        return record, fp, info

    def _fingerprint(self, op: str, bound: dict[str, Any], ins: list[Any], outs: list[Any],
                     info: GroupInfo) -> dict[str, Any]:
        fp: dict[str, Any] = {"op": op, "ins": ins, "outs": outs}
        root = bound.get("src", bound.get("dst"))
        if root is not None and op not in ("send", "recv", "isend", "irecv"):
            fp["root"] = root
        rop = bound.get("op")
        if rop is not None:
            fp["rop"] = str(rop).rpartition(".")[2]
        if op == "all_to_all_single":
            self._pairwise_single(fp, bound, info.size)
        elif op == "all_to_all":
            fp["send"] = [t.numel() for t in _tensors(bound.get("input_tensor_list"))]
            fp["recv"] = [t.numel() for t in _tensors(bound.get("output_tensor_list"))]
        elif op in SYMMETRIC_NUMEL_OPS:
            fp["sym"] = [sum(_numel(s) for s, _ in ins), sum(_numel(s) for s, _ in outs)]
        else:
            fp["sym"] = [ins, outs] if ins or outs else None
        return fp

    @staticmethod
    def _pairwise_single(fp: dict[str, Any], bound: dict[str, Any], size: int) -> None:
        inp, out = bound.get("input"), bound.get("output")
        in_splits, out_splits = bound.get("input_split_sizes"), bound.get("output_split_sizes")
        fp["send"] = _split_counts(inp, in_splits, size)
        fp["recv"] = _split_counts(out, out_splits, size)
        if in_splits or out_splits:
            fp["splits"] = [list(in_splits or []), list(out_splits or [])]

    # ---- state for the watchdog and reports ---------------------------------------------------------
    def stuck_collective(self, now: float, timeout: float) -> dict[str, Any] | None:
        """The collective pending longer than ``timeout`` (called from the watchdog thread)."""
        pending = self.pending
        if pending is not None and now - pending["t0"] > timeout:
            return pending
        for record, work in list(self.pending_async):
            if now - record["t0"] > timeout:
                try:
                    done = work.is_completed()
                except Exception:
                    done = True
                if not done:
                    return record
        return None

    def _track(self, record: dict[str, Any], work: Any) -> None:
        """Keep ``work`` until it completes. Completed entries are dropped from the old end on every call, so
        the tracer never holds a finished Work (and the tensors it references) for long."""
        pending = self.pending_async
        while pending and _completed(pending[0][1]):
            self._release(pending.popleft()[1])
        if len(pending) >= MAX_TRACKED:
            pending.popleft()  # dropped unfinished: its event must not be reused
        pending.append((record, work))

    def _release(self, work: Any) -> None:
        if isinstance(work, _StreamMark):
            work.release(self._event_pool)

    def current(self) -> dict[str, Any] | None:
        if self.pending is not None:
            return self.pending
        for record, work in list(self.pending_async):
            if not _completed(work):
                return record
        return None

    def outstanding(self) -> int:
        """How many tracked async works / stream marks have not completed (drops the completed ones)."""
        items = list(self.pending_async)
        left = [(r, w) for r, w in items if not _completed(w)]
        if len(left) != len(items):
            self.pending_async = collections.deque(left)
            kept = {id(w) for _, w in left}
            for _, w in items:
                if id(w) not in kept:
                    self._release(w)
        return len(left)

    def bind_thread_device(self) -> None:
        """Make the calling thread's current CUDA device the collectives' device before it queries events: a
        thread's first CUDA call on device 0 would otherwise create a context on GPU 0 for every rank."""
        if self.cuda_device is None or getattr(self._local, "bound_device", None) == self.cuda_device:
            return
        import torch

        torch.cuda.set_device(self.cuda_device)
        self._local.bound_device = self.cuda_device


class _StreamMark:
    """The completion of a sync collective on CUDA: an event recorded on the current stream after the call.

    Events come from the tracer's pool and go back to it once the mark is seen completed (creating and
    destroying a CUDA event per collective cost ~25 µs of host time on an H200 machine, recording a pooled
    one a few µs). ``done`` is set before the event is reused, so a thread that still holds this mark reads
    it as completed even when the event already belongs to a newer collective."""

    __slots__ = ("event", "done")

    def __init__(self, device: Any, pool: list[Any]) -> None:
        import torch

        self.done = False
        self.event = pool.pop() if pool else torch.cuda.Event()
        if torch.cuda.is_current_stream_capturing():  # inside CUDA graph capture: no mark (counts as done)
            self.done = True
        else:
            self.event.record(torch.cuda.current_stream(device))

    def is_completed(self) -> bool:
        if self.done:
            return True
        completed = self.event.query()
        return self.done or completed

    def release(self, pool: list[Any]) -> None:
        """Called once the mark was seen completed: its event may serve a later collective."""
        if self.done:
            return
        self.done = True
        if len(pool) < 256:
            pool.append(self.event)


def _cuda_device(bound: dict[str, Any], in_names: tuple[str, ...], out_names: tuple[str, ...]) -> Any:
    for name in in_names + out_names:
        for t in _tensors(bound.get(name)):
            return t.device if getattr(t, "is_cuda", False) else None
    return None


def _completed(work: Any) -> bool:
    try:
        return bool(work.is_completed())
    except Exception:
        return True


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _split_counts(t: Any, splits: Any, size: int) -> list[int]:
    if t is None:
        return [0] * size
    numel = t.numel()
    if splits:
        row = numel // t.shape[0] if t.shape and t.shape[0] else 0
        return [int(s) * row for s in splits]
    return [numel // size if numel % size == 0 else numel / size] * size
