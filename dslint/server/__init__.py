"""`dslint server`: a Language Server Protocol server (stdio) over the engine `dslint check` uses.

`workspace` is the analysis (folders, settings, the engine's re-check of edited buffers) and imports no LSP
library; `lsp` is the protocol front end on pygls, imported only by `serve` (the optional `server` extra:
`pip install 'dslint[server]'`), so `dslint check` never imports pygls. docs/editors.md: client set-ups.
"""

from __future__ import annotations

import sys


def serve(no_cache: bool = False) -> int:
    """Run the server on stdin/stdout until the client asks it to exit; 2 when pygls is missing. `no_cache`:
    neither read nor write the result cache nor the compiled-code cache (as `check --no-cache`)."""
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(f"dslint: error: `dslint server` needs pygls ({exc.name} is not installed): "
                         "pip install 'dslint[server]'\n")
        return 2
    from dslint.server.lsp import serve as run
    return run(no_cache)
