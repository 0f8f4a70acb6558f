"""Content-hash cache of per-file results, so an unchanged tree is not parsed again.

A file's entry is keyed by its own content and by everything its findings can depend on: dslint's own
code (a fingerprint of the installed sources), the enabled rules and settings, and the project fingerprint
-- the content hashes of every other input of the run that can contribute facts (a helper module, a config,
a launcher script). Editing any of those invalidates the entries of the whole run; editing a file that no
rule can see (triaged out) invalidates only itself. Location: $DSLINT_CACHE_DIR, else ~/.cache/dslint.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

import dslint


def default_dir() -> Path:
    env = os.environ.get("DSLINT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dslint"


@lru_cache(maxsize=1)
def implementation_fingerprint() -> str:
    """Changes whenever any of dslint's own modules changes (not only on a version bump)."""
    h = hashlib.sha256(dslint.__version__.encode())
    root = Path(dslint.__file__).parent
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
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

    def get(self, source_key: str) -> Optional[dict]:
        path = self._path(source_key)
        if path is None:
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, source_key: str, entry: dict) -> None:
        path = self._path(source_key)
        if path is None:
            return
        write_atomically(path, json.dumps(entry).encode())


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
