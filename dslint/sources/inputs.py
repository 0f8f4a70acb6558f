"""Which files a run reads, and how: nothing is read before its type, size and first bytes are known.

- **Collecting** (`collect`): a walked file is considered by its name first (`.py`/`.pyi`, `.json`, shell
  suffixes); only then is it `lstat`ed, and only regular files are kept. A FIFO, socket or device is skipped
  with a message (reading a FIFO blocks forever, `/dev/zero` never ends); so is a symbolic link that leads
  out of the walked folder, to a special file, nowhere, or round in a loop; folders that cannot be listed
  and names that are not valid UTF-8 too. A path named on the command line is followed where it links to.
- **Reading** (`read_sources`): the file is opened without blocking, checked again on the open descriptor
  (a regular file, within the size limit of its kind: `--max-file-size`, else `DEFAULT_LIMITS`), its first
  `SNIFF_BYTES` read and looked at (a NUL byte: binary, skipped; a walked JSON without DeepSpeed keys: not a
  config, skipped), and only then the rest. A 1 GiB checkpoint is never read in full.
- **Decoding**: Python sources by PEP 263 (a BOM or a `coding:` line, else UTF-8), as CPython reads them;
  configs and shell scripts as UTF-8.

Each problem is one `InputError` of kind "unreadable" whose message starts with "skipped: " (a line
`path: skipped: …` on stderr); the run goes on with the other files and the exit code is not changed by it.
A path named on the command line that does not exist or links nowhere is a "missing-path" error (exit 2).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from dslint.config import Settings, real_dir, real_path, relative_to
from dslint.findings import InputError
from dslint.sources.launcher import cog_launches, markdown_mentions_launcher
from dslint.sources import MARKDOWN_SUFFIXES, SHELL_SUFFIXES, AnySource, ParseProblem, decode, kind_of, looks_like_deepspeed_config, make_source

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "env", ".tox", ".nox", "node_modules",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".dslint_cache", "build", "dist", "site-packages",
             ".eggs"}

MIB = 1 << 20
# Python: what dslint analyses per file (dslint.sources.guard: the largest real modules are ~1.4 MB; a 5 MB
# file costs libcst ~3 GB); small for configs (DeepSpeed's are ~1 kB). `--max-file-size` sets them all, and a
# Python file within it is analysed whatever its size: one limit, never a skipped file turned into DSL001.
DEFAULT_LIMITS = {"python": 2 * MIB, "shell": 2 * MIB, "json": 1 * MIB, "markdown": 1 * MIB}
SNIFF_BYTES = 8192
CANDIDATE_SUFFIXES = frozenset({".py", ".pyi", ".json"}) | frozenset(SHELL_SUFFIXES) | frozenset(MARKDOWN_SUFFIXES)

_KIND_NAMES = {"python": "Python sources", "json": "JSON configs", "shell": "shell scripts",
               "markdown": "Markdown files (and notebooks, cog.yaml)"}


@dataclass
class Inputs:
    files: list[tuple[Path, bool]] = field(default_factory=list)   # (path, given explicitly)
    errors: list[InputError] = field(default_factory=list)


def printable(path) -> str:
    """A path as text that any output can encode: bytes of a name that is not UTF-8 as `\\xff`."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")


def shown_path(path: Path) -> str:
    return relative_to(path, os.getcwd()) or path.as_posix()


def _skipped(path, message: str) -> InputError:
    return InputError(kind="unreadable", path=printable(shown_path(Path(path))), message=f"skipped: {message}")


def _special(mode: int) -> Optional[str]:
    """What a file that is neither regular nor a folder is, in words; None for a regular file or folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _link_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "broken symbolic link (its target does not exist)"
    return f"symbolic link cannot be followed: {exc.strerror or exc}"


def _not_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def collect(paths: Iterable[Path], settings: Settings) -> Inputs:
    out = Inputs()
    seen: set[str] = set()

    real_dir.cache_clear()      # folders resolved afresh per run (a link may have changed)

    def add(path: Path, explicit: bool) -> None:
        key = real_path(path)
        if key not in seen:
            seen.add(key)
            out.files.append((path, explicit))

    for path in paths:
        if _not_utf8(os.fspath(path)):
            # a name no output format can carry (findings name their file): said once, not checked
            out.errors.append(_skipped(path, "file name is not valid UTF-8"))
            continue
        try:
            st = os.lstat(path)
        except OSError as exc:
            missing = exc.errno in (errno.ENOENT, errno.ENOTDIR)
            out.errors.append(InputError(kind="missing-path", path=printable(path), message="no such file or directory"
                                         if missing else (exc.strerror or str(exc))))
            continue
        if stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(path)
            except OSError as exc:
                out.errors.append(InputError(kind="missing-path", path=printable(path), message=_link_problem(exc)))
                continue
        if stat.S_ISDIR(st.st_mode):
            _walk(path, settings, add, out.errors)
        elif stat.S_ISREG(st.st_mode):
            add(path, True)
        else:
            out.errors.append(_skipped(path, f"{_special(st.st_mode)}, not a regular file"))
    return out


def _walk(root: Path, settings: Settings, add, errors: list[InputError]) -> None:
    patterns = settings.excludes_below(root)
    top = os.path.realpath(root)

    def unlistable(exc: OSError) -> None:
        errors.append(_skipped(exc.filename or root, f"folder cannot be read: {exc.strerror or exc}"))

    for folder, dirs, names in os.walk(root, onerror=unlistable):
        kept = []
        for d in sorted(dirs):
            if d in SKIP_DIRS or d.endswith(".egg-info") or settings.excluded(Path(folder, d), patterns):
                continue
            if _not_utf8(d):
                errors.append(_skipped(Path(folder, d), "folder name is not valid UTF-8"))
                continue
            kept.append(d)
        dirs[:] = kept              # links to folders are listed here and, as os.walk does, not followed
        for name in sorted(names):
            if os.path.splitext(name)[1].lower() not in CANDIDATE_SUFFIXES and name != "cog.yaml":
                continue            # never read: not even looked at
            child = Path(folder, name)
            if settings.excluded(child, patterns):
                continue
            if _not_utf8(name):
                errors.append(_skipped(child, "file name is not valid UTF-8"))
                continue
            try:
                st = os.lstat(child)
            except OSError as exc:   # removed while walking
                errors.append(_skipped(child, exc.strerror or str(exc)))
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    st = os.stat(child)
                except OSError as exc:
                    errors.append(_skipped(child, _link_problem(exc)))
                    continue
                what = _special(st.st_mode)
                if what is not None or not stat.S_ISREG(st.st_mode):
                    errors.append(_skipped(child, f"symbolic link to {what or 'a folder'}, not a regular file"))
                    continue
                target = os.path.realpath(child)
                if not (target + os.sep).startswith(top.rstrip(os.sep) + os.sep):
                    errors.append(_skipped(child, f"symbolic link leads outside {printable(root)} (to "
                                                  f"{printable(target)})"))
                    continue
            elif not stat.S_ISREG(st.st_mode):
                errors.append(_skipped(child, f"{_special(st.st_mode)}, not a regular file"))
                continue
            add(child, False)


# A template engine's placeholder or tag (Jinja, cookiecutter): `{{ name }}`, `{% if … %}`, `{# … #}`
_TEMPLATE_TAG = re.compile(r"\{\{[^{}\n]*\}\}|\{%.*?%\}|\{#.*?#\}")


def not_python(path: Path, shown: str, text: str) -> Optional[str]:
    """Why a `.py` file is no Python anyone runs as it is, in words; None when it is Python.

    - A **template** (cookiecutter, Jinja): a component of its path holds a `{{ … }}` placeholder (the
      file is named only once the template is expanded), or CPython's syntax error sits on a template tag
      (`{% if … %}`, `{{ name }}`). A syntax error anywhere else is the user's: DSL001.
    - A **symbolic link checked out as text** (git writes a link as a file holding its target where links
      cannot be made, `core.symlinks=false`): the whole text is one relative path that names an existing
      file from the file's folder. That file, when under the checked paths, is checked itself."""
    for part in Path(shown).parts:
        m = re.search(r"\{\{[^{}]*\}\}", part)
        if m is not None:
            return f"a template, not Python (its path holds the placeholder `{m.group(0)}`)"
    stripped = text.strip()
    if stripped and "\n" not in stripped and len(stripped) < 4096 and not stripped.startswith(("/", "#")) \
            and not any(c.isspace() for c in stripped) and ("/" in stripped or stripped.endswith(".py")):
        try:
            target = (path.parent / stripped)
            if target.is_file() and os.path.realpath(target) != os.path.realpath(path):
                return (f"holds only the path `{stripped}` (a symbolic link checked out as a text file), "
                        "not Python")
        except (OSError, ValueError):
            pass
    if _TEMPLATE_TAG.search(text) is None:
        return None
    from dslint.sources.astsplice import compile_ast
    try:
        compile_ast(text, shown)
        return None
    except SyntaxError as exc:
        line, offset = exc.lineno or 0, (exc.offset or 1) - 1
    except (ValueError, RecursionError, MemoryError):
        return None
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    for m in _TEMPLATE_TAG.finditer(lines[line - 1]):
        if m.start() <= offset <= m.end():      # on the tag, or at the text it runs into (`{{ name }}_MAP = …`)
            return f"a template, not Python (line {line} holds the template tag `{m.group(0)[:60]}`)"
    return None


def limits_for(max_file_size: Optional[int]) -> dict[str, int]:
    return dict(DEFAULT_LIMITS) if max_file_size is None else {k: max_file_size for k in DEFAULT_LIMITS}


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"


def _too_big(path: Path, size: int, kind: str, limits: dict[str, int]) -> InputError:
    return _skipped(path, f"{_size(size)} is over the {_size(limits[kind])} limit for {_KIND_NAMES[kind]} "
                          "(--max-file-size)")


def _read_rest(fd: int, head: bytes, size: int, limit: int) -> bytes:
    parts = [head]
    total = len(head)
    while total <= limit:
        chunk = os.read(fd, max(65536, size - total + 1))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def _read_head(fd: int) -> bytes:
    parts, total = [], 0
    while total < SNIFF_BYTES:
        chunk = os.read(fd, SNIFF_BYTES - total)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def read_sources(inputs: Inputs, sniff_json: bool = False, max_file_size: Optional[int] = None
                 ) -> tuple[list[AnySource], list[tuple[str, str, ParseProblem]]]:
    """Sources to check, and files that could not even be decoded (path, kind, problem)."""
    limits = limits_for(max_file_size)
    sources: list[AnySource] = []
    undecodable: list[tuple[str, str, ParseProblem]] = []
    for path, explicit in inputs.files:
        taken_at_word = explicit and not (sniff_json and path.suffix.lower() == ".json")
        by_name = kind_of(path, True)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        except OSError as exc:
            inputs.errors.append(_skipped(path, f"cannot be read: {exc.strerror or exc}"))
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):         # swapped for something else since it was collected
                inputs.errors.append(_skipped(path, f"{_special(st.st_mode)}, not a regular file"))
                continue
            if by_name is not None and st.st_size > limits[by_name]:
                if by_name != "markdown" or explicit:      # a walked README too long to be read: no news
                    inputs.errors.append(_too_big(path, st.st_size, by_name, limits))
                continue
            head = _read_head(fd)
            if b"\0" in head:
                if explicit and not sniff_json or by_name == "python":
                    inputs.errors.append(_skipped(path, "binary content (a NUL byte in its first "
                                                        f"{len(head)} bytes)"))
                continue
            kind = kind_of(path, taken_at_word, head[:4096].decode("utf-8", "replace"))
            if kind is None:
                if explicit and not sniff_json:
                    inputs.errors.append(InputError(kind="unreadable", path=printable(path),
                                                    message="not a Python, JSON or shell file; skipped"))
                continue
            if st.st_size > limits[kind]:            # a shell script named without a suffix
                inputs.errors.append(_too_big(path, st.st_size, kind, limits))
                continue
            data = _read_rest(fd, head, st.st_size, limits[kind])
            if len(data) > limits[kind]:            # grew while being read
                inputs.errors.append(_skipped(path, f"over the {_size(limits[kind])} limit for "
                                                    f"{_KIND_NAMES[kind]} (--max-file-size)"))
                continue
        except OSError as exc:
            inputs.errors.append(_skipped(path, f"cannot be read: {exc.strerror or exc}"))
            continue
        finally:
            os.close(fd)
        text, problem = decode(data, kind)
        if kind == "json" and problem is None and not taken_at_word and not looks_like_deepspeed_config(text):
            continue
        if kind == "markdown" and not taken_at_word and (problem is not None or (
                not cog_launches(text) if path.name == "cog.yaml" else
                not markdown_mentions_launcher(text, notebook=path.suffix.lower() == ".ipynb"))):
            continue                # walked documentation without a launcher line: nothing to read
        if problem is not None:
            undecodable.append((printable(shown_path(path)), kind, problem))
            continue
        if kind == "python":
            why = not_python(path, shown_path(path), text)
            if why is not None:
                inputs.errors.append(_skipped(path, why))
                continue
        sources.append(make_source(path, shown_path(path), kind, text))
    return sources, undecodable
