"""TOML reading on every Python the package admits: `tomllib` from 3.11 on, the `tomli` package (the same
parser, installed for Python < 3.11 by the `tomli; python_version < "3.11"` dependency) before it. Imported
only where a TOML file is read (~15 ms)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from tomllib import TOMLDecodeError, loads
else:                                   # pragma: no cover - exercised by .ci/run's smoke test on 3.10
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
