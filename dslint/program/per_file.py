"""What the program model reads from one Python file: its outline (CPython's tree, `dslint.program.outline`, with
the per-file part of the model facts, `dslint.program.models.modules.file_model_facts`) and its facts (the
outline's entries paired with libcst's nodes, `dslint.program.facts`).

A `PythonSource` knows how to read itself (its text, its libcst tree, the complexity guard's verdict); what the
file means to the program model is built here. `dslint.program` installs these builders as the source's
`outline` and `facts` readers (`dslint.sources.install_reader`), so that `src.outline` / `src.facts` stay
memos on the source (forked outline workers hand them back as `src.__dict__` entries) while `dslint.sources`
never imports the program model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dslint.program.facts import KINDS, FileFacts, file_facts
from dslint.program.models.modules import file_model_facts
from dslint.program.outline import MODULE_SCOPE, Outline, build_outline, builds_engine, parse_tree
from dslint.sources.astsplice import spliced_ast
from dslint.sources.cstwalk import statement_nodes
import dslint.sources.guard as guard
from dslint.sources.guard import check

if TYPE_CHECKING:
    import ast

    from dslint.sources import PythonSource


def outline_of(src: "PythonSource") -> Optional[Outline]:
    """Functions, classes and imports from CPython's parser (about 10x cheaper than libcst); None when CPython
    rejects the file, or when no parser may read it (`src.too_complex`)."""
    tree = None
    base = src.__dict__.get("_derived_from")       # dslint.fixes: the source this text was fixed from
    if base is not None and "too_complex" not in src.__dict__ and len(src.text) <= guard.MAX_SOURCE_CHARS \
            and base.__dict__.get("too_complex", False) is None:
        # its CPython tree, where the previous check still holds it (the role scopes of a file the role
        # analysis read): only the statements the change touches are parsed again (`astsplice`), after
        # the complexity guard passed them; the guard's measures restart at every top-level statement, and
        # those kept were within its limits (the previous text passed it whole), so this text passes too
        tree = spliced_ast(cpython_tree(base), base.text, src.text, src.path, guard=check)
        if tree is not None:
            src.__dict__["too_complex"] = None
    if src.too_complex is not None:
        return None
    if tree is not None and base.__dict__.get("_role_scopes") is not None:
        # the role scopes of the functions this tree keeps are those the previous text's walk found
        # (`roles._Collector`)
        src.__dict__["_previous_scopes"] = base.__dict__["_role_scopes"]
    if tree is None:
        tree = parse_tree(src.text, src.path)
    if tree is None:
        return None
    out = build_outline(tree, src.package)
    # the model facts' per-file part reads this same tree: CPython parses each file once per run (and the
    # outline workers of a big run build it in parallel)
    out.model_classes, out.freezing, out.returned_constructions = file_model_facts(tree, src.text, src.path, out)
    if builds_engine(out) or "_previous_scopes" in src.__dict__:
        # the role analysis reads every file that builds an engine (`RoleAnalysis._load`): it takes this
        # tree instead of parsing the text again (kept only for those files, and only until then); and a
        # fixed text of a file it read (its previous scopes are reused for the nodes this tree kept)
        src.__dict__["_ast_tree"] = tree
    return out


def cpython_tree(src: "PythonSource") -> Optional["ast.Module"]:
    """CPython's tree of the source's text where the source still holds it (kept for the role analysis, or held
    by its role scopes), else None. Read-only: it may be shared with the trees of fixed texts."""
    tree = src.__dict__.get("_ast_tree")
    if tree is None:
        scopes = src.__dict__.get("_role_scopes")
        module = scopes.scopes.get(MODULE_SCOPE) if scopes is not None else None
        tree = module.node if module is not None else None
    return tree


def facts_of(src: "PythonSource") -> FileFacts:
    """The outline's names, scopes and calls paired with the libcst nodes (`dslint.program.facts.file_facts`).
    Empty where no tree was read (the module is the empty stand-in: DSL001 reports why), and where CPython
    rejects what libcst reads (syntax newer than the running Python): without an outline there is no model of
    the file's names, as for the whole-project indexes."""
    module = src.module
    outline = src.outline
    if outline is None or src.too_complex is not None or \
            {"_libcst_error", "_cpython_rejects"} & src.__dict__.keys():
        return FileFacts()
    # the node walk per top-level statement, kept for a fixed text's tree (`splice`), which takes again what
    # it found under the statements kept
    found, src.__dict__["_statement_nodes"] = statement_nodes(module, KINDS,
                                                              src.__dict__.pop("_previous_nodes", None))
    return file_facts(module, outline, found)
