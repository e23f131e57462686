#!/bin/sh
# record_workloads.sh - records the five simulated workloads (sim/workloads/) into
# conformance/traces/workloads/*.jsonl (+ blobs/) with `mdc record`, then replays them.
#
# usage: conformance/record_workloads.sh [BUILD_DIR]     (default: build)
# Each trace is recorded against the reference driver (backend=sim, seed 1; the recorded config
# keeps seed=1 and drops the backend, which the replay chooses) and must replay
# Pass against it. Few steps keep the files small; sequence keeps its 128 steps (the state must
# live on the device for 100+ steps) with tiny tensors (~115 KiB).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
mdc=$build/conformance/mdc/mdc
wl=$build/sim/workloads
out=$root/conformance/traces/workloads
for f in "$mdc" "$wl/md_wl_sequence"; do
  [ -x "$f" ] || { echo "record_workloads.sh: $f is missing: build first (cmake --build $build)" >&2; exit 2; }
done
rm -rf "$out/blobs"
mkdir -p "$out"
"$mdc" record --out "$out/sequence.jsonl"      -- "$wl/md_wl_sequence" --steps 128
"$mdc" record --out "$out/dynamic_batch.jsonl" -- "$wl/md_wl_dynamic_batch" --steps 12
"$mdc" record --out "$out/multi_client.jsonl"  -- "$wl/md_wl_multi_client" --steps 12
"$mdc" record --out "$out/cpu_fallback.jsonl"  -- "$wl/md_wl_cpu_fallback" --steps 12
"$mdc" record --out "$out/constants.jsonl"     -- "$wl/md_wl_constants"
"$mdc" replay --no-db "$out"
