"""Compiled code of the methods that `dataclasses` generates, kept across runs like `__pycache__`.

`@dataclass` writes the source of `__init__`, `__repr__`, `__eq__`, ... for every class it decorates and
compiles it with `exec` when the class is created. libcst's node classes are ~200 frozen dataclasses, and
that compilation is most of `import libcst` (about 0.17 s of 0.25 s on the 2-core machine), which is
itself most of a single-script `dslint check`. Python's own bytecode cache never sees that code, so this
module keeps it: while installed, the `exec` that `dataclasses` calls compiles each generated source once
and the code object is kept in a `marshal` file keyed by the exact source text, under the same cache
directory as the results and per interpreter build (`sys.implementation.cache_tag` and `sys.hexversion`,
as `.pyc` files are). A source text already seen gets its stored code object, compiled from exactly that
text with exactly these flags, so the classes are the ones a plain `exec` would build.

Nothing else changes: other callers of `exec` are untouched (the name is set in the `dataclasses` module's
own namespace, which it looks up before the builtins), an unreadable or foreign file is ignored, and a
read-only or full cache directory only costs the compilation. `DSLINT_NO_CODE_CACHE=1` turns it off.

**Integrity before anything is unmarshalled**: `marshal.loads` of damaged bytes can crash the interpreter
or build a code object that crashes when run, so the file is `MAGIC`, the SHA-256 of `build_tag()` (the
interpreter build, marshal format and dslint version) followed by the marshalled bytes, then those bytes.
A file whose digest does not match -- flipped bits, a truncated write, another build's or another dslint
version's -- is never passed to `marshal`; it is ignored and written over at exit. The digest proves that
the bytes are the ones a dslint of this build wrote; like `__pycache__`, it does not defend against someone
who can write to the user's cache folder (who could as well edit the installed packages). What the cache
buys, and why it stays: docs/architecture.md ("Caches").
"""

from __future__ import annotations

import atexit
import builtins
import hashlib
import marshal
import os
import sys
from pathlib import Path
from typing import Optional

# libcst and dslint need about 1,000 entries (0.9 MB); the cap keeps a process that builds dataclasses from
# generated definitions from growing the file without bound
MAX_ENTRIES = 5000

_installed: Optional[Path] = None
stats = {"hits": 0, "compiled": 0}     # of this process, for tests and benchmarks


MAGIC = b"dslint-code-cache 2\n"


def cache_file(directory: Path) -> Path:
    return directory / "code" / f"dataclasses-{sys.implementation.cache_tag}-{sys.hexversion:x}.marshal"


def build_tag() -> bytes:
    """What a code object's validity depends on besides its source text: the interpreter build and the
    marshal format (and dslint's version, so that an upgrade starts afresh)."""
    from dslint import __version__
    return (f"{sys.implementation.name}|{sys.implementation.cache_tag}|{sys.hexversion:x}|{sys.version}|"
            f"marshal {marshal.version}|dslint {__version__}").encode()


def _seal(body: bytes) -> bytes:
    return MAGIC + hashlib.sha256(build_tag() + body).digest() + body


def _unseal(data: bytes) -> Optional[bytes]:
    """The marshalled bytes of a sealed file, or None when the file is not one this build wrote, whole."""
    head = len(MAGIC)
    if not data.startswith(MAGIC) or len(data) < head + 32:
        return None
    digest, body = data[head:head + 32], data[head + 32:]
    return body if hashlib.sha256(build_tag() + body).digest() == digest else None


def _load(path: Path) -> dict:
    try:
        body = _unseal(path.read_bytes())
        if body is None:            # never unmarshal bytes that are not provably this build's own
            return {}
        memo = marshal.loads(body)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(memo, dict):
        return {}
    code_type = type(_load.__code__)
    return {k: v for k, v in memo.items() if type(k) is str and type(v) is code_type}


def _save(path: Path, memo: dict, owner: int) -> None:
    if os.getpid() != owner:        # a forked worker that exits through Python leaves it to the parent
        return
    try:
        data = marshal.dumps(memo)
    except ValueError:              # an unmarshallable constant: keep the file as it is
        return
    from dslint.cache import write_atomically
    write_atomically(path, _seal(data))


def install(directory: Optional[Path]) -> bool:
    """Route `dataclasses`' compilation through the cache in `directory`; True when installed."""
    global _installed
    if directory is None or os.environ.get("DSLINT_NO_CODE_CACHE") == "1":
        return False
    if _installed is not None:
        return True
    import dataclasses
    if "exec" in vars(dataclasses):   # someone else's hook: leave it alone
        return False
    path = cache_file(directory)
    memo = _load(path)
    added = [0]
    plain_exec = builtins.exec

    def cached_exec(source, globals=None, locals=None, /):
        if type(source) is str:
            code = memo.get(source)
            if code is not None:
                stats["hits"] += 1
            else:
                stats["compiled"] += 1
                # dont_inherit: the flags of the code calling exec (dataclasses has no __future__ imports),
                # not this module's `annotations`
                code = compile(source, "<string>", "exec", dont_inherit=True)
                if len(memo) < MAX_ENTRIES:
                    memo[source] = code
                    added[0] += 1
            source = code
        return plain_exec(source, globals, locals)

    dataclasses.exec = cached_exec
    owner = os.getpid()
    atexit.register(lambda: added[0] and _save(path, memo, owner))
    _installed = path
    return True
