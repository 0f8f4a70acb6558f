"""tests/gpu holds scripts for GPU machines (run_gpu_checks.sh); CI's pytest must not collect anything here."""

collect_ignore_glob = ["*"]
