"""The generated schema table (`schemas.json`, written by `dslint/dsconfig/gen_schemas.py` from DeepSpeed's own
sources at every release tag) and the config models built from it for one release.

- `release_for(version)`: the release whose schema judges a project: the nearest release ≤ the pinned
  version; the newest when the version is unknown or newer than every release in the table; the oldest when
  the pin predates the table.
- `root_model(release)`: pydantic `Section` models, one per config section of that release: field names,
  JSON aliases, types, bounds and deprecations from the table, plus the value knowledge of
  `dslint.dsconfig.knowledge` (DeepSpeed's validators and run-time checks the table does not carry).
  `deepspeed_rejects_unknown` is the table's `rejects_unknown` (a `DeepSpeedConfigModel`, extra=forbid) — the
  models themselves ignore extra keys: unknown keys are reported by `check._walk` from the table.
- `key_history(path, key)`: the release ranges in which DeepSpeed read a key (for messages).
"""

from __future__ import annotations

import json
import re
from enum import Enum, IntEnum
from functools import lru_cache
from typing import Any, List, Literal, Optional, Union

from pydantic import ConfigDict, Field, create_model

from dslint.dsconfig import knowledge
from dslint.dsconfig.base import Section

RESOURCE = "schemas.json"


@lru_cache(maxsize=1)
def table() -> dict:
    from importlib.resources import files
    return json.loads(files("dslint.dsconfig").joinpath(RESOURCE).read_text(encoding="utf-8"))


def vtuple(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def releases() -> list[str]:
    return table()["versions"]


def release_for(version: Optional[str]) -> str:
    """The release of the table that judges `version` (see the module docstring)."""
    known = releases()
    if not version or not re.search(r"\d", version):
        return known[-1]
    want = vtuple(version)
    older = [v for v in known if vtuple(v) <= want]
    return older[-1] if older else known[0]


def predates(version: Optional[str]) -> bool:
    """Is `version` older than every release of the table (judged at the oldest, which is not its schema)?"""
    return bool(version and re.search(r"\d", version) and vtuple(version) < vtuple(releases()[0]))


def _in(release: str, run: dict) -> bool:
    return vtuple(run["from"]) <= vtuple(release) <= vtuple(run["to"])


@lru_cache(maxsize=None)
def sections_at(release: str) -> dict[str, dict]:
    """dotted path ('' for the top level) → the section's schema at `release`."""
    out = {}
    for path, runs in table()["sections"].items():
        for run in runs:
            if _in(release, run):
                out[path] = run
                break
    return out


def pydantic_major(release: str) -> int:
    for run in table()["pydantic"]:
        if _in(release, run):
            return run["major"]
    return 2


def key_history(path: tuple, key: str) -> list[tuple[str, str]]:
    """The release ranges (first, last) in which `key` was read at `path`, merged across adjacent runs."""
    runs = table()["sections"].get(".".join(str(p) for p in path), [])
    known = releases()
    out: list[list[str]] = []
    for run in runs:
        entry = run["keys"].get(key)
        if entry is None or entry.get("removed"):
            continue
        if out and known.index(run["from"]) == known.index(out[-1][1]) + 1:
            out[-1][1] = run["to"]
        else:
            out.append([run["from"], run["to"]])
    return [(a, b) for a, b in out]


def reads(release: str, path: tuple) -> bool:
    """Does DeepSpeed `release` read the key at JSON `path` (False for a removed key; True below a mapping it
    hands on whole, where its keys are not known)?"""
    secs = sections_at(release)
    for n, key in enumerate(path):
        if not isinstance(key, str):
            return True
        sec = secs.get(".".join(path[:n]))
        if sec is None or sec.get("open"):
            return True
        entry = sec["keys"].get(key)
        if entry is None or entry.get("removed"):
            return False
        if entry.get("open"):
            return True
    return True


@lru_cache(maxsize=None)
def key_homes(release: str) -> dict[str, list[str]]:
    """key → the sections (dotted paths) of `release` where it is read; to say where a misplaced key belongs."""
    homes: dict[str, list[str]] = {}
    for path, sec in sections_at(release).items():
        for key, entry in sec["keys"].items():
            if entry.get("removed"):
                continue
            for name in dict.fromkeys((key, entry.get("field") or key)):
                homes.setdefault(name, []).append(path)
    return homes


def key_in(release: str, section: tuple, key: str) -> Optional[dict]:
    """The table's entry of `key` (its JSON key or field name) in the section at `section`, if read there."""
    sec = sections_at(release).get(".".join(str(p) for p in section))
    if sec is None:
        return None
    entry = sec["keys"].get(key)
    if entry is None:
        entry = next((e for e in sec["keys"].values() if e.get("field") == key), None)
    return entry


def first_rejecting(section: tuple, key: str, release: str) -> Optional[str]:
    """The first release after `release` whose section at `section` rejects `key` (a DeepSpeed model with
    extra=forbid that has no such field), if any: where an ignored key starts to fail `deepspeed.initialize`."""
    path = ".".join(str(p) for p in section)
    for run in table()["sections"].get(path, []):
        if vtuple(run["to"]) <= vtuple(release) or not run.get("rejects_unknown"):
            continue
        if key not in run["keys"] and not any(e.get("field") == key for e in run["keys"].values()):
            return run["from"] if vtuple(run["from"]) > vtuple(release) else None
    return None


def ranges_text(ranges: list[tuple[str, str]]) -> str:
    return ", ".join(a if a == b else f"{a}–{b}" for a, b in ranges)


# ------------------------------------------------------------------------------------------- models of a release

class _Base(Section):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, protected_namespaces=(),
                              arbitrary_types_allowed=True)


def dict_paths(data: Any) -> frozenset:
    """The dotted paths of the mappings in a config (`""`, `"zero_optimization"`, …): the sections a model
    has to be built for."""
    out = {""}

    def visit(node: Any, prefix: str) -> None:
        for key, value in dict.items(node):
            if isinstance(value, dict) and isinstance(key, str):
                path = f"{prefix}.{key}" if prefix else key
                out.add(path)
                visit(value, path)

    if isinstance(data, dict):
        visit(data, "")
    return frozenset(out)


def root_model(release: str, wanted: Optional[frozenset] = None) -> type[Section]:
    """The model of the whole config at `release`. `wanted`: the dotted paths of the sections to build models
    for (`dict_paths(data)`: a section the config does not hold needs no validation; its key is still a field);
    None: every section."""
    if wanted is not None:
        wanted = frozenset(p for p in wanted if p in sections_at(release))
    return _root_model(release, wanted)


@lru_cache(maxsize=256)
def _root_model(release: str, wanted: Optional[frozenset]) -> type[Section]:
    secs = sections_at(release)
    major = pydantic_major(release)
    built: dict[str, type[Section]] = {}

    def build(path: str) -> type[Section]:
        if path in built:
            return built[path]
        sec = secs.get(path, {"keys": {}, "rejects_unknown": False})
        parts = tuple(path.split(".")) if path else ()
        subs = {}
        for key, entry in sec["keys"].items():
            child = f"{path}.{key}" if path else key
            if entry.get("section") and child not in _open_paths(secs) and (wanted is None or child in wanted):
                subs[key] = build(child)
        # the same section schema over the same sub-models is the same class, whatever the release or subset
        memo = (path, major, json.dumps({k: v for k, v in sec.items() if k not in ("from", "to")}, sort_keys=True),
                tuple(sorted((k, id(m)) for k, m in subs.items())))
        if memo in _MODELS:
            built[path] = _MODELS[memo]
            return built[path]
        fields: dict[str, Any] = {}
        for key, entry in sec["keys"].items():
            name = entry.get("field") or key
            if not name.isidentifier() or name.startswith("_") or name in fields:
                name = f"k_{len(fields)}"
            sub = subs.get(key)
            annotation = _annotation(entry, sub, major, parts + (key,), sec.get("model") is not None)
            kwargs: dict[str, Any] = {"alias": key} if key != name else {}
            for bound in ("ge", "gt", "le", "lt"):
                if bound in entry and sec.get("model") is not None:
                    kwargs[bound] = entry[bound]
            extra = {}
            if "deprecated" in entry:
                extra.update(deprecated=True, new_param=entry["deprecated"])
            if "removed" in entry:
                extra["removed"] = entry["removed"]
            if entry.get("open") and not sub:
                extra["open"] = True
            if extra:
                kwargs["json_schema_extra"] = extra
            kwargs.update(knowledge.bounds(parts + (key,)) if sec.get("model") is None else {})
            fields[name] = (annotation, Field(None, **kwargs))
        validators = knowledge.validators(parts, sec)
        model = create_model(f"DS_{path.replace('.', '__') or 'top'}", __base__=_Base,
                             __validators__=validators or None, **fields)
        model.deepspeed_rejects_unknown = bool(sec.get("rejects_unknown"))
        model.where = path
        model.open_section = bool(sec.get("open"))
        model.model_name = sec.get("model")
        built[path] = _MODELS[memo] = model
        return model

    return build("")


_MODELS: dict = {}      # (path, pydantic major, section schema, sub-models) -> model class


def _open_paths(secs: dict) -> set:
    return {p for p, s in secs.items() if s.get("open")}


_INT_ENUMS: dict = {}


def _annotation(entry: dict, sub: Optional[type], major: int, path: tuple, validated: bool) -> Any:
    if entry.get("removed"):
        return Any
    if entry.get("section") and sub is None:
        # a section the config does not hold as a mapping (or one handed on whole): DeepSpeed reads it as one
        return Optional[dict]
    t = entry.get("type", "any")
    if t == "read":
        known = knowledge.read_type(path)
        inner = known if known is not None else Any
        if sub is not None:
            return Optional[Union[sub, inner]] if known is not None else Optional[sub]
        return Optional[inner]
    if not validated:
        return Any
    ann = _type(t, sub, major)
    return Optional[ann]


def _type(t: Any, sub: Optional[type], major: int) -> Any:
    if t == "section":
        return sub if sub is not None else dict
    if t == "bool":
        return bool
    if t == "int":
        return float if major == 1 else int          # pydantic 1 truncates a float for an int field
    if t == "float":
        return float
    if t == "str":
        return Union[str, int, float] if major == 1 else str     # pydantic 1 coerces numbers to str
    if t == "none":
        return type(None)
    if t == "dict":
        return dict
    if t in ("any", "read"):
        return Any
    if isinstance(t, list):
        head = t[0]
        if head == "list":
            return List[_type(t[1], None, major)]
        if head == "lit":
            return Literal[tuple(t[1])] if t[1] else Any
        if head == "enum":
            return _enum(tuple(t[1]))
        if head == "union":
            members = tuple(_type(m, sub, major) for m in t[1])
            return Union[members] if len(members) > 1 else members[0]
    return Any


def _enum(values: tuple) -> Any:
    if values in _INT_ENUMS:
        return _INT_ENUMS[values]
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        made: Any = IntEnum("Choice", {f"v{v}": v for v in values})
    elif values and all(isinstance(v, str) for v in values):
        made = Enum("Choice", {f"v{i}": v for i, v in enumerate(values)}, type=str)
    else:
        made = Literal[values] if values else Any
    _INT_ENUMS[values] = made
    return made
