import atexit
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


_SHARED_CODE: list[str] = []


def _fresh_cache_dir() -> str:
    """A result cache of its own per run (the caller removes it); the compiled dataclass code
    (dslint.codecache) is shared by every run of the session, as an installed dslint's is
    (tests/test_codecache.py covers a run without it), and removed when the session ends."""
    import tempfile
    if not _SHARED_CODE:
        _SHARED_CODE.append(tempfile.mkdtemp(prefix="dslint-test-code-"))
        atexit.register(shutil.rmtree, _SHARED_CODE[0], True)
    cache = tempfile.mkdtemp(prefix="dslint-test-cache-")
    os.symlink(_SHARED_CODE[0], os.path.join(cache, "code"))
    return cache


def run_dslint(*args: str, cwd: Path | None = None, timeout: float = 60, env: dict | None = None):
    """Run the real CLI in a fresh process (what a user or CI gets), with a result cache of its own."""
    cache = _fresh_cache_dir()
    full_env = {**os.environ, "NO_COLOR": "1", "DSLINT_CACHE_DIR": cache, **(env or {})}
    full_env.pop("FORCE_COLOR", None)
    try:
        return subprocess.run([sys.executable, "-m", "dslint", *args], cwd=cwd or REPO, capture_output=True,
                              text=True, timeout=timeout, env=full_env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def dslint_cli():
    return run_dslint
