"""What a config section is: a pydantic model whose fields are the keys DeepSpeed reads there, built for one
DeepSpeed release from the generated table (`dslint.dsconfig.table.root_model`).

Two kinds of sections exist in DeepSpeed and the difference matters to users:
- sections DeepSpeed builds with its own pydantic models (`DeepSpeedConfigModel`, `extra="forbid"`): an
  unknown key makes `deepspeed.initialize` fail, after the job waited in the queue;
- sections DeepSpeed reads with `get_scalar_param`/`dict.get` (the top level, `optimizer`, `aio`,
  `flops_profiler`, and before 0.17.1 `fp16`/`bf16`, …): an unknown key is silently ignored — the setting the
  user meant is simply not applied.
`Section.deepspeed_rejects_unknown` records which; messages say it.

Deprecated and removed keys are fields too (so they are never "unknown"), marked through
`json_schema_extra` the way DeepSpeed marks its own deprecated fields.
"""

from __future__ import annotations

import types
import typing
from typing import Any, ClassVar, Optional, Union

from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo


class Section(BaseModel):
    # Lax types, like DeepSpeed's own models (DeepSpeedConfigModel): a value DeepSpeed accepts is accepted here.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=(),
                              arbitrary_types_allowed=True)

    deepspeed_rejects_unknown: ClassVar[bool] = True
    where: ClassVar[str] = ""          # the JSON path shown to users, e.g. "zero_optimization.offload_param"
    open_section: ClassVar[bool] = False     # DeepSpeed hands the mapping on whole: its keys are not known
    model_name: ClassVar[Optional[str]] = None   # DeepSpeed's pydantic class for this section, if any


def field_for(model: type[Section], key: str) -> Optional[tuple[str, FieldInfo]]:
    """The field a JSON key selects, by name or alias (DeepSpeed populates by name too)."""
    for name, info in model.model_fields.items():
        if key == name or key == info.alias:
            return name, info
    return None


def keys_of(model: type[Section]) -> list[str]:
    """Every key accepted in this section: field names and aliases (removed keys excluded)."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        if (info.json_schema_extra or {}).get("removed"):
            continue
        out.append(info.alias or name)
        if info.alias and name != info.alias and not name.startswith("k_"):
            out.append(name)
    return out


def section_type(info: FieldInfo) -> Optional[type[Section]]:
    """The Section model a field holds (through Optional/Union), if any."""
    return _find_section(info.annotation)


def _find_section(annotation: Any) -> Optional[type[Section]]:
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType or origin is typing.Annotated:
        for arg in typing.get_args(annotation):
            found = _find_section(arg)
            if found is not None:
                return found
    return None


def extra_of(info: FieldInfo) -> dict:
    return dict(info.json_schema_extra or {}) if not callable(info.json_schema_extra) else {}
