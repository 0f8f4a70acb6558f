"""Hooks into DeepSpeed, torch.autograd and transformers: step boundaries, phases, gradients, saves.

Saves are redirected into the session's scratch directory rather than skipped: DeepSpeed's
``save_checkpoint`` is itself collective (barriers, ZeRO-3 gathers), so the dry step must still run it,
but nothing may land in the user's output directories.
"""

from __future__ import annotations

import builtins
import dis
import functools
import os
import sys
from typing import Any, Callable

from dslint.runtime_checks.dry_step import DrySession

_installed: list[tuple[Any, str, Any]] = []
# the wrappers are installed on classes once per process; they act for whichever session is active
_active: list[DrySession] = []


def _session() -> DrySession | None:
    return _active[-1] if _active else None


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__dslint_original__", None) is not None:
        return
    replacement = functools.wraps(original)(make(original))
    replacement.__dslint_original__ = original
    setattr(owner, name, replacement)
    _installed.append((owner, name, original))


def uninstall() -> None:
    _active.clear()
    while _installed:
        owner, name, original = _installed.pop()
        setattr(owner, name, original)


def install(session: DrySession, script_text: str = "") -> None:
    _active.append(session)
    _install_autograd(session)
    _install_torch_save(session)
    _install_dataloader()
    if "deepspeed" in script_text or "deepspeed" in sys.modules or "transformers" in script_text:
        try:
            import deepspeed  # noqa: F401
        except ImportError:
            pass
        else:
            install_engine(session)
    if "transformers" in script_text or "transformers" in sys.modules:
        try:
            import transformers  # noqa: F401
        except ImportError:
            pass
        else:
            _install_transformers(session)


def _install_autograd(session: DrySession) -> None:
    import torch

    ctx = session.context

    def make(original: Any) -> Any:
        def backward(*args: Any, **kwargs: Any) -> Any:
            ctx.push_phase("backward")
            try:
                return original(*args, **kwargs)
            finally:
                ctx.pop_phase()
        return backward

    _patch(torch.autograd, "backward", make)


class _WatchedIterator:
    """The script's iterator over a DataLoader in the dry run: notes each batch's shape class and the epoch end
    of an audited loader (``index``), and ends the epoch early once the ranks have agreed to (epoch truncation,
    ``DrySession.ends_epoch``): ``__next__`` then raises StopIteration, as at a natural epoch end."""

    def __init__(self, iterator: Any, session: DrySession, index: int | None, loader: Any) -> None:
        self._iterator, self._session, self._index = iterator, session, index
        self.loader, self.index = loader, index
        self.key: Any = id(loader)  # epochs begun after the truncation are counted per loader
        self.kind_name, self.site = type(loader).__name__, None
        self.started_step = session.steps_done
        self.fresh = session.truncated_at is not None  # begun after the truncation: a later epoch
        self.ended = self.exhausted = self.drew = False
        if self.fresh and len(session.iterators) < 64:
            session.iterators.append(self)

    def __iter__(self) -> "_WatchedIterator":
        return self

    def __next__(self) -> Any:
        session = self._session
        if session.ends_epoch(self):
            raise StopIteration
        try:
            batch = next(self._iterator)
        except StopIteration:
            self.exhausted = True
            if session.status == "running" and self._index is not None:
                session.epoch_end(self._index)
            raise
        self.drew = True
        if session.status == "running" and self._index is not None:
            session.batch_seen(self._index, batch)
        return batch

    def __len__(self) -> int:
        return len(self._iterator)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._iterator, name)


class _RangeIterator:
    """The iterator of a ``for ... in range(...)`` statement of the launched script in the dry run (``LoopRange``):
    yields the range's values, and ends the loop early as a watched DataLoader iterator ends its epoch
    (``DrySession.ends_epoch``) when this loop is the one around the optimizer step at the truncation."""

    def __init__(self, iterator: Any, session: DrySession, site: tuple[str, int]) -> None:
        self._iterator, self._session, self.site = iterator, session, site
        self.key: Any = ("range", *site)
        self.loader, self.index, self.kind_name = None, None, "range"
        self.started_step = session.steps_done
        self.fresh = session.truncated_at is not None
        self.ended = self.exhausted = self.drew = False
        if self.fresh and session.is_step_loop(site) and len(session.iterators) < 64:
            session.iterators.append(self)

    def __iter__(self) -> "_RangeIterator":
        return self

    def __next__(self) -> Any:
        if self._session.ends_epoch(self):
            raise StopIteration
        try:
            value = next(self._iterator)
        except StopIteration:
            self.exhausted = True
            raise
        self.drew = True
        return value

    def __length_hint__(self) -> int:
        return self._iterator.__length_hint__()


class _LoopRange:
    """What ``range(...)`` gives as the iterable of a ``for`` statement of the launched script: the range itself
    to anything that reads it, an ended-early iterator (``_RangeIterator``) in a dry run that can be truncated."""

    __slots__ = ("_range", "_site")

    def __init__(self, values: range, site: tuple[str, int]) -> None:
        self._range, self._site = values, site

    def __iter__(self) -> Any:
        session = _session()
        if session is None or not session.truncates():
            return iter(self._range)
        return _RangeIterator(iter(self._range), session, self._site)

    def __len__(self) -> int:
        return len(self._range)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._range, name)


_ITERATED: dict[tuple[Any, int], bool] = {}  # (code, offset of a call) -> is its result handed to GET_ITER?


def _iterated_by_for(frame: Any) -> bool:
    """Is the call at ``frame``'s current instruction the iterable of a ``for`` statement (its result goes straight
    to GET_ITER, so no code ever sees the object, only its iterator)?"""
    key = (frame.f_code, frame.f_lasti)
    found = _ITERATED.get(key)
    if found is None:
        found = False
        instructions = list(dis.get_instructions(frame.f_code))
        for i, ins in enumerate(instructions[:-1]):
            if ins.offset == frame.f_lasti:
                found = instructions[i + 1].opname == "GET_ITER"
                break
        if len(_ITERATED) < 4096:
            _ITERATED[key] = found
    return found


class _RangeType(type):
    """``isinstance(x, range)`` and ``issubclass`` in the script answer as for the builtin."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.range)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, builtins.range)

    def __repr__(cls) -> str:
        return repr(builtins.range)


class ScriptRange(metaclass=_RangeType):
    """The launched script's ``range`` in the dry run (its module globals, ``launch.run``): the builtin
    ``range(...)`` everywhere, except as the iterable of a ``for`` statement while a dry run may be truncated,
    where it is a ``_LoopRange`` -- so that a training loop written ``for step in range(args.steps)`` ends with
    the dry steps as a DataLoader epoch does, and the code after it runs under the check."""

    def __new__(cls, *args: Any) -> Any:  # type: ignore[misc]
        values = builtins.range(*args)
        session = _session()
        if session is None or not session.truncates():
            return values
        frame = sys._getframe(1)
        if not _iterated_by_for(frame):
            return values
        return _LoopRange(values, (frame.f_code.co_filename, frame.f_lineno))


def _install_dataloader() -> None:
    """Audit each DataLoader when the script first iterates it in the dry step (before its first batch), and
    watch its iterators (coverage, epoch truncation)."""
    from torch.utils.data import DataLoader

    def make(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            session = _session()
            if session is None or session.status != "running":
                return original(self)
            index = session.audit_loader(self)  # before the script's iterator draws from the random state
            iterator = original(self)
            if session.status != "running":
                return iterator
            if index is None and (session.options.steps is not None or session.options.keep_going):
                return iterator  # neither audited nor ever truncated
            return _WatchedIterator(iterator, session, index, self)
        return __iter__

    _patch(DataLoader, "__iter__", make)


def install_engine(session: DrySession) -> None:
    from deepspeed.runtime.engine import DeepSpeedEngine

    if session not in _active:
        _active.append(session)

    def make_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            session = _session()
            if session is not None:
                observe_engine(session, self)
        return __init__

    def make_phase(original: Any, phase: str) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            session = _session()
            if session is None:
                return original(self, *args, **kwargs)
            session.context.push_phase(phase)
            try:
                return original(self, *args, **kwargs)
            finally:
                session.context.pop_phase()
        return run

    def make_step(original: Any) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            session = _session()
            if session is None:
                return original(self, *args, **kwargs)
            boundary = self.is_gradient_accumulation_boundary()
            session.context.push_phase("step")
            try:
                result = original(self, *args, **kwargs)
            finally:
                session.context.pop_phase()
            if boundary and session.status == "running":
                session.step_boundary()
            return result
        return step

    def make_save(original: Any) -> Any:
        def save_checkpoint(self: Any, save_dir: Any, *args: Any, **kwargs: Any) -> Any:
            session = _session()
            if session is not None and session.status == "running":
                save_dir = session_redirect(session, save_dir)
            return original(self, save_dir, *args, **kwargs)
        return save_checkpoint

    _patch(DeepSpeedEngine, "__init__", make_init)
    _patch(DeepSpeedEngine, "backward", lambda o: make_phase(o, "backward"))
    _patch(DeepSpeedEngine, "step", make_step)
    _patch(DeepSpeedEngine, "save_checkpoint", make_save)


def observe_engine(session: DrySession, engine: Any) -> None:
    """Name the model's modules, hook every trainable parameter's gradient, note optimizer coverage."""
    model = engine.module
    session.context.name_model(engine)
    if all(m is not model for m in session.models):
        session.models.append(model)
    ctx = session.context
    for name, param in model.named_parameters():
        if not param.requires_grad or name in session.trainable:
            continue
        session.trainable[name] = None

        def seen(grad: Any, name: str = name) -> None:
            session.grads_seen.add(name)
            ctx.grad_arrived(name)

        param.register_hook(seen)
    covered: set[int] = set()
    for opt in (getattr(engine, "optimizer", None), getattr(engine, "basic_optimizer", None),
                getattr(engine, "client_optimizer", None)):
        if opt is None:
            continue
        for attr in ("bit16_groups", "fp16_groups"):
            for group in getattr(opt, attr, None) or []:
                covered.update(id(p) for p in group)
        for group in getattr(opt, "param_groups", None) or []:
            covered.update(id(p) for p in group.get("params", []))
    if covered:
        session.not_in_optimizer = [n for n, p in model.named_parameters()
                                    if p.requires_grad and id(p) not in covered]
    ctx.param_root = ctx.module_names.get(id(model))
    names = {id(p): n for n, p in model.named_parameters()}
    session.param_names.update(names)
    _install_bucket_attribution(session, engine)


def _bucket_names(session: DrySession, params: Any) -> list[str]:
    names = session.param_names
    return [names.get(id(p), getattr(p, "ds_id", "?")) for p in params]


def _install_bucket_attribution(session: DrySession, engine: Any) -> None:
    """Attribute gradient-reduction collectives through the parameters in the bucket being reduced: ZeRO-1/2's
    ``reduce_ipg_grads`` (its ``ipg_buckets`` hold (group, index, id) of each parameter), ZeRO-3's bucket
    reduction (``IPGBucketZ3.params``) and the engine's ``allreduce_bucket`` (ZeRO-0: a list of gradients)."""

    def around(names: Callable[..., list[str]]) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def reduce(self: Any, *args: Any, **kwargs: Any) -> Any:
                active = _session()
                if active is None:
                    return original(self, *args, **kwargs)
                try:
                    params = names(active, self, *args, **kwargs)
                except Exception:  # attribution is best effort; the reduction itself must run
                    params = []
                if not params:
                    return original(self, *args, **kwargs)
                active.context.reducing.append(params)
                try:
                    return original(self, *args, **kwargs)
                finally:
                    active.context.reducing.pop()
            return reduce
        return make

    def zero12(active: DrySession, opt: Any, comm_dtype: Any = None, **_: Any) -> list[str]:
        buckets = opt.ipg_buckets
        dtypes = [comm_dtype] if comm_dtype is not None else list(buckets)
        return _bucket_names(active, [opt.bit16_groups[g][i] for d in dtypes for g, i, _ in buckets[d].params])

    def zero3(active: DrySession, opt: Any, comm_dtype: Any, *_: Any, **__: Any) -> list[str]:
        return _bucket_names(active, opt.ipg_buckets[comm_dtype].params)

    def stage0(active: DrySession, eng: Any, bucket: Any, *_: Any, **__: Any) -> list[str]:
        by_grad = {id(p.grad): p for p in eng.module.parameters() if p.grad is not None}
        return _bucket_names(active, [by_grad[id(g)] for g in bucket if id(g) in by_grad])

    opt = getattr(engine, "optimizer", None)
    if opt is not None and hasattr(opt, "ipg_buckets"):
        if hasattr(type(opt), "reduce_ipg_grads"):
            _patch(type(opt), "reduce_ipg_grads", around(zero12))
        mangled = "_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads"
        if hasattr(type(opt), mangled):
            _patch(type(opt), mangled, around(zero3))
    _patch(type(engine), "allreduce_bucket", around(stage0))


def session_redirect(session: DrySession, path: Any) -> str:
    target = os.path.join(session.scratch_dir, "saves", str(len(session.redirected_saves)),
                          os.path.basename(os.fspath(path).rstrip(os.sep)) or "save")
    session.redirected_saves.append(os.fspath(path))
    session.redirected_to.append({"from": os.fspath(path), "to": target})
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return target


def _install_torch_save(session: DrySession) -> None:
    import torch

    def make(original: Any) -> Any:
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            if session.status == "running" and isinstance(f, (str, os.PathLike)) \
                    and not session.is_scratch(os.fspath(f)):
                f = session_redirect(session, f)
            return original(obj, f, *args, **kwargs)
        return save

    _patch(torch, "save", make)


def _install_transformers(session: DrySession) -> None:
    from transformers import PreTrainedModel, Trainer

    def make_dir_redirect(original: Any) -> Any:
        def save(self: Any, directory: Any = None, *args: Any, **kwargs: Any) -> Any:
            if session.status == "running" and directory is not None:
                directory = session_redirect(session, directory)
            elif session.status == "running" and isinstance(self, Trainer):
                directory = session_redirect(session, self.args.output_dir)
            return original(self, directory, *args, **kwargs)
        return save

    def make_checkpoint(original: Any) -> Any:
        def _save_checkpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
            if session.status != "running":
                return original(self, *args, **kwargs)
            real = self.args.output_dir
            self.args.output_dir = session_redirect(session, real)
            try:
                return original(self, *args, **kwargs)
            finally:
                self.args.output_dir = real
        return _save_checkpoint

    _patch(PreTrainedModel, "save_pretrained", make_dir_redirect)
    _patch(Trainer, "save_model", make_dir_redirect)
    _patch(Trainer, "_save_checkpoint", make_checkpoint)
