"""Where a rank is when it issues a collective: innermost nn.Module path, phase, first user source line.

Module paths come from global forward pre/post hooks (one dict lookup and a list push/pop per module call);
names are resolved relative to the outermost model the rank calls, with DeepSpeed's engine wrapper and
DDP-style ``.module`` wrappers stripped, so paths read like ``model.layers.1.mlp.deepspeed_moe``.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

_LIBRARY_ROOTS = tuple(
    os.path.realpath(p) + os.sep
    for p in {
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # dslint itself
        *[p for p in sys.path if p.endswith(("site-packages", "dist-packages"))],
    }
)


_USER_ROOTS: list[str] = []  # the launched script's folder and the working folder (``set_user_roots``)
_DIST_PACKAGES: set[str] | None = None  # top-level package names that installed distributions provide
_DIR_IS_LIBRARY: dict[str, bool] = {}


def set_user_roots(*folders: str) -> None:
    """Code under these folders is the user's even where an installed distribution provides its package (a
    project installed in editable mode and launched from its checkout)."""
    _USER_ROOTS[:] = [os.path.realpath(f) + os.sep for f in folders if f]
    _DIR_IS_LIBRARY.clear()


def _dist_packages() -> set[str]:
    global _DIST_PACKAGES
    if _DIST_PACKAGES is None:
        try:
            from importlib.metadata import packages_distributions

            _DIST_PACKAGES = set(packages_distributions())
        except Exception:  # noqa: BLE001 - a broken metadata folder: only the path rule applies
            _DIST_PACKAGES = set()
    return _DIST_PACKAGES


def _in_installed_package(path: str) -> bool:
    """Is ``path`` (a real path) inside a package that an installed distribution provides, outside the user's
    folders? Such code is a library wherever it lies: a ``pip install --target`` folder on PYTHONPATH, an
    editable install of DeepSpeed from its checkout, a cluster's shared software folder. The package's top
    folder is the outermost one holding ``__init__.py``; its name is looked up in the installed distributions'
    top-level packages (``importlib.metadata``), read once."""
    folder = os.path.dirname(path)
    known = _DIR_IS_LIBRARY.get(folder)
    if known is not None:
        return known
    top, current = None, folder
    while os.path.isfile(os.path.join(current, "__init__.py")):
        top, parent = current, os.path.dirname(current)
        if parent == current:
            break
        current = parent
    found = top is not None and not (top + os.sep).startswith(tuple(_USER_ROOTS)) \
        and os.path.basename(top) in _dist_packages()
    if len(_DIR_IS_LIBRARY) < 8192:
        _DIR_IS_LIBRARY[folder] = found
    return found


def is_library_file(filename: str) -> bool:
    """Is the source file ``filename`` a library's (the stdlib, site-packages, dslint, an installed package
    elsewhere) rather than the user's own code?"""
    if filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return path.startswith(_LIBRARY_ROOTS) or _in_installed_package(path)


class ExecutionContext:
    """Per-process tracking of the module stack, the phase and the most recent gradient."""

    def __init__(self) -> None:
        self.module_names: dict[int, str] = {}
        self.stack: list[Any] = []
        self.phase_stack: list[str] = []
        self.last_grad_param: str | None = None
        # gradient-reduction attribution: the parameters of the bucket being reduced (set around ZeRO's bucket
        # reductions and the engine's allreduce_bucket), else the parameters whose gradients arrived since the
        # previous gradient collective (autograd hooks, an ordered set bounded by the parameter count)
        self.reducing: list[list[str]] = []
        self.grads_since_reduce: dict[str, None] = {}
        self.param_root: str | None = None  # the name of the model the parameter names are relative to
        self._user_code: dict[Any, bool] = {}
        self._hook_handles: list[Any] = []
        self.roots: list[Any] = []  # outermost models seen called (MoE layers and parameters live there)

    # ---- module paths -------------------------------------------------------------------------------
    def install(self) -> None:
        from torch.nn.modules import module as nn_module

        self._hook_handles.append(nn_module.register_module_forward_pre_hook(self._enter_module))
        self._hook_handles.append(nn_module.register_module_forward_hook(self._leave_module, always_call=True))

    def uninstall(self) -> None:
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles.clear()

    def name_model(self, root: Any, prefix: str = "") -> None:
        """Register names for every submodule of ``root`` (wrappers with a lone ``module`` child stripped)."""
        wrapper_chain = [root]
        while True:
            children = dict(root.named_children())
            if list(children) == ["module"]:
                root = children["module"]
                wrapper_chain.append(root)
            else:
                break
        for wrapper in wrapper_chain[:-1]:
            self.module_names.setdefault(id(wrapper), prefix or type(wrapper).__name__)
        for name, module in root.named_modules():
            full = f"{prefix}.{name}" if prefix and name else (name or prefix or type(root).__name__)
            self.module_names[id(module)] = full

    def _enter_module(self, module: Any, args: Any) -> None:
        if id(module) not in self.module_names:
            if self.stack:
                parent = self.module_names.get(id(self.stack[-1]), "?")
                self.module_names[id(module)] = f"{parent}.<{type(module).__name__}>"
            else:
                self.name_model(module)
                self.roots.append(module)
        self.stack.append(module)

    def _leave_module(self, module: Any, args: Any, output: Any) -> None:
        # always_call: pops also when forward raised; tolerate mismatched nesting
        stack = self.stack
        while stack:
            if stack.pop() is module:
                break

    def module_path(self) -> str | None:
        if self.stack:
            return self.module_names.get(id(self.stack[-1]))
        if self.reducing:
            return self.owner(self.reducing[-1])
        if self.phase() == "backward" and self.grads_since_reduce:
            return self.owner(list(self.grads_since_reduce))
        if self.phase() == "backward" and self.last_grad_param:
            return self.last_grad_param.rpartition(".")[0] or self.last_grad_param
        return None

    # ---- gradient reductions ------------------------------------------------------------------------
    def grad_arrived(self, name: str) -> None:
        self.last_grad_param = name
        self.grads_since_reduce[name] = None

    def gradient_params(self) -> tuple[list[str], str] | None:
        """The parameters a gradient collective issued now reduces, and how that is known: ``"bucket"`` (the
        reduced bucket's contents) or ``"autograd"`` (gradients that arrived since the previous gradient
        collective, consumed by this call). None outside gradient reductions."""
        if self.reducing:
            return self.reducing[-1], "bucket"
        if self.grads_since_reduce and not self.stack and self.phase() in ("backward", "step"):
            names = list(self.grads_since_reduce)
            self.grads_since_reduce.clear()
            return names, "autograd"
        return None

    def owner(self, params: list[str]) -> str | None:
        """The innermost module that owns all of ``params`` (the model itself when they span its children)."""
        if not params:
            return None
        parts = [name.split(".")[:-1] for name in params]
        common = parts[0]
        for other in parts[1:]:
            n = 0
            while n < min(len(common), len(other)) and common[n] == other[n]:
                n += 1
            common = common[:n]
        return ".".join(common) or self.param_root

    # ---- phase --------------------------------------------------------------------------------------
    def push_phase(self, phase: str) -> None:
        self.phase_stack.append(phase)

    def pop_phase(self) -> None:
        if self.phase_stack:
            self.phase_stack.pop()

    def phase(self) -> str:
        if self.phase_stack:
            return self.phase_stack[-1]
        return "forward" if self.stack else "other"

    # ---- user source line ---------------------------------------------------------------------------
    def user_frames(self, skip: int = 2, limit: int = 6, frame: Any = None) -> list[tuple[str, int, str, str]]:
        """(file, line, function, callee) of up to ``limit`` frames outside the stdlib, site-packages and dslint,
        innermost first: the first is where the collective came from, the outer ones say why it ran. ``callee``
        is the library function the frame called into ("" when it called user code or nothing), e.g.
        ``transformers/generation/utils.py:generate``: what a frame is doing, observed rather than guessed from
        names. ``frame``: start there (another thread's frame) instead of this call's caller."""
        frame = frame if frame is not None else sys._getframe(skip)
        known = self._user_code
        found: list[tuple[str, int, str, str]] = []
        run: list[Any] = []  # library code objects since the last user frame, innermost first
        while frame is not None and len(found) < limit:
            code = frame.f_code
            is_user = known.get(code)
            if is_user is None:
                is_user = not is_library_file(code.co_filename)
                known[code] = is_user
            if is_user:
                callee = ""
                outer_first = [c for c in reversed(run) if _DSLINT_ROOT not in c.co_filename]
                if outer_first:  # the library function called; a `generate` behind a decorator's wrapper counts
                    pick = next((c for c in outer_first[:4] if c.co_name == "generate"), outer_first[0])
                    callee = f"{_short_path(pick.co_filename)}:{pick.co_name}"
                found.append((code.co_filename, frame.f_lineno, code.co_name, callee))
                run = []
            else:
                run.append(code)
            frame = frame.f_back
        return found


def is_library_code(code: Any) -> bool:
    """Is ``code`` (a code object) outside the user's own code: the stdlib, site-packages or dslint?"""
    return is_library_file(code.co_filename)


_DSLINT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _short_path(path: str) -> str:
    """``.../site-packages/transformers/generation/utils.py`` -> ``transformers/generation/utils.py``."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return os.path.basename(path)
