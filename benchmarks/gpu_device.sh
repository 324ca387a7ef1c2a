#!/usr/bin/env bash
# The GPU run, for a machine with CUDA and the packages already installed
# (no network): the host-synchronisation tests, the CUDA half of the test
# suite, then the gpu benchmark on the GPU alone. Logs and the report go to
# $OUT (default ./gpu_out), with the host-read counts of each path (syncs.log)
# and one Laplace solve's kernels (profile.txt). Each part has its own time
# limit (seconds):
#   SYNC_S (60), TESTS_S (170), BENCH_S (200); WORKERS (12) pytest-xdist workers.
#
#   OUT=/tmp/gpu python -m benchmarks gpu_device
#
# It runs in the repository root (python -m finds prefbo and benchmarks there).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}

{
  nvidia-smi -L
  $PY -c "import sys, torch, botorch, gpytorch; print(sys.version.split()[0], torch.__version__, botorch.__version__, gpytorch.__version__, torch.cuda.get_device_name(0))"
} 2>&1 | tee "$OUT/env.txt"

echo "== host synchronisations"
timeout "${SYNC_S:-60}" $PY -m pytest -q -s -p no:cacheprovider -p no:benchmark \
  tests/test_cuda_syncs.py 2>&1 | tee "$OUT/syncs.log" | tail -n 60

echo "== the CUDA tests"
timeout "${TESTS_S:-170}" $PY -m pytest -q -p no:cacheprovider -p no:benchmark -m "not slow" -k cuda \
  -n "${WORKERS:-12}" --ignore=tests/serve \
  --ignore=tests/benchmarks/test_serve_load_script.py \
  2>&1 | tee "$OUT/tests.log" | grep -E "FAILED|ERROR|passed|failed|error" | tail -n 60

echo "== python -m benchmarks gpu"
timeout "${BENCH_S:-200}" $PY -m benchmarks gpu --gpu-only --output "$OUT/gpu.md" \
  > "$OUT/bench.log" 2>&1
echo "gpu.py exit $?"
tail -n 70 "$OUT/bench.log"

echo "== one solve's CUDA kernels"
timeout 60 $PY -m benchmarks gpu --profile > "$OUT/profile.txt" 2>&1
grep -E "^###|Self CUDA time total" "$OUT/profile.txt"
