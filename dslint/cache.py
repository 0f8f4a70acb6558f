"""Content-hash cache of per-file results, so an unchanged tree is not parsed again.

A file's entry is keyed by its own content and by everything its findings can depend on: dslint's own
code (a fingerprint of the installed sources), the enabled rules and settings, and the project fingerprint
-- the content hashes of every other input of the run that can contribute facts (a helper module, a config,
a launcher script). Editing any of those invalidates the entries of the whole run; editing a file that no
rule can see (triaged out) invalidates only itself. Location: $DSLINT_CACHE_DIR, else ~/.cache/dslint.

Each file is an envelope `{"schema", "dslint", "sha256", "payload"}`: the payload is the entry's JSON text
and `sha256` its digest. An entry is used only when the envelope is whole, its schema and dslint version are
this one's, the digest matches, and the reader's own check of the entry's shape passes (`get(key, valid)`);
anything else -- truncated, flipped bytes, valid JSON of another shape, another version's -- is a miss,
recomputed and written over. A cache can cost time, never a result or a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import dslint

SCHEMA = 1          # of the envelope and the entries; bump when either changes shape


def default_dir() -> Path:
    env = os.environ.get("DSLINT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dslint"


@lru_cache(maxsize=1)
def implementation_fingerprint() -> str:
    """Changes whenever any of dslint's own modules changes (not only on a version bump), and whenever a package
    is installed, upgraded or removed in the interpreter's site-packages: the analysis reads installed packages'
    classes (`program.rank.function_summaries.installed_class`), and installing one renames its `*.dist-info` folder, which
    changes the folder's modification time."""
    h = hashlib.sha256(dslint.__version__.encode())
    root = Path(dslint.__file__).parent
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
    import site

    for folder in sorted({*site.getsitepackages(), site.getusersitepackages()}):
        try:
            h.update(f"{folder}:{os.stat(folder).st_mtime_ns}".encode())
        except OSError:
            pass
    return h.hexdigest()[:16]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ResultCache:
    def __init__(self, directory: Optional[Path], run_key: str):
        self.directory = directory
        self.run_key = run_key

    def _path(self, source_key: str) -> Optional[Path]:
        if self.directory is None:
            return None
        digest = hashlib.sha256(f"{self.run_key}|{source_key}".encode()).hexdigest()
        return self.directory / digest[:2] / f"{digest[2:]}.json"

    def get(self, source_key: str, valid: Optional[Callable[[Any], bool]] = None) -> Optional[dict]:
        """The entry stored under `source_key`, or None: missing, damaged, of another schema or dslint version,
        or rejected by `valid` (the caller's check of its shape; an exception in it counts as a rejection)."""
        path = self._path(source_key)
        if path is None:
            return None
        try:
            envelope = json.loads(path.read_bytes())
            if not (isinstance(envelope, dict) and envelope.get("schema") == SCHEMA
                    and envelope.get("dslint") == dslint.__version__ and isinstance(envelope.get("payload"), str)
                    and envelope.get("sha256") == _digest(envelope["payload"])):
                return None
            entry = json.loads(envelope["payload"])
            if not isinstance(entry, dict) or valid is not None and not valid(entry):
                return None
            return entry
        except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
            return None

    def put(self, source_key: str, entry: dict) -> None:
        path = self._path(source_key)
        if path is None:
            return
        payload = json.dumps(entry, separators=(",", ":"))
        envelope = {"schema": SCHEMA, "dslint": dslint.__version__, "sha256": _digest(payload), "payload": payload}
        write_atomically(path, json.dumps(envelope).encode())


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def write_atomically(path: Path, data: bytes) -> None:
    """Write through a per-process temporary file and a rename, so that a concurrent reader sees the old file
    or the new one; a read-only or full cache never fails the check."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass


def run_key(settings_json: str, codes: list[str], project_fingerprint: str) -> str:
    return hashlib.sha256("|".join([implementation_fingerprint(), settings_json, ",".join(codes),
                                    project_fingerprint]).encode()).hexdigest()
