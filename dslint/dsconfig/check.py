"""One pass over a parsed DeepSpeed config, judged at one DeepSpeed release (`table.release_for`: the release the
project pins): the keys each section of that release accepts, deprecated and removed keys, and value errors
from the models built from the generated table — as `Problem`s addressed by JSON path, for the DSL4xx rules.

`"auto"` values are taken out before validation, as DeepSpeed's own models do (`DeepSpeedConfigModel`
drops them) and as the HF integration does (it fills them in); `auto_paths` lists them for DSL408.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from pydantic import ValidationError

from dslint.dsconfig import knowledge, table
from dslint.dsconfig.base import Section, extra_of, field_for, keys_of, section_type

JsonPath = tuple[Union[str, int], ...]
Kind = Literal["unknown", "deprecated", "removed", "invalid"]

# "auto" values DeepSpeed itself understands (no HF integration needed)
NATIVE_AUTO = {("data_types", "keep_in_fp32_modules"), ("pipeline", "stages"),
               ("zero_optimization", "zenflow", "select_strategy"),
               ("zero_optimization", "zenflow", "select_interval"),
               ("zero_optimization", "zenflow", "update_interval")}


@dataclass
class Problem:
    kind: Kind
    path: JsonPath
    message: str
    deepspeed_fails: bool = False          # `deepspeed.initialize` raises (vs silently ignores/warns)
    suggestion: Optional[str] = None
    # what a fix may do (dslint.fixes): the key's one sibling of a did-you-mean; the one valid value implied
    rename: Optional[str] = None
    value: Any = None
    has_value: bool = False


@dataclass
class Analysis:
    problems: list[Problem] = field(default_factory=list)
    auto_paths: list[JsonPath] = field(default_factory=list)
    release: str = ""                       # the DeepSpeed release of the table the config was judged at
    version: Optional[str] = None           # the project's DeepSpeed version it was asked for
    # the version predates the table's oldest release (`release`): the problems are that release's, not the
    # version's own (an older DeepSpeed's schema is not in the table), and each message says so
    predates: bool = False

    def of(self, kind: Kind) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]


def where(path: JsonPath) -> str:
    return ".".join(str(p) for p in path) if path else "the top level"


def _in(path: JsonPath) -> str:
    return f"in `{where(path)}`" if path else "at the top level"


def suggest(key: str, model: type[Section]) -> Optional[str]:
    valid = keys_of(model)
    lower = {k.lower(): k for k in valid}
    if key.lower() in lower:
        return lower[key.lower()]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.8)
    return close[0] if close else None


def unique_suggestion(key: str, model: type[Section]) -> Optional[str]:
    """The did-you-mean of `key` when it is the only candidate (a case-only difference, or the one close match)."""
    valid = keys_of(model)
    lower = [k for k in valid if k.lower() == key.lower()]
    if lower:
        return lower[0] if len(lower) == 1 else None
    close = difflib.get_close_matches(key, valid, n=2, cutoff=0.8)
    return close[0] if len(close) == 1 else None


def _stem(key: str, model: type[Section]) -> Optional[str]:
    """A key of the section with a suffix added (`autotuning_config` for `autotuning`)."""
    stem = [k for k in keys_of(model) if len(k) >= 6 and key.startswith(k + "_")]
    return stem[0] if len(stem) == 1 else None


def _dotted_home(key: str, section: JsonPath, release: str) -> bool:
    """`zero_optimization.reduce_bucket_size`: a dotted path to a real key (Accelerate's notation)."""
    parts = key.split(".")
    if len(parts) < 2:
        return False
    for i, part in enumerate(parts):
        entry = table.key_in(release, tuple(section) + tuple(parts[:i]), part)
        if entry is None or entry.get("removed") or (i < len(parts) - 1 and not entry.get("section")):
            return False
    return True


def _history(key: str, path: JsonPath, release: str) -> str:
    """`; DeepSpeed 0.13.2–0.14.3 read it, 0.19.5 does not` for a key other releases of the table read."""
    ranges = table.key_history(path[:-1], key)
    if not ranges:
        return ""
    return f"; DeepSpeed {table.ranges_text(ranges)} read it, {release} does not"


def _unknown(key: str, path: JsonPath, model: type[Section], release: str) -> Problem:
    fails = model.deepspeed_rejects_unknown
    effect = ("`deepspeed.initialize` fails on it (this section forbids extra keys)" if fails
              else "DeepSpeed ignores it silently, so the setting is not applied")
    effect += _history(key, path, release)
    if not fails:
        later = table.first_rejecting(path[:-1], key, release)
        if later:
            effect += f"; from DeepSpeed {later} on, `deepspeed.initialize` fails on it"
    guess = suggest(key, model)
    hint = ""
    dotted = _dotted_home(key, path[:-1], release)
    if dotted:
        head, _, rest = key.partition(".")
        return Problem("unknown", path, f"unknown key `{key}` {_in(path[:-1])}: {effect}; DeepSpeed does not "
                       f"expand dotted keys (Accelerate's config processing does): nest it as `{head}` → "
                       f"`{rest}`", fails, key)
    if guess:
        hint = f"; did you mean `{guess}`?"
        if unique_suggestion(key, model) == guess:
            problem = Problem("unknown", path, f"unknown key `{key}` {_in(path[:-1])}: {effect}{hint}", fails,
                              guess, rename=guess)
            return problem
    else:
        homes = [h for h in table.key_homes(release).get(key, []) if h != ".".join(str(p) for p in path[:-1])]
        if homes:
            hint = f"; `{key}` belongs in `{homes[0] or 'the top level'}`"
            guess = f"{homes[0]}.{key}" if homes[0] else key
        elif _stem(key, model):
            guess = _stem(key, model)
            hint = f"; did you mean `{guess}`?"
    return Problem("unknown", path, f"unknown key `{key}` {_in(path[:-1])}: {effect}{hint}", fails, guess)


def _walk(node: dict, model: type[Section], path: JsonPath, out: Analysis, clean: dict) -> None:
    for key, value in dict.items(node):
        child = path + (key,)
        found = field_for(model, key)
        if found is None:
            replaced = knowledge.REPLACED.get((path, key))
            if replaced is not None and field_for(model, replaced) is not None:
                out.problems.append(Problem("deprecated", child, f"`{where(child)}` is deprecated: use "
                                            f"`{replaced}` instead (DeepSpeed {out.release} no longer reads "
                                            f"`{key}`)", False, replaced))
                clean.pop(key, None)
                continue
            if getattr(model, "open_section", False):
                continue
            out.problems.append(_unknown(key, child, model, out.release))
            clean.pop(key, None)
            continue
        name, info = found
        extra = extra_of(info)
        replaced = knowledge.REPLACED.get((path, key))
        if replaced is not None and field_for(model, replaced) is not None and not extra.get("removed"):
            extra = {**extra, "deprecated": True, "new_param": replaced}
        if extra.get("removed"):
            out.problems.append(Problem("removed", child, f"`{where(child)}` is no longer supported: "
                                        f"{extra['removed']}", True))
            clean.pop(key, None)
            continue
        if extra.get("deprecated"):
            out.problems.append(Problem("deprecated", child, f"`{where(child)}` is deprecated: use "
                                        f"`{extra['new_param']}` instead", False, extra["new_param"]))
        sub = section_type(info)
        if sub is not None and isinstance(value, dict) and isinstance(clean.get(key), dict):
            _walk(value, sub, child, out, clean[key])


def _is_unknown(value: Any) -> bool:
    """A value of a config built in Python that dslint cannot know (`dslint.sources.literals.UNKNOWN`)."""
    return getattr(type(value), "_dslint_unknown", False)


def _strip_auto(node: Any, path: JsonPath, out: Analysis) -> Any:
    """A copy of `node` without "auto" values, recording where they were (and without unknown values)."""
    if isinstance(node, dict):
        copy = {}
        for key, value in dict.items(node):
            child = path + (key,)
            if _is_unknown(value):
                continue
            if isinstance(value, str) and value == "auto":
                if child not in NATIVE_AUTO:
                    out.auto_paths.append(child)
                    continue
            copy[key] = _strip_auto(value, child, out)
        return copy
    if isinstance(node, list):
        return [_strip_auto(v, path + (i,), out) for i, v in enumerate(node)]
    return node


def data_path(data: Any, loc: tuple, model: type[Section]) -> JsonPath:
    """Map a pydantic error location (field names or aliases, union tags) onto the JSON path."""
    path: list = []
    node: Any = data
    current: Optional[type[Section]] = model
    for elem in loc:
        if isinstance(node, dict):
            key = elem if elem in node else None
            if key is None and current is not None and isinstance(elem, str):
                found = field_for(current, elem)
                if found:
                    alias = found[1].alias
                    key = alias if alias in node else (found[0] if found[0] in node else None)
            if key is None:
                continue
            found = field_for(current, key) if current is not None else None
            current = section_type(found[1]) if found else None
            path.append(key)
            node = node[key]
        elif isinstance(node, list) and isinstance(elem, int) and 0 <= elem < len(node):
            path.append(elem)
            node = node[elem]
    return tuple(path)


def analyse(data: dict, partial: bool = False, version: Optional[str] = None) -> Analysis:
    """The problems of one config at the DeepSpeed `version` the project uses (None: unknown, judged at the
    newest release of the table). `partial`: a config built in Python (`dslint.program.pyconfig.PartialDict`):
    unknown values are left out of the validation and a value error is kept only where everything it
    depends on is known; the whole dict is DeepSpeed's (no embedded-framework heuristic)."""
    release = table.release_for(version)
    root = table.root_model(release, table.dict_paths(data))
    out = Analysis(release=release, version=version)
    clean = _strip_auto(data, (), out)
    zero = data.get("zero_optimization")
    if isinstance(zero, bool):
        out.problems.append(Problem("deprecated", ("zero_optimization",), "`zero_optimization: "
                                    f"{str(zero).lower()}` is the deprecated boolean form: use "
                                    '`"zero_optimization": {"stage": N}` instead', False,
                                    "zero_optimization.stage"))
        clean.pop("zero_optimization")
    _walk(data, root, (), out, clean)
    _drop_foreign_keys(data, out, embedded_ok=not partial)
    _validate(data, clean, root, partial, out)
    if table.predates(version):
        out.predates = True
        for p in out.problems:
            p.message += (f" (judged at DeepSpeed {release}, the oldest release in dslint's table: this config "
                          f"runs against DeepSpeed {version}, whose schema dslint does not have)")
    return out


def _validate(data: dict, clean: dict, root: type[Section], partial: bool, out: Analysis) -> None:
    try:
        root.model_validate(clean)
    except ValidationError as exc:
        seen: set[JsonPath] = set()
        tuning = isinstance(data.get("autotuning"), dict) and data["autotuning"].get("enabled") is True
        for err in exc.errors():
            if err["type"] == "extra_forbidden":
                continue
            path = data_path(data, err["loc"], root)
            if path in seen:          # one message per key (unions report each member)
                continue
            if partial and not data.known_below(path):
                continue
            seen.add(path)
            value = err.get("input")
            if isinstance(value, list) and tuning:
                continue      # the autotuner's search space (`"stage": [0, 1, 2, 3]`), not a value
            shown = f" (got {value!r})" if not isinstance(value, (dict, list)) else ""
            problem = Problem("invalid", path, f"invalid value for `{where(path)}`{shown}: {_message(err)}", True)
            implied = _implied_value(err, value)
            if implied is not None:
                problem.value, problem.has_value = implied, True
            out.problems.append(problem)


# keys that annotate a config by a common convention (`"_comment": "..."`, `"//": "..."`)
_COMMENT_KEYS = frozenset({"comment", "comments", "//", "#", "description", "note", "notes"})


def is_comment_key(key: str) -> bool:
    return key.startswith(("_", "//", "#")) or key.lower() in _COMMENT_KEYS


def _drop_foreign_keys(data: dict, out: Analysis, embedded_ok: bool = True) -> None:
    """Unknown keys that are not DeepSpeed's business:

    - annotation keys (`_comment`, `//`, `description`) where DeepSpeed reads the section with `dict.get`
      (a pydantic section still rejects them, so those stay);
    - the framework's own settings in a config that embeds DeepSpeed's sections in a larger file (GPT-NeoX's
      `num-layers`, a trainer's `model_name_or_path`): when the top level holds more unknown keys that resemble
      no DeepSpeed key than DeepSpeed keys, its unknown keys are the framework's, and only near-misses of
      DeepSpeed keys (which have a did-you-mean) are kept."""
    top_unknown = [p for p in out.problems if p.kind == "unknown" and len(p.path) == 1]
    foreign = [p for p in top_unknown if p.suggestion is None]
    known = len(data) - len(top_unknown)
    embedded = embedded_ok and len(foreign) > known
    out.problems = [p for p in out.problems if not (
        p.kind == "unknown" and isinstance(p.path[-1], str) and (
            (is_comment_key(p.path[-1]) and not p.deepspeed_fails)
            or (embedded and len(p.path) == 1 and p.suggestion is None)))]


def _implied_value(err: dict, value: Any) -> Optional[str]:
    """The one allowed value a wrong-case string stands for (`"CPU"` where `'none', 'cpu' or 'nvme'` are
    expected), else None."""
    expected = (err.get("ctx") or {}).get("expected")
    if err.get("type") not in ("enum", "literal_error") or not isinstance(value, str) or not isinstance(expected, str):
        return None
    choices = re.findall(r"'([^']*)'", expected)
    same = [c for c in choices if c.lower() == value.strip().lower()]
    return same[0] if len(same) == 1 and same[0] != value else None


def _message(err: dict) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg[:1].lower() + msg[1:]
