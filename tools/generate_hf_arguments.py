"""Generate dslint/data/hf_arguments.json: the fields of transformers' argument dataclasses that an arguments
JSON (`HfArgumentParser.parse_json_file`) holds, so that `dslint check` can tell such a file from a DeepSpeed
config without importing transformers.

    python tools/generate_hf_arguments.py            # writes the table from the installed transformers
    python tools/generate_hf_arguments.py --check    # exit 1 when the table differs from it

The table lists, per dataclass, its init fields (what `parse_json_file` accepts), and which of them are also
top-level keys of a DeepSpeed config in some release (dslint's generated schema table): those say nothing about which of the two a
file is.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "dslint" / "data" / "hf_arguments.json"
CLASSES = ("TrainingArguments", "Seq2SeqTrainingArguments")


def deepspeed_top_keys() -> set[str]:
    """Every top-level key of a DeepSpeed config in any release of the generated schema table (its top-level
    keys and sections, field names and aliases)."""
    from dslint.dsconfig import table
    keys: set[str] = set()
    for release in table.releases():
        sections = table.sections_at(release)
        for key, entry in sections.get("", {}).get("keys", {}).items():
            keys.add(key)
            if entry.get("field"):
                keys.add(entry["field"])
        keys |= {path for path in sections if path and "." not in path}
    return keys


def build() -> dict:
    import transformers
    ds_keys = deepspeed_top_keys()
    schemas, shared = {}, set()
    for name in CLASSES:
        cls = getattr(transformers, name)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        schemas[name] = sorted(f.name for f in fields)
        shared |= {f.name for f in fields if f.name in ds_keys}
    return {"generated_by": "tools/generate_hf_arguments.py", "transformers": transformers.__version__,
            "schemas": schemas, "shared_with_deepspeed": sorted(shared)}


def main(argv: list[str]) -> int:
    table = build()
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if "--check" in argv:
        current = TABLE.read_text() if TABLE.exists() else ""
        same = current and {k: v for k, v in json.loads(current).items() if k != "transformers"} == \
            {k: v for k, v in table.items() if k != "transformers"}
        print("up to date" if same else f"{TABLE} differs from transformers {table['transformers']}")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"wrote {TABLE} (transformers {table['transformers']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
