"""Inputs of a check run: Python scripts, DeepSpeed JSON configs and launcher shell scripts.

Each kind is read once; a file that cannot be read or parsed becomes a `ParseProblem` (reported as
DSL001 by the engine) and the run goes on with the other files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Union

from dslint.sources.astsplice import common_prefix, common_suffix, compile_ast, physical_lines
from dslint.sources.guard import check as guard_check
from dslint.sources.jsonpos import JsonPositionError, PositionedJson, Span, load_positioned
from dslint.sources.wordsearch import alternation

Kind = Literal["python", "json", "shell", "markdown"]

_CALL_PATTERNS: dict[frozenset, "re.Pattern"] = {}


def _word_char(c: str) -> bool:
    """A word character (`\\w`, as `re` has it for text)."""
    return c.isalnum() or c == "_"

SHELL_SUFFIXES = {".sh", ".bash", ".zsh", ".slurm", ".sbatch"}
MARKDOWN_SUFFIXES = {".md", ".markdown", ".ipynb"}       # a notebook: its `!cmd` lines (launcher.notebook_shell)


@dataclass
class ParseProblem:
    message: str
    line: int = 1
    column: int = 1
    template: bool = False     # a config template (placeholders for sed/envsubst): not checked, not reported


# What a config template puts where a JSON value belongs: `CONFIG_BATCH_SIZE`, `<Specify path>`, `${BS}`, `$BS`,
# `{{ bs }}`, `@BS@`, `__BS__`. `True`/`None` (Python spellings) are no placeholders: those stay DSL001.
_PLACEHOLDER = re.compile(r"[A-Z_]*[A-Z][A-Z0-9_]*\b(?![a-z])|<[^<>\n]{1,80}>|\$\{?[A-Za-z_]\w*\}?|\{\{|@\w+@|__\w+__")


# What a Python file means to the program model (its outline, its facts) is built by `dslint.program`, which
# installs the builders here when it is imported: a source reads itself (text, trees, the complexity guard),
# it never imports the program model. `PythonSource.outline`/`.facts` are the memos of those readers.
_READERS: dict[str, Callable[["PythonSource"], Any]] = {}


def install_reader(name: str, reader: Callable[["PythonSource"], Any]) -> None:
    """`reader(src)` builds `src.<name>` (`outline`, `facts`) on first use; called by `dslint.program`."""
    _READERS[name] = reader


def _read(name: str, src: "PythonSource"):
    reader = _READERS.get(name)
    if reader is None:
        raise RuntimeError(f"PythonSource.{name} is built by the program model: import dslint.program first")
    return reader(src)


@dataclass
class Source:
    path: str          # as shown to the user (relative to the cwd when possible)
    text: str
    kind: Kind = "python"

    @cached_property
    def lines(self) -> list[str]:
        return physical_lines(self.text)      # as findings number them (not str.splitlines: U+2028, \f ...)


MAX_SECOND_OPINION = 300_000      # characters: a file CPython rejects is parsed by libcst only below this size


def parse_module(text: str):
    """libcst's `parse_module` without re-validating every node it builds. Each node's `__post_init__` checks
    the invariants of hand-built trees (parentheses balanced, whitespace where a keyword needs it); the
    parser's own output satisfies them, and the checks cost an eighth of the parse. dslint never builds
    trees for output, so the checks are switched off for the process (`tests/test_positions.py` compares
    the code of every tree parsed so with the file)."""
    import libcst as cst
    from libcst._nodes.base import CSTNode
    import dslint.sources.cstwalk       # noqa: F401  (libcst's node classes' fast type checks)
    current = CSTNode.__dict__.get("__post_init__")
    if current is not _no_validation:
        _VALIDATING.append(current)
        CSTNode.__post_init__ = _no_validation
    return cst.parse_module(text)


def _no_validation(self) -> None:
    pass


_VALIDATING: list = []        # libcst's own __post_init__, kept for the test that compares both parses


def statement_offsets(source):
    """(start offset, end offset, statement) of every top-level statement of `source.module`, memoised on the
    source (a top-level statement's code is exactly its text in the file)."""
    cached = source.__dict__.get("_dslint_fix_pieces")
    if cached is None:
        module = source.module
        offset = sum(len(module.code_for_node(line)) for line in module.header)   # leading comments/blanks
        cached = []
        for stmt in module.body:
            code = module.code_for_node(stmt)
            cached.append((offset, offset + len(code), stmt))
            offset += len(code)
        source.__dict__["_dslint_fix_pieces"] = cached
    return cached


def _indented(stmt) -> bool:
    import libcst as cst
    return isinstance(stmt, cst.BaseCompoundStatement) and isinstance(getattr(stmt, "body", None), cst.IndentedBlock)


def spliced_module(old, text: str):
    """`splice(old, text)`'s tree, or None."""
    done = splice(old, text)
    return None if done is None else done[0]


def splice(old, text: str):
    """(tree, the old top-level statements replaced, the new ones in their place) or None: libcst's tree of
    `text` built from the tree of `old` (a PythonSource whose module has been parsed): the top-level statements
    the change between the two texts touches are parsed again, the others are kept, or None where that could
    differ from parsing `text` whole.

    libcst parses a module statement by statement at indentation level 0, with three facts of the whole file:
    its default indentation (the first indented block's), its newline (the first line ending's) and its
    encoding (a coding line in the first two lines); an `IndentedBlock.indent` or a `Newline.value` is None
    where it equals the default. The changed statements, with an unchanged one on either side, are parsed
    between two `pass` lines (so the comments before them are theirs, as in the file, not a module header,
    and those after them theirs, not a footer), and the result is kept only where those facts are the
    file's: no carriage return anywhere, the first two lines unchanged, the default indentation the one
    `text` would give, the header, the start of the first statement and the footer untouched (the
    change ends before the last statement does), and `pass` + region + `pass` generated back exactly."""
    import libcst as cst
    module = old.module
    before = old.text
    if "\r" in text or "\r" in before or module.default_newline != "\n" or not module.body:
        return None
    head = common_prefix(before, text)
    if head == len(before) == len(text):
        return module, [], [], old.__dict__.get("_dslint_fix_pieces")
    tail = common_suffix(before, text, min(len(before), len(text)) - head)
    second = before.find("\n", before.find("\n") + 1)
    pieces = statement_offsets(old)
    first_start, last_end = pieces[0][0], pieces[-1][1]
    changed_end = len(before) - tail               # the change is before[head:changed_end] in the old text
    if second < 0 or head <= second or head <= first_start or changed_end >= last_end or tail == 0 \
            or module.body[0].leading_lines:
        return None
    # the statements the change touches (both, at a boundary), and one unchanged statement on either side: the
    # region's edges are then lines no edit touched between statements no edit touched, which libcst assigns
    # (to a block's footer or to the next statement's leading lines) as it did in the old text
    i = next(k for k, (a, b, _) in enumerate(pieces) if b >= head)
    j = max(k for k, (a, b, _) in enumerate(pieces) if a <= changed_end)
    i, j = max(0, i - 1), min(len(pieces) - 1, j + 1)
    start, end = pieces[i][0], pieces[j][1] + len(text) - len(before)
    region = text[start:end]
    if not region.endswith("\n"):
        return None
    try:
        sub = parse_module("pass\n" + region + "pass\n")
    except Exception:
        return None
    body = list(sub.body)
    if sub.header or sub.footer or len(body) < 2 or sub.default_newline != "\n" \
            or sub.code_for_node(body[0]) != "pass\n" or sub.code_for_node(body[-1]) != "pass\n":
        return None
    new = body[1:-1]
    # the default indentation of `text`: the first indented block's -- before the region (as in the old
    # file), else in it (as in the sub-module), else after it (as in the old file when the old region had none)
    if any(_indented(s) for s in module.body[:i]):
        indent_known = True
    elif any(_indented(s) for s in new):
        indent_known = True
    else:
        indent_known = not any(_indented(s) for _, _, s in pieces[i:j + 1])
    if not indent_known or sub.default_indent != module.default_indent:
        return None
    # the new text's statement offsets (`statement_offsets`), for a next splice of it (the language server's
    # re-check after every edit): the kept statements' are the old ones, shifted after the region
    delta = len(text) - len(before)
    offsets = list(pieces[:i])
    at = start
    for stmt in new:
        size = len(sub.code_for_node(stmt))
        offsets.append((at, at + size, stmt))
        at += size
    offsets += [(a + delta, b + delta, stmt) for a, b, stmt in pieces[j + 1:]]
    return (module.with_changes(body=[*module.body[:i], *new, *module.body[j + 1:]]), module.body[i:j + 1], new,
            offsets if at == end else None)


@dataclass
class PythonSource(Source):
    module_name: str = ""
    kind: Kind = "python"

    @cached_property
    def outline(self):
        """The file's outline: what the program model reads from CPython's tree (`dslint.program.per_file`)."""
        return _read("outline", self)

    @cached_property
    def too_complex(self):
        """Why no parser may read this file (`dslint.sources.guard`: brackets nested too deep, an operator chain or
        elif chain too long for libcst's native parser, which would take the process down), or None."""
        return guard_check(self.text)

    @property
    def compiles(self) -> bool:
        return self.outline is not None

    def may_call(self, names: frozenset[str], suffix: bool = False) -> bool:
        """Can a call in this file resolve to a callee whose last name is one of `names` (with `suffix`: ends
        in one of them, `…Trainer`)? Such a call is written `name(` / `x.name(` or goes through a name
        imported as one (`import … as alias`); either way the name is in the text. A text test on the
        outline, so that project scans parse only files that pass it."""
        memo = self.__dict__.setdefault("_may_call_memo", {})     # a fact of the text: shared by every view
        hit = memo.get((names, suffix))
        if hit is None:
            hit = memo[(names, suffix)] = self._may_call(names, suffix)
        return hit

    def _may_call(self, names: frozenset[str], suffix: bool) -> bool:
        if not any(n in self.text for n in names):
            return False
        pattern = _CALL_PATTERNS.get(names)
        if pattern is None:
            pattern = _CALL_PATTERNS[names] = re.compile(rf"(?:{alternation(names)})\s*\(")
        text = self.text
        # `(?<!def )(?<!\w)(names)\s*\(` (with `suffix`: `(?<!def )\b\w*(names)\s*\(`), without the regular
        # expression engine testing lookbehinds at every position or backtracking through every identifier: find
        # `name(`, then look at what is before it (with `suffix`, before the identifier it ends)
        for m in pattern.finditer(text):
            start = m.start()
            if suffix:
                while start and _word_char(text[start - 1]):
                    start -= 1
            elif start and _word_char(text[start - 1]):
                continue
            if not text.endswith("def ", 0, start):
                return True
        outline = self.outline
        if outline is None:
            return False
        for alias, value in outline.imports.items():
            last = value.rsplit(".", 1)[-1]
            if (last.endswith(tuple(names)) if suffix else last in names) and \
                    re.search(rf"(?<![\w.]){re.escape(alias)}\s*\(", self.text):
                return True
        return False

    @property
    def package(self) -> str:
        if Path(self.path).name == "__init__.py":
            return self.module_name
        return self.module_name.rpartition(".")[0]

    @cached_property
    def module(self):
        import libcst as cst
        if self.too_complex is not None:       # parse_problem reports it
            return cst.Module(body=[])
        if len(self.text) > MAX_SECOND_OPINION and not self.compiles:
            # CPython rejects it: libcst is asked only for syntax newer than this Python's (a small script);
            # on a big broken file its parse costs a minute (1.2 MB: 70 s, 0.9 GB) to confirm the error
            self.__dict__["_cpython_rejects"] = True
            return cst.Module(body=[])
        base = self.__dict__.pop("_derived_from", None)     # dslint.fixes: the source this text was fixed from
        if base is not None:
            done = splice(base, self.text)
            if done is not None:
                # what the old tree's walks found in the statements kept is carried over (`_parents`, `facts`)
                self.__dict__["_spliced"] = (base.__dict__.get("_parents"), done[1], done[2])
                if done[3] is not None:
                    self.__dict__["_dslint_fix_pieces"] = done[3]
                if base.__dict__.get("_statement_nodes") is not None:
                    self.__dict__["_previous_nodes"] = base.__dict__["_statement_nodes"]
                return done[0]
        try:
            from dslint.timeline import span
            with span(f"libcst parse {self.path}"):
                return parse_module(self.text)
        except (cst.ParserSyntaxError, RecursionError) as exc:
            # compile() accepted what libcst rejects (rare): analyses see an empty module, DSL001 reports it
            self.__dict__["_libcst_error"] = exc
            return cst.Module(body=[])

    @cached_property
    def facts(self):
        """The outline's entries paired with libcst's nodes (`dslint.program.per_file.facts_of`)."""
        return _read("facts", self)

    @cached_property
    def _positions(self):
        from libcst.metadata import MetadataWrapper, PositionProvider
        # unsafe_skip_copy keeps node identity, so positions are resolved only for files that report.
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)

    def span(self, node) -> Span:
        found = self._locate(node)
        if found is not None:
            return found
        found = self._locate_in_statement(node)
        if found is not None:
            return found
        rng = self._positions[node]
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)

    @cached_property
    def _parents(self) -> dict[int, object]:
        """id(node) → its parent node, for every node dslint's walk reaches (built only for files that report a
        node whose text is ambiguous)."""
        from dslint.sources.cstwalk import children
        module = self.module
        spliced = self.__dict__.get("_spliced")
        if spliced is not None:
            # used once: the previous tree's index and statements are not held once this index exists (the key
            # stays: this tree was spliced)
            self.__dict__["_spliced"] = (None, (), ())
        if spliced is not None and spliced[0] is not None:
            # a fixed file's tree spliced from the previous one's (`splice`): the statements kept are the same
            # node objects, whose parents are those of the previous tree; the replaced statements' nodes (still
            # alive in the previous tree, so their ids are not reused) leave, the new ones join, and every
            # child of the module points to this module
            out = dict(spliced[0])
            stack = list(spliced[1])
            while stack:
                n = stack.pop()
                out.pop(id(n), None)
                stack.extend(children(n))
            for kid in children(module):
                out[id(kid)] = module
            stack = list(spliced[2])
        else:
            out = {}
            stack = [module]
        while stack:
            n = stack.pop()
            for kid in children(n):
                out[id(kid)] = n
                stack.append(kid)
        return out

    def _locate_in_statement(self, node) -> Optional[Span]:
        """PositionProvider on the nearest enclosing statement whose own first line is unique in the file (a
        module of that statement alone), placed by the statement's position in the file: the cost of a few
        lines, not of the whole file (or of a 3,000-line class). Each generated line equals its line in the
        file but for the indentation of the blocks around the statement, so columns shift per line by the
        difference in length."""
        import libcst as cst
        parents = self._parents
        at = parents.get(id(node))
        while at is not None and not isinstance(at, cst.Module):
            if isinstance(at, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                found = self._locate_within(at, node)
                if found is not None:
                    return found
            at = parents.get(id(at))
        return None

    def _locate_within(self, stmt, node) -> Optional[Span]:
        cache = self.__dict__.setdefault("_statement_positions", {})
        key = id(stmt)
        if key not in cache:
            start = self._locate(stmt)
            entry = None
            if start is not None:
                from libcst.metadata import MetadataWrapper, PositionProvider
                alone = self.module.with_changes(body=[stmt], header=(), footer=())
                positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
                # `_locate` places a decorated definition at its first decorator, PositionProvider at `def`
                anchor = stmt.decorators[0] if getattr(stmt, "decorators", None) else stmt
                if anchor in positions:
                    shift = start.line - positions[anchor].start.line
                    entry = (shift, positions, alone.code.split("\n"))
            cache[key] = entry
        entry = cache[key]
        if entry is None or node not in entry[1]:
            return None
        shift, positions, generated = entry
        rng = positions[node]

        def place(line: int, column: int) -> Optional[tuple[int, int]]:
            target = line + shift
            if not 1 <= target <= len(self.lines) or line > len(generated):
                return None
            mine, theirs = self.lines[target - 1], generated[line - 1]
            if not mine.endswith(theirs):
                return None
            return target, column + len(mine) - len(theirs) + 1

        begin, end = place(rng.start.line, rng.start.column), place(rng.end.line, rng.end.column)
        if begin is None or end is None:
            return None
        return Span(*begin, *end)

    def _locate(self, node) -> Optional[Span]:
        """Position by text: when the first line of the node's code occurs exactly once in the file, that is
        where the node starts. PositionProvider regenerates the whole module's code for the same answer (over
        a second for a 3,000-line file), so it is kept for the ambiguous rest."""
        import libcst as cst
        header = False
        if isinstance(node, cst.SimpleStatementLine):
            node = node.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())
        elif isinstance(node, cst.BaseCompoundStatement):
            # a compound statement is reported at its header (`for batch in shard:`), comment excluded: only
            # the header is generated (a body of `pass`, no else/except/finally), not a body of 3,000 lines
            body = getattr(node, "body", None)
            if body is None:            # `match`: its header alone is not a statement libcst can print
                return None
            if isinstance(body, cst.IndentedBlock):
                body = body.with_changes(header=cst.TrailingWhitespace(),
                                         body=[cst.SimpleStatementLine(body=[cst.Pass()])])
            changes = {"leading_lines": (), "body": body}
            for name in ("orelse", "finalbody"):
                if getattr(node, name, None) is not None:
                    changes[name] = None
            if getattr(node, "handlers", None):
                changes["handlers"] = ()
            node = node.with_changes(**changes)
            header = True
        try:
            code = self.module.code_for_node(node)
        except Exception:
            return None
        lines = code.rstrip("\n").split("\n")
        if header:
            lines = lines[:1]
        head = lines[0]
        if len(head.strip()) < 8:
            return None
        first = self.text.find(head)
        if first < 0 or self.text.find(head, first + 1) >= 0:
            return None
        if first and (self.text[first - 1].isalnum() or self.text[first - 1] in "_."):
            return None        # inside a longer token (`elif` printed as `if`, `self.model(x)` as `model(x)`)
        line = self.text.count("\n", 0, first) + 1
        column = first - (self.text.rfind("\n", 0, first) + 1) + 1
        if len(lines) == 1:
            return Span(line, column, line, column + len(head))
        # inner lines were generated without the enclosing indentation: find the last one on its line
        end_line = line + len(lines) - 1
        last = lines[-1].lstrip()
        if end_line > len(self.lines) or not last:
            return None
        at = self.lines[end_line - 1].find(last)
        if at < 0 or self.lines[end_line - 1].find(last, at + 1) >= 0:
            return None
        return Span(line, column, end_line, at + len(last) + 1)

    def parse_problem(self) -> Optional[ParseProblem]:
        guard = self.too_complex
        if guard is not None:
            return ParseProblem(f"could not be analysed: {guard.reason}", guard.line, guard.column)
        if "module" not in self.__dict__ and self.compiles:
            # CPython accepts it: libcst parses the file only when an analysis reads its tree. Where libcst
            # rejects what CPython accepts (rare), that shows once the tree is read; the engine asks again
            # after the rules have run and reports it then.
            return None
        if "_problem" not in self.__dict__:       # final once the tree is read: asked by the rule and the engine
            self.__dict__["_problem"] = self._parse_problem()
        return self.__dict__["_problem"]

    def _parse_problem(self) -> Optional[ParseProblem]:
        import libcst as cst
        try:
            self.module
            exc = self.__dict__.get("_libcst_error")
            if exc is not None:
                raise exc
            if self.__dict__.get("_cpython_rejects"):
                raise cst.ParserSyntaxError("invalid syntax", lines=[""], raw_line=1, raw_column=0)
        except cst.ParserSyntaxError as exc:
            # CPython's own parser places syntax errors more precisely than libcst's; ask it on failure only
            try:
                compile_ast(self.text, self.path)
            except SyntaxError as syn:
                return ParseProblem(f"Python syntax error: {syn.msg}", syn.lineno or 1, syn.offset or 1)
            except (ValueError, RecursionError, MemoryError):
                pass
            return ParseProblem(f"Python syntax error: {exc.message}", exc.raw_line, exc.raw_column + 1)
        except RecursionError:
            return ParseProblem("Python source nests too deeply to parse")
        return None


@dataclass
class JsonSource(Source):
    kind: Kind = "json"

    @cached_property
    def parsed(self) -> PositionedJson:
        """JSON, else the Hjson DeepSpeed reads a config file with (comments, trailing commas, …: see
        dslint.sources.jsonpos) -- unless the file is a template (placeholders where strict JSON fails)."""
        try:
            return load_positioned(self.text, hjson=False)
        except JsonPositionError as strict:
            if strict.fatal or self._is_template(strict.line, strict.column):
                raise
            try:
                return load_positioned(self.text, hjson=True)
            except JsonPositionError as exc:
                raise exc if exc.fatal else strict from None

    @property
    def data(self) -> Any:
        return self.parsed.value

    def span_of(self, path) -> Span:
        return self.parsed.span(tuple(path))

    def parse_problem(self) -> Optional[ParseProblem]:
        try:
            parsed = self.parsed
        except JsonPositionError as exc:
            if exc.fatal:
                return ParseProblem(f"cannot read the config: {exc.message}", exc.line, exc.column)
            return ParseProblem(f"invalid JSON (and not the Hjson DeepSpeed reads configs with): {exc.message}",
                                exc.line, exc.column, template=self._is_template(exc.line, exc.column))
        if not isinstance(parsed.value, dict):
            return ParseProblem(f"a DeepSpeed config must be a JSON object, found {type(parsed.value).__name__}")
        return None


    def _is_template(self, line: int, column: int) -> bool:
        """A JSON that does not parse is a config template when it fails at a placeholder (or one sits just
        before: `{{ bs }}`), when its name says so (`ds_config_TEMPLATE.json`), or when a shell script beside it
        rewrites it with `sed`. Such a file becomes a config only after the substitution."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            at = max(0, column - 2)
            if any(_PLACEHOLDER.match(text, i) for i in (column - 1, at)):
                return True
        name = Path(self.path).name
        if re.search(r"templ|tmpl", name, re.IGNORECASE):
            return True
        try:
            siblings = list(Path(self.path).parent.glob("*.sh"))[:50]
            return any(name in t and re.search(r"\bsed\b", t) for t in (p.read_text(errors="replace") for p in siblings))
        except OSError:
            return False


@dataclass
class ShellSource(Source):
    kind: Kind = "shell"

    @cached_property
    def launches(self):
        from dslint.sources.launcher import parse_launches
        return parse_launches(self.text)

    @cached_property
    def python_runs(self):
        """Its plain `python x.py` commands (`launcher.python_run`): each starts the script as one process."""
        from dslint.sources.launcher import read_python_runs
        return read_python_runs(self.text)

    def parse_problem(self) -> Optional[ParseProblem]:
        from dslint.sources.launcher import LauncherParseError
        try:
            self.launches
        except LauncherParseError as exc:
            return ParseProblem(f"shell syntax error: {exc.message}", exc.line, exc.column)
        return None


@dataclass
class MarkdownSource(ShellSource):
    """A Markdown file (a README) read for the launcher lines of its fenced shell blocks (```bash, ```sh,
    ```shell, ```console, or untagged): they tell how its scripts are run (`deepspeed --include localhost:0
    serve/cli.py`) as a launcher script does. A Jupyter notebook is read the same way, for the `!cmd` lines
    and `%%bash` cells of its code cells (`!accelerate launch --num_processes=1 train.py`), and a Cog
    configuration (`cog.yaml`) for the file it runs in one process (`predict: "predict.py:Predictor"`). No rule checks the file itself: a snippet is no script (no
    DSL001 for a fragment, no DSL502 for two commands shown side by side)."""

    kind: Kind = "markdown"

    @property
    def python_runs(self):
        return []       # a README's `python x.py` is an example, not how the project runs it

    @cached_property
    def launches(self):
        from dslint.sources.launcher import markdown_launches
        if is_cog_config(self.path):
            from dslint.sources.launcher import cog_launches
            return cog_launches(self.text)
        return markdown_launches(self.text, notebook=is_notebook(self.path, self.text))

    def parse_problem(self) -> Optional[ParseProblem]:
        return None


AnySource = Union[PythonSource, JsonSource, ShellSource]


def is_notebook(path: str, text: str = "") -> bool:
    """A Jupyter notebook (`.ipynb`), or a Databricks notebook export read as one (`make_source`)."""
    from dslint.sources.launcher import DATABRICKS_HEADER
    return str(path).lower().endswith(".ipynb") or str(path).endswith(".py") and text.startswith(DATABRICKS_HEADER)


def is_cog_config(path: str) -> bool:
    """A Cog configuration (`cog.yaml`, the name Cog reads): read for the program it runs (one process)."""
    return str(path).replace("\\", "/").rsplit("/", 1)[-1] == "cog.yaml"

_DS_CONFIG_HINT = re.compile(         # a key, quoted as JSON or bare as Hjson allows
    r'(?:"|\'|^[ \t]*|[{,][ \t]*)(train_batch_size|train_micro_batch_size_per_gpu|gradient_accumulation_steps|'
    r'zero_optimization|fp16|bf16|zero_allow_untested_optimizer|steps_per_print|gradient_clipping|deepspeed)'
    r'(?:"|\'|[ \t]*:)', re.MULTILINE)


DS_TOP_KEYS = _DS_TOP_KEYS = frozenset({"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                          "zero_optimization", "fp16", "bf16", "zero_allow_untested_optimizer", "steps_per_print",
                          "gradient_clipping", "wall_clock_breakdown", "activation_checkpointing"})


def looks_like_deepspeed_config(text: str) -> bool:
    """A walked JSON file is read when DeepSpeed's own keys sit at its top level (a test's reference data with a
    nested `"bf16"` is not one), or when a top-level `"deepspeed"` entry names a JSON file (an HF arguments file
    naming the DeepSpeed config TrainingArguments hands over); a file that does not parse keeps the benefit of
    the doubt (DSL001 tells what is wrong with it). What each file read is -- a DeepSpeed config or not -- is
    decided by its use in the run (dslint.program.json_kinds)."""
    import json
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):     # Hjson, a template, or broken: DSL001 or the config rules tell
        return True
    if not isinstance(data, dict):
        return False
    named = data.get("deepspeed")
    return any(k in _DS_TOP_KEYS and (k not in ("fp16", "bf16") or isinstance(v, dict)) for k, v in data.items()) \
        or (isinstance(named, str) and named.endswith(".json"))


def kind_of(path: Path, explicit: bool, head: str = "") -> Optional[Kind]:
    """Which reader a path needs. Explicit arguments are taken at their word; walked files by suffix,
    JSON only when it looks like a DeepSpeed config (a repo has package.json, tsconfig.json, …)."""
    suffix = path.suffix.lower()
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix == ".json":
        return "json" if explicit or _DS_CONFIG_HINT.search(head) else None
    if suffix in SHELL_SUFFIXES:
        return "shell"
    if suffix in MARKDOWN_SUFFIXES or path.name == "cog.yaml":
        return "markdown"
    if explicit and head.startswith("#!") and re.match(r"#!.*\b(ba|z|da)?sh\b", head):
        return "shell"
    return None


def module_name_for(path: Path) -> str:
    """Dotted module name: walk up while the folder is a package (has __init__.py)."""
    parts = [path.stem] if path.stem != "__init__" else []
    parent = path.parent
    while (parent / "__init__.py").exists() and parent != parent.parent:
        parts.insert(0, parent.name)
        parent = parent.parent
    return ".".join(parts)


def make_source(path: Path, shown: str, kind: Kind, text: str) -> AnySource:
    if kind == "python":
        from dslint.sources.launcher import is_databricks_shell_notebook
        if is_databricks_shell_notebook(text):
            return MarkdownSource(shown, text)      # a notebook export with `!cmd` lines: read as a notebook
        return PythonSource(shown, text, module_name=module_name_for(path))
    if kind == "json":
        return JsonSource(shown, text)
    if kind == "markdown":
        return MarkdownSource(shown, text)
    return ShellSource(shown, text)


def decode(data: bytes, kind: str = "python") -> tuple[Optional[str], Optional[ParseProblem]]:
    """A file's text. Python sources are decoded as CPython reads them (PEP 263: a UTF-8 BOM, else a
    `# -*- coding: latin-1 -*-` line among the first two, else UTF-8); configs and shell scripts as UTF-8."""
    encoding = "utf-8"
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif kind == "python" and b"coding" in _first_two_lines(data):
        import tokenize
        lines = iter(_first_two_lines(data).splitlines(keepends=True))
        try:
            encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
        except SyntaxError as exc:      # an unknown encoding, or one the file's bytes contradict
            return None, ParseProblem(f"cannot decode the file: {exc}", 1, 1)
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        what = "valid UTF-8" if encoding == "utf-8" else f"valid {encoding} (its coding declaration)"
        return None, ParseProblem(f"file is not {what} ({exc.reason} at byte {exc.start})", line, column)


def _first_two_lines(data: bytes) -> bytes:
    end = data.find(b"\n")
    if end >= 0:
        end = data.find(b"\n", end + 1)
    return data if end < 0 else data[:end + 1]
