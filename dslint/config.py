"""`[tool.dslint]` in pyproject.toml, discovered from the checked paths upward, merged with the CLI."""

from __future__ import annotations

import copy
import fnmatch
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

from dslint.findings import Severity, dump_json


class ConfigFileError(ValueError):
    pass


class SettingsError(ValueError):
    """A `[tool.dslint]` value of the wrong shape; `where` is the dotted key path as written in TOML."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


def _strings(where: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise SettingsError(where, f"expected a list of strings, got {_kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise SettingsError(f"{where}.{i}", f"expected a string, got {_kind(item)}")
    return list(value)


def _codes(where: str, value: Any) -> list[str]:
    return [c.strip().upper() for c in _strings(where, value) if c.strip()]


def _per_file(where: str, value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise SettingsError(where, f"expected a table of pattern = [codes], got {_kind(value)}")
    out = {}
    for pattern, codes in value.items():
        if not isinstance(pattern, str):
            raise SettingsError(f"{where}.{pattern}", "expected a string pattern")
        out[pattern] = _strings(f"{where}.{pattern}", codes)
    return out


def _world_size(where: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    number = value
    if isinstance(value, str) and value.strip().isdigit():      # "8" was accepted before (pydantic lax mode)
        number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if not isinstance(number, int) or isinstance(number, bool):
        raise SettingsError(where, f"expected an integer, got {_kind(value)}")
    if number < 1:
        raise SettingsError(where, f"must be at least 1, got {number}")
    return number


def _converted(convert: Callable[[Any], Any], expected: Callable[[Any], str]) -> Callable[[str, Any], Any]:
    """A check that converts the value, reporting `expected(value)` where the conversion fails."""
    def check(where: str, value: Any) -> Any:
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise SettingsError(where, expected(value)) from None
    return check


_fail_level = _converted(Severity, lambda v: f"expected 'warning' or 'error', got {v!r}")
_path = _converted(Path, lambda v: f"expected a path, got {_kind(v)}")


def parse_size(text) -> int:
    """`10M`, `512k`, `1G`, `2MiB`, `1000000` → bytes (powers of 1024). ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        number, unit = text, ""
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", str(text))
        if not m:
            raise ValueError(f"expected a size such as 10M, 512k or 1000000, got {text!r}")
        number, unit = int(m.group(1)), m.group(2).lower()
    size = number << {"": 0, "k": 10, "m": 20, "g": 30}[unit]
    if size < 1:
        raise ValueError(f"a size must be at least 1 byte, got {text!r}")
    return size


def _max_file_size(where: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise SettingsError(where, str(exc)) from None


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(where, f"expected true or false, got {_kind(value)}")
    return value


def _optional_str(where: str, value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise SettingsError(where, f"expected a string, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__) + f" ({value!r})"


# field -> (TOML key, check and normalise, default factory); the order is the one of the cache-key JSON
_FIELDS: dict[str, tuple[str, Callable[[str, Any], Any], Callable[[], Any]]] = {
    "select": ("select", _codes, list),
    "ignore": ("ignore", _codes, list),
    "per_file_ignores": ("per-file-ignores", _per_file, dict),
    "world_size": ("world-size", _world_size, lambda: None),
    "fail_level": ("fail-level", _fail_level, lambda: Severity.WARNING),
    "exclude": ("exclude", _strings, list),
    "deepspeed_version": ("deepspeed-version", _optional_str, lambda: None),
    "max_file_size": ("max-file-size", _max_file_size, lambda: None),
    # findings whose evidence is incomplete (issue 30: `Finding.proven`) are reported too, marked as such
    "show_unproven": ("show-unproven", _flag, lambda: False),
    "root": ("root", _path, Path.cwd),
}
_BY_KEY = {key: name for name, (key, _, _) in _FIELDS.items()} | {name: name for name in _FIELDS}
_NOT_DUMPED = {"root", "max_file_size", "show_unproven"}
# a checkout moved elsewhere keeps its result cache; the size limit decides which files are read, not what they
# hold; the cache keeps every finding, proven or not, and the report leaves out the unproven ones


class Settings:
    """Keywords by field name (`per_file_ignores`) or TOML key (`per-file-ignores`); unknown ones are an error.
    Values are checked and normalised when the settings are built, not when assigned afterwards."""

    __slots__ = tuple(_FIELDS)

    select: list[str]
    ignore: list[str]
    per_file_ignores: dict[str, list[str]]
    world_size: Optional[int]
    fail_level: Severity
    exclude: list[str]
    deepspeed_version: Optional[str]
    max_file_size: Optional[int]
    show_unproven: bool
    root: Path

    def __init__(self, **values: Any) -> None:
        given: dict[str, Any] = {}
        for key, value in values.items():
            name = _BY_KEY.get(key)
            if name is None:
                raise SettingsError(key, "unknown setting (known: " + ", ".join(
                    k for k, _, _ in _FIELDS.values() if k != "root") + ")")
            if name not in given or key != name:          # the TOML spelling wins over the field name
                given[name] = (key, value)
        for name, (key, check, default) in _FIELDS.items():
            if name in given:
                where, value = given[name]
                setattr(self, name, check(where, value))
            else:
                setattr(self, name, default())

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> "Settings":
        if not isinstance(data, dict):
            raise SettingsError("tool.dslint", f"expected a table, got {_kind(data)}")
        return cls(**data)

    def model_copy(self, *, update: Optional[dict[str, Any]] = None, deep: bool = False) -> "Settings":
        """A shallow (or deep) copy with `update` assigned as given (not checked), as pydantic's."""
        out = copy.deepcopy(self) if deep else copy.copy(self)
        for key, value in (update or {}).items():
            name = _BY_KEY.get(key)
            if name is None:
                raise SettingsError(key, "unknown setting")
            setattr(out, name, value)
        return out

    def model_dump(self, *, mode: str = "python", exclude: Optional[set[str]] = None) -> dict[str, Any]:
        out = {}
        for name in _FIELDS:
            if name in _NOT_DUMPED or exclude and name in exclude:
                continue
            value = getattr(self, name)
            if mode == "json":
                value = value.value if isinstance(value, Severity) else value
            out[name] = copy.deepcopy(value) if isinstance(value, (list, dict)) else value
        return out

    def model_dump_json(self, *, exclude: Optional[set[str]] = None) -> str:
        """Compact JSON by field name, `root` never included: the result cache keys on it (dslint/pipeline/run_cache.py)."""
        return dump_json(self.model_dump(mode="json", exclude=exclude))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _FIELDS)

    __hash__ = None        # mutable, as the pydantic model was

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _FIELDS) + ")"

    def code_enabled(self, code: str) -> bool:
        def matches(patterns: list[str]) -> bool:
            return any(code.startswith(p) or p == "ALL" for p in patterns)
        if self.select and not matches(self.select):
            return False
        return not matches(self.ignore)

    def ignored_for(self, path: str) -> set[str]:
        rel = self.relative(path)
        out: set[str] = set()
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(Path(rel).name, pattern):
                out.update(c.upper() for c in codes)
        return out

    def excluded(self, path: Path, patterns: Optional[list[str]] = None) -> bool:
        rel = self.relative(str(path))
        parts = Path(rel).parts
        for pattern in self.exclude if patterns is None else patterns:
            pattern = pattern.rstrip("/")
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + "/*") \
                    or any(fnmatch.fnmatch(p, pattern) for p in parts):
                return True
        return False

    def excludes_below(self, root: Path) -> list[str]:
        """Patterns that apply inside an explicitly given folder: a folder the user names is checked even
        when an exclude pattern covers it (as ruff does); only patterns for things inside it still apply."""
        return [p for p in self.exclude if not self.excluded(root, [p])]

    def relative(self, path: str) -> str:
        return relative_to(path, str(self.root)) or Path(path).as_posix()


def relative_to(path, base: str) -> Optional[str]:
    """`Path(path).resolve().relative_to(Path(base).resolve())` in POSIX form, or None when it is not below."""
    real, root = real_path(path), real_dir(base).rstrip(os.sep)
    if real == root or real == root + os.sep:
        return "."
    if real.startswith(root + os.sep):
        return Path(real[len(root) + 1:]).as_posix()
    return None


@lru_cache(maxsize=8192)
def real_dir(folder: str) -> str:
    """`os.path.realpath` of a folder, remembered: a tree's files share few folders (cleared by `collect`)."""
    return os.path.realpath(folder)


def real_path(path) -> str:
    """`Path(path).resolve()` as a string, with the folder part remembered (`real_dir`): resolving every
    component of every file's path again was 0.6 s of a 750-file run. A link itself, or a `..`, takes the
    full resolution."""
    text = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(text))
    if not name or ".." in Path(text).parts or os.path.islink(text):
        return os.path.realpath(text)
    return os.path.join(real_dir(folder), name)


def find_pyproject(paths: list[Path]) -> Optional[Path]:
    """The nearest pyproject.toml above the first path that has a `[tool.dslint]` table. One that mentions
    dslint but is not valid TOML is returned too: `load_settings` reports it (a usage error), rather than
    running with its settings silently ignored."""
    start = paths[0] if paths else Path.cwd()
    try:
        start = start.resolve()
        folders = [start if start.is_dir() else start.parent, *(start if start.is_dir() else start.parent).parents]
    except (OSError, RuntimeError):        # a link loop: collect() reports the path itself
        return None
    for folder in folders:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "dslint" not in text:        # no [tool.dslint]: not worth importing the TOML parser (~15 ms)
                continue
            from dslint import toml
            try:
                data = toml.loads(text)
            except toml.TOMLDecodeError:
                if re.search(r"^\s*\[\s*tool\s*\.\s*dslint\b|^\s*\[\s*tool\s*\]|dslint\s*=", text, re.M):
                    return candidate
                continue
            if "dslint" in data.get("tool", {}):
                return candidate
    return None


def load_settings(config_file: Optional[Path], paths: list[Path]) -> Settings:
    """Settings from an explicit file, else the nearest pyproject.toml with [tool.dslint], else defaults."""
    path = config_file or find_pyproject(paths)
    if path is None:
        return Settings()
    from dslint import toml
    try:
        data = toml.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigFileError(f"{path}: is a folder, not a TOML file") from None
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path}: invalid TOML: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except toml.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("dslint", {}) if isinstance(tool, dict) else {}
    if "tool" not in data and path.suffix == ".toml" and path.name != "pyproject.toml":
        table = data
    try:
        settings = Settings.model_validate(table)
    except SettingsError as exc:
        raise ConfigFileError(f"{path}: [tool.dslint] {exc.where}: {exc.what}") from None
    settings.root = path.parent
    return settings
