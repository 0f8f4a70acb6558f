"""The bundled examples (README's first command) are the reference hangs of DESIGN.md §1 and a broken config:
each must keep giving the findings the README promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

EXPECTED = {  # example -> (path, code) pairs its findings must include
    "expert_parallel": {("train.py", "DSL204"), ("ds_config.json", "DSL401")},  # dynamic padding, EP config
    "moe_inference": {("infer.py", "DSL102"), ("infer.py", "DSL201")},        # rank-sliced data, no initialize
    "llava_projector": {("model.py", "DSL303")},                              # image-only parameter, ZeRO-2
}


def test_every_bundled_example_gives_its_reference_finding():
    out = subprocess.run([sys.executable, "-m", "dslint", "check", "--no-cache", "--exit-zero", "-f", "json",
                          "examples"], cwd=REPO, capture_output=True, text=True, timeout=300)
    findings = json.loads(out.stdout)["findings"]
    for example, expected in EXPECTED.items():
        got = {(Path(f["path"]).name, f["code"]) for f in findings if f["path"].startswith(f"examples/{example}/")}
        assert expected <= got, (example, sorted(got))
