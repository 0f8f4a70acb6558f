"""Stage 1 of a check (`dslint.pipeline`): the inputs. The paths given are walked (`dslint.sources.inputs.collect`:
files by kind, skipped folders, ignores), each file is read once (`read_sources`: text, kind, what could not be
decoded), and a re-check of fixed texts (`dslint check --fix`) starts from the previous check's sources
(`carry_over`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from dslint import progress

from dslint.config import Settings
from dslint.sources import AnySource, PythonSource
from dslint.sources.inputs import Inputs, collect, read_sources
from dslint.timeline import span


def read_inputs(paths: list[Path], settings: Settings, sniff_json: bool, previous: Optional[list] = None,
                overrides: Optional[dict[str, str]] = None, walked: Optional[Callable[[Path], bool]] = None
                ) -> tuple[Inputs, list[AnySource], list]:
    """(what was collected, the sources, the files that could not be decoded: (shown path, kind, problem)).
    `overrides`: shown path -> text to check instead of the file's, starting from `previous` (the sources of
    the check before). `walked`: which files found by walking a folder are read (dslint.changed: the files git
    tracks); every one when None."""
    progress.current.phase("reading files")
    with span("collect and read inputs"):
        inputs = collect(paths, settings)
        if walked is not None:
            inputs.files = [(p, explicit) for p, explicit in inputs.files if explicit or walked(p)]
        sources, undecodable = read_sources(inputs, sniff_json, settings.max_file_size)
    if overrides is not None:
        sources = carry_over(previous or [], sources, overrides)
    return inputs, sources, undecodable


# per-source memos that hold what other files of a view gave (keyed by their ids): dropped when a source is
# carried into the next run, whose files are other objects (and may reuse those ids)
VIEW_MEMOS = ("_dslint_pyconfig",)


def carry_over(previous: list, sources: list[AnySource], overrides: dict[str, str]) -> list[AnySource]:
    """The sources of a re-check (dslint.fixes: a fix round's texts in place of the files): a file whose text
    is the one the previous run checked is that run's source (its parses, outline, facts and the other
    facts of its text kept, the memos of `VIEW_MEMOS` dropped); a Python file whose text changed is a new
    source that builds its libcst tree from the previous one's, parsing only the top-level statements the
    change touches (`sources.spliced_module`, which falls back to a whole parse where that could differ)."""
    from dataclasses import fields, replace
    before = {(s.path, s.kind): s for s in previous}
    out = []
    for src in sources:
        text = overrides.get(src.path, src.text)
        old = before.get((src.path, src.kind))
        if old is not None and type(old) is type(src) and old.text == text and all(
                getattr(old, f.name) == getattr(src, f.name) for f in fields(src) if f.name != "text"):
            for name in VIEW_MEMOS:
                old.__dict__.pop(name, None)
            out.append(old)
            continue
        if text is not src.text:
            src = replace(src, text=text)
        if isinstance(src, PythonSource) and isinstance(old, PythonSource) and "module" in old.__dict__ \
                and old.too_complex is None and not {"_libcst_error", "_cpython_rejects"} & old.__dict__.keys():
            src.__dict__["_derived_from"] = old
        out.append(src)
    return out
