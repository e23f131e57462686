#!/usr/bin/env bash
# test_oss_fuzz_build.sh - the oss_fuzz_build test (docs/fuzzing.md "OSS-Fuzz and ClusterFuzzLite"):
# .clusterfuzzlite/build.sh run with the environment the OSS-Fuzz base builder sets for
# libFuzzer + AddressSanitizer, then every fuzzer it wrote run as ClusterFuzz would (its
# .options, its seed corpus unzipped) for a bounded number of inputs.
#   test_oss_fuzz_build.sh SOURCE_DIR WORK [RUNS]
# Checked: build.sh writes $OUT/mdc_fuzz_T, _seed_corpus.zip, .dict and .options for each target;
# each fuzzer runs its seeds and RUNS more inputs (-runs) on the reference driver and exits 0;
# pointed at the mutants driver it wrote with a planted mutant (MD_MUTANT=leak_report_wrong:
# close_client reports no leaks), the tokens fuzzer reports a finding
# (MDC-FUZZ-FINDING, exit non-zero) on the same inputs.
# Exit 77 (CTest SKIP) when clang, libFuzzer or zip is missing; 1 with a message on a failure.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SOURCE_DIR WORK [RUNS]" >&2; exit 2; }
SRCDIR=$(readlink -f "$1") W=$2 RUNS=${3:-300}
fail() { echo "test_oss_fuzz_build: $*" >&2; exit 1; }
skip() { echo "test_oss_fuzz_build: SKIP: $*"; exit 77; }

command -v clang > /dev/null || skip "no clang (apt-get install clang)"
for tool in zip unzip; do command -v $tool > /dev/null || skip "no $tool"; done
# WORK/work (build.sh's build folder) is kept between runs: an incremental build, seconds when
# nothing changed; everything else starts empty.
mkdir -p "$W"
find "$W" -mindepth 1 -maxdepth 1 ! -name work -exec rm -rf {} +
mkdir -p "$W/probe"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
  > "$W/probe/p.c"
clang -fsanitize=fuzzer,address "$W/probe/p.c" -o "$W/probe/p" 2> /dev/null || skip "clang cannot link libFuzzer with ASan"
W=$(readlink -f "$W")

# What the OSS-Fuzz base builder sets for FUZZING_ENGINE=libfuzzer SANITIZER=address (its
# `compile` script), with $SRC/mdc the project and build.sh copied to $SRC as the Dockerfile does.
# $SRC (a link to the project) lies outside the project: a link back into the tree from a build
# folder inside it would be a loop that CMake's directory walks follow.
export SRC=$(mktemp -d)/src OUT=$W/out WORK=$W/work
trap 'rm -rf "$(dirname "$SRC")"' EXIT
mkdir -p "$SRC" "$OUT" "$WORK" "$W/artifacts"
ln -s "$SRCDIR" "$SRC/mdc"
cp "$SRCDIR/.clusterfuzzlite/build.sh" "$SRC/build.sh"
export CC=clang CXX=clang++ FUZZING_ENGINE=libfuzzer SANITIZER=address ARCHITECTURE=x86_64 FUZZING_LANGUAGE=c
export SANITIZER_FLAGS="-fsanitize=address -fsanitize-address-use-after-scope"
export COVERAGE_FLAGS="-fsanitize=fuzzer-no-link"
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION $SANITIZER_FLAGS $COVERAGE_FLAGS"
export CXXFLAGS="$CFLAGS"
export LIB_FUZZING_ENGINE="-fsanitize=fuzzer"
(cd "$SRC/mdc" && bash -eu "$SRC/build.sh") > "$W/build.log" 2>&1 || fail "build.sh failed:
$(tail -40 "$W/build.log")"
tail -1 "$W/build.log"

# ClusterFuzz's run: -key=value of the .options' [libfuzzer] section, the corpus unzipped.
options() {
  awk '/^\[/ { sect = $0; next } sect == "[libfuzzer]" && /=/ { gsub(/ /, ""); print "-" $0 }' "$1"
}
export ASAN_OPTIONS="abort_on_error=1:symbolize=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in tokens shapes concurrency trace; do
  f=$OUT/mdc_fuzz_$t
  for x in "$f" "${f}_seed_corpus.zip" "$f.dict" "$f.options"; do
    [ -s "$x" ] || fail "build.sh wrote no $x"
  done
  [ -x "$f" ] || fail "$f is not executable"
  mkdir -p "$W/corpus/$t"
  (cd "$W/corpus/$t" && unzip -q "${f}_seed_corpus.zip")
  n_seeds=$(ls "$W/corpus/$t" | wc -l)
  [ "$n_seeds" -gt 0 ] || fail "$t: an empty seed corpus"
  # A bounded run: the seeds (a slice of them, to keep this short), then RUNS more inputs.
  mkdir -p "$W/run/$t"
  mapfile -t seeds < <(ls "$W/corpus/$t")
  for s in "${seeds[@]:0:60}"; do cp "$W/corpus/$t/$s" "$W/run/$t/"; done
  mapfile -t opts < <(cd "$OUT" && options "$f.options")
  (cd "$OUT" && "$f" "${opts[@]}" -runs="$RUNS" -seed=1 -artifact_prefix="$W/artifacts/$t-" "$W/run/$t") > "$W/$t.log" 2>&1 \
    || fail "$t: the fuzzer did not exit clean on the reference driver:
$(tail -30 "$W/$t.log")"
  # libFuzzer's own count: at least -runs (the concurrency target's threads may add a few).
  done_runs=$(grep -o 'Done [0-9]* runs' "$W/$t.log" | grep -o '[0-9]*' | tail -1)
  [ -n "$done_runs" ] && [ "$done_runs" -ge "$RUNS" ] || fail "$t: no 'Done N runs' (N >= $RUNS) in its output: $(tail -5 "$W/$t.log")"
  echo "test_oss_fuzz_build: $t: $n_seeds seeds in the zip; $(grep -m1 -o 'INITED cov: [0-9]*' "$W/$t.log" || true), $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$W/$t.log"), no finding"
done

# The planted mutant: the tokens fuzzer pointed at it, on the same inputs.
rc=0
(cd "$OUT" && MDC_FUZZ_DRIVER="$OUT/libmd_driver_mutants.so" MD_MUTANT=leak_report_wrong \
   "$OUT/mdc_fuzz_tokens" -runs="$RUNS" -seed=1 -artifact_prefix="$W/artifacts/mutant-" "$W/run/tokens") \
  > "$W/mutant.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "the tokens fuzzer found nothing on MD_MUTANT=leak_report_wrong: $(tail -5 "$W/mutant.log")"
sig=$(grep -m1 -o 'MDC-FUZZ-FINDING [^ ]*' "$W/mutant.log" || true)
[ -n "$sig" ] || fail "the tokens fuzzer on the mutant exited $rc without a finding line:
$(tail -30 "$W/mutant.log")"
ls "$W"/artifacts/mutant-crash-* > /dev/null 2>&1 || fail "libFuzzer saved no crash input for the finding"
echo "test_oss_fuzz_build: MD_MUTANT=leak_report_wrong: $sig (exit $rc, $(ls "$W"/artifacts/mutant-crash-* | head -1 | xargs basename))"
echo "test_oss_fuzz_build: ok"
