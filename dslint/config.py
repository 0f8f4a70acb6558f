"""`[tool.dslint]` in pyproject.toml, discovered from the checked paths upward, merged with the CLI."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dslint.findings import Severity


class ConfigFileError(ValueError):
    pass


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    select: list[str] = Field(default_factory=list)
    ignore: list[str] = Field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = Field(default_factory=dict, alias="per-file-ignores")
    world_size: Optional[int] = Field(default=None, alias="world-size", ge=1)
    fail_level: Severity = Field(default=Severity.WARNING, alias="fail-level")
    exclude: list[str] = Field(default_factory=list)
    deepspeed_version: Optional[str] = Field(default=None, alias="deepspeed-version")
    root: Path = Field(default_factory=Path.cwd, exclude=True)

    @field_validator("select", "ignore")
    @classmethod
    def _upper(cls, codes: list[str]) -> list[str]:
        return [c.strip().upper() for c in codes if c.strip()]

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
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return Path(path).as_posix()


def find_pyproject(paths: list[Path]) -> Optional[Path]:
    start = paths[0] if paths else Path.cwd()
    start = start.resolve()
    for folder in [start if start.is_dir() else start.parent, *(start if start.is_dir() else start.parent).parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text())
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
                continue
            if "dslint" in data.get("tool", {}):
                return candidate
    return None


def load_settings(config_file: Optional[Path], paths: list[Path]) -> Settings:
    """Settings from an explicit file, else the nearest pyproject.toml with [tool.dslint], else defaults."""
    path = config_file or find_pyproject(paths)
    if path is None:
        return Settings()
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("dslint", data if path.suffix == ".toml" and "tool" not in data else {})
    try:
        settings = Settings.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigFileError(f"{path}: [tool.dslint] {where}: {first['msg']}") from None
    settings.root = path.parent
    return settings
