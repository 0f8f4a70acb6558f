"""`dslint check` never imports torch or deepspeed (it must stay a fast pre-commit hook)."""

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import sys, runpy
sys.argv = ["dslint", "check", "--format", "json", *sys.argv[1:]]
try:
    runpy.run_module("dslint", run_name="__main__")
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "deepspeed", "transformers", "numpy"))
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def test_check_does_not_import_torch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport deepspeed\nengine, *_ = deepspeed.initialize(model=m, config='ds.json')\n"
                      "if engine.global_rank == 0:\n    engine.save_checkpoint('out')\n")
    cfg = tmp_path / "ds.json"
    cfg.write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}')
    out = subprocess.run([sys.executable, "-c", PROBE, str(script), str(cfg)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    heavy = [l for l in out.stderr.splitlines() if l.startswith("HEAVY:")]
    assert heavy == ["HEAVY:"], out.stderr[-2000:]
    assert '"files_checked": 2' in out.stdout
