#!/usr/bin/env bash
# GPU pre-flight checks (ISSUE 7), from the repository root, on a machine with N GPUs:
#   tests/gpu/run_gpu_checks.sh [run_gpu_checks.py options]     e.g. --gpus 2 --launcher deepspeed
# Installs wheels carried in .whl/ (deepspeed, pydantic, hjson, …) into /tmp/site if there are any, puts the
# repository on PYTHONPATH (python3 -m dslint works without installing), runs the cases, then the CUDA
# stream unit checks and the tracer benchmark at world size 1. Results go to $OUT (default ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export OUT="${OUT:-$PWD/gpu-out}" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
rc=0
python3 tests/gpu/run_gpu_checks.py "$@" || rc=1
python3 -m torch.distributed.run --nproc-per-node 1 --master-port 29741 tests/gpu/cuda_stream_checks.py \
  --json "$OUT/cuda_stream_checks.json" || rc=1
exit $rc
