#!/usr/bin/env bash
# bench/gpu.sh - the GPU session in one command (< 10 min on an H100/H200 machine):
#   1. builds for NVIDIA (build-gpu: -DMD_HIP=nvidia -DCMAKE_CUDA_ARCHITECTURES=90, Release);
#   2. checks every HIP kernel against the host reference (hip_test_hip_kernels) and runs the
#      backend's own GPU tests (hip_test_hip_backend);
#   3. replays the conformance corpus on the GPU (mdc replay --config backend=hip);
#   4. measures kernels, copies and execute overhead (bench/gpu/md_gpu_bench) and prints the
#      table last.
# Usage: bench/gpu.sh [build dir]. Exit status: the first failing step's.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
status=0
step() { echo; echo "==== gpu.sh: $*"; }

step "configure + build ($B, MD_HIP=nvidia, sm_90)"
cmake -S . -B "$B" -DMD_HIP=nvidia -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DMD_WERROR=ON >/dev/null || exit 1
cmake --build "$B" -j "$JOBS" || exit 1

step "kernel correctness vs the host reference"
"$B"/hip_kernels/hip_test_hip_kernels --verbose 2>&1 | grep -E "worst|FAIL|SKIP|Synthesis|Assertion|error" || true
"$B"/hip_kernels/hip_test_hip_kernels >/dev/null 2>&1 || { echo "kernel check FAILED"; status=1; }
"$B"/hip_kernels/hip_test_hip_backend 2>&1 | tail -n 3 || status=1

step "conformance replay with backend=hip"
if [ -x "$B"/conformance/mdc/mdc ]; then
  "$B"/conformance/mdc/mdc replay --config backend=hip conformance/traces || { echo "replay FAILED"; [ $status -eq 0 ] && status=2; }
else
  echo "no $B/conformance/mdc/mdc: replay skipped"; [ $status -eq 0 ] && status=2
fi

step "benchmarks"
"$B"/bench/gpu/md_gpu_bench || { echo "benchmark FAILED"; [ $status -eq 0 ] && status=3; }
exit $status
