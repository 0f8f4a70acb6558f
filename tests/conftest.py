import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_dslint(*args: str, cwd: Path | None = None, timeout: float = 60, env: dict | None = None):
    """Run the real CLI in a fresh process (what a user or CI gets), with a cache of its own."""
    import tempfile
    cache = tempfile.mkdtemp(prefix="dslint-test-cache-")
    full_env = {**os.environ, "NO_COLOR": "1", "DSLINT_CACHE_DIR": cache, **(env or {})}
    full_env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "dslint", *args], cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


@pytest.fixture
def dslint_cli():
    return run_dslint
