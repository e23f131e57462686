#!/usr/bin/env bash
# test_oss_fuzz_build.sh - the oss_fuzz_build test (docs/fuzzing.md "OSS-Fuzz and ClusterFuzzLite"):
# .clusterfuzzlite/build.sh run with the environment the OSS-Fuzz base builder sets, for
#   libfuzzer/address    libFuzzer + AddressSanitizer
#   libfuzzer/undefined  libFuzzer + UndefinedBehaviorSanitizer
#   afl/address          AFL++ (afl-clang-fast, libAFLDriver.a) + ASan, when both are installed
# then the fuzzers it wrote run as ClusterFuzz would (its .options, its seed corpus unzipped)
# for a bounded number of inputs.
#   test_oss_fuzz_build.sh SOURCE_DIR WORK [RUNS [BUILDS]]
# BUILDS: which of the three (default all; MDC_OSS_FUZZ_BUILDS too), e.g. "libfuzzer/address".
# Checked for each: build.sh writes $OUT/mdc_fuzz_T, _seed_corpus.zip, .dict and .options for
# each target. libFuzzer builds: each fuzzer runs 60 of its seeds and RUNS more inputs (-runs) on
# the reference driver and exits 0. AFL++ build: the tokens fuzzer runs those seeds as files and
# exits 0, and afl-fuzz fuzzes it for 5 seconds (execs, a queue). Every build: pointed at the
# mutants driver it wrote with a planted mutant (MD_MUTANT=leak_report_wrong: close_client
# reports no leaks), the tokens fuzzer reports the finding (MDC-FUZZ-FINDING, exit non-zero)
# on the same inputs.
# Exit 77 (CTest SKIP) when clang, libFuzzer or zip is missing (1 under MDC_REQUIRE_OSS_FUZZ=1);
# 1 with a message on a failure.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SOURCE_DIR WORK [RUNS [BUILDS]]" >&2; exit 2; }
SRCDIR=$(readlink -f "$1") W=$2 RUNS=${3:-300}
BUILDS=${4:-${MDC_OSS_FUZZ_BUILDS:-libfuzzer/address libfuzzer/undefined afl/address}}
fail() { echo "test_oss_fuzz_build: $*" >&2; exit 1; }
# MDC_REQUIRE_OSS_FUZZ=1 (.ci/run sets it: `make test` installs clang and its runtimes) turns a
# skip into a failure, so CI cannot pass by skipping this test.
skip() {
  [ "${MDC_REQUIRE_OSS_FUZZ:-}" != 1 ] || fail "cannot run (MDC_REQUIRE_OSS_FUZZ=1): $*"
  echo "test_oss_fuzz_build: SKIP: $*"
  exit 77
}

command -v clang > /dev/null || skip "no clang (apt-get install clang)"
for tool in zip unzip; do command -v $tool > /dev/null || skip "no $tool"; done
# WORK/work (build.sh's build folders, one per engine and sanitizer) is kept between runs: an
# incremental build, seconds when nothing changed; everything else starts empty.
mkdir -p "$W"
find "$W" -mindepth 1 -maxdepth 1 ! -name work -exec rm -rf {} +
mkdir -p "$W/probe"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
  > "$W/probe/p.c"
clang -fsanitize=fuzzer,address "$W/probe/p.c" -o "$W/probe/p" 2> /dev/null || skip "clang cannot link libFuzzer with ASan"
W=$(readlink -f "$W")
# AFL++'s libFuzzer-compatible driver (what the base builder's compile_afl copies to
# $LIB_FUZZING_ENGINE), where Debian's afl++ puts it or beside a locally built afl-clang-fast.
AFL_DRIVER=
if command -v afl-clang-fast > /dev/null; then
  for a in /usr/lib/afl/libAFLDriver.a /usr/local/lib/afl/libAFLDriver.a \
           "$(dirname "$(command -v afl-clang-fast)")/../lib/afl/libAFLDriver.a"; do
    [ -f "$a" ] && { AFL_DRIVER=$(readlink -f "$a"); break; }
  done
fi

# $SRC (a link to the project) lies outside the project: a link back into the tree from a build
# folder inside it would be a loop that CMake's directory walks follow.
SRC=$(mktemp -d)/src
export SRC WORK=$W/work
trap 'rm -rf "$(dirname "$SRC")"' EXIT
mkdir -p "$SRC" "$WORK" "$W/artifacts"
ln -s "$SRCDIR" "$SRC/mdc"
cp "$SRCDIR/.clusterfuzzlite/build.sh" "$SRC/build.sh"
export ARCHITECTURE=x86_64 FUZZING_LANGUAGE=c
# The base builder's flags (infra/base-images/base-builder: its Dockerfile's SANITIZER_FLAGS_*,
# `compile`, compile_libfuzzer, compile_afl): the sanitizer's, then the engine's coverage flags
# (none for AFL++: afl-clang-fast instruments).
BASE_CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION"
UBSAN_CHECKS=array-bounds,bool,builtin,enum,function,integer-divide-by-zero,null,object-size,return,returns-nonnull-attribute,shift,signed-integer-overflow,unreachable,vla-bound,vptr
declare -A SANITIZER_FLAGS_OF=(
  [address]="-fsanitize=address -fsanitize-address-use-after-scope"
  [undefined]="-fsanitize=$UBSAN_CHECKS,unsigned-integer-overflow -fno-sanitize-recover=$UBSAN_CHECKS")
# The runner's sanitizer options (ClusterFuzz's, in short): unsigned overflow is coverage, not a bug.
export ASAN_OPTIONS="abort_on_error=1:symbolize=1:allocator_may_return_null=1:detect_leaks=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:silence_unsigned_overflow=1"

# build ENGINE SANITIZER: build.sh with the base builder's environment into $W/out-ENGINE-SANITIZER.
build() {
  local engine=$1 san=$2 t0=$SECONDS
  (
    export FUZZING_ENGINE=$engine SANITIZER=$san OUT=$W/out-$engine-$san
    export SANITIZER_FLAGS="${SANITIZER_FLAGS_OF[$san]}"
    if [ "$engine" = afl ]; then
      export CC=afl-clang-fast CXX=afl-clang-fast++ COVERAGE_FLAGS='' LIB_FUZZING_ENGINE=$W/libFuzzingEngine.a AFL_QUIET=1
      cp "$AFL_DRIVER" "$LIB_FUZZING_ENGINE"
    else
      export CC=clang CXX=clang++ COVERAGE_FLAGS="-fsanitize=fuzzer-no-link" LIB_FUZZING_ENGINE="-fsanitize=fuzzer"
    fi
    export CFLAGS="$BASE_CFLAGS $SANITIZER_FLAGS $COVERAGE_FLAGS"
    export CXXFLAGS="$CFLAGS"
    mkdir -p "$OUT"
    cd "$SRC/mdc" && bash -eu "$SRC/build.sh"
  ) > "$W/build-$engine-$san.log" 2>&1 || fail "$engine/$san: build.sh failed:
$(tail -40 "$W/build-$engine-$san.log")"
  echo "test_oss_fuzz_build: $engine/$san: $(tail -1 "$W/build-$engine-$san.log") ($((SECONDS - t0)) s)"
}

# ClusterFuzz's run: -key=value of the .options' [libfuzzer] section, the corpus unzipped.
options() {
  awk '/^\[/ { sect = $0; next } sect == "[libfuzzer]" && /=/ { gsub(/ /, ""); print "-" $0 }' "$1"
}

# outputs OUT TAG: each fuzzer's files there; 60 of each target's seeds in $W/run-TAG/T.
outputs() {
  local out=$1 tag=$2 t f x
  for t in tokens shapes concurrency trace; do
    f=$out/mdc_fuzz_$t
    for x in "$f" "${f}_seed_corpus.zip" "$f.dict" "$f.options"; do
      [ -s "$x" ] || fail "$tag: build.sh wrote no $x"
    done
    [ -x "$f" ] || fail "$tag: $f is not executable"
    rm -rf "$W/corpus-$tag/$t" "$W/run-$tag/$t"
    mkdir -p "$W/corpus-$tag/$t" "$W/run-$tag/$t"
    (cd "$W/corpus-$tag/$t" && unzip -q "${f}_seed_corpus.zip")
    [ "$(ls "$W/corpus-$tag/$t" | wc -l)" -gt 0 ] || fail "$tag: $t: an empty seed corpus"
    # A bounded run: a slice of the seeds, to keep this short.
    mapfile -t seeds < <(ls "$W/corpus-$tag/$t")
    for s in "${seeds[@]:0:60}"; do cp "$W/corpus-$tag/$t/$s" "$W/run-$tag/$t/"; done
  done
}

# libfuzzer_runs OUT TAG: every fuzzer on its seeds and RUNS more inputs, clean on the reference driver.
libfuzzer_runs() {
  local out=$1 tag=$2 t f log done_runs
  for t in tokens shapes concurrency trace; do
    f=$out/mdc_fuzz_$t log=$W/$tag-$t.log
    mapfile -t opts < <(cd "$out" && options "$f.options")
    (cd "$out" && "$f" "${opts[@]}" -runs="$RUNS" -seed=1 -artifact_prefix="$W/artifacts/$tag-$t-" "$W/run-$tag/$t") \
      > "$log" 2>&1 || fail "$tag: $t: the fuzzer did not exit clean on the reference driver:
$(tail -30 "$log")"
    # libFuzzer's own count: at least -runs (the concurrency target's threads may add a few).
    done_runs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' | tail -1)
    [ -n "$done_runs" ] && [ "$done_runs" -ge "$RUNS" ] || fail "$tag: $t: no 'Done N runs' (N >= $RUNS): $(tail -5 "$log")"
    echo "test_oss_fuzz_build: $tag: $t: $(ls "$W/corpus-$tag/$t" | wc -l) seeds in the zip; $(grep -m1 -o 'INITED cov: [0-9]*' "$log" || true), $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log"), no finding"
  done
}

# afl_runs OUT TAG: the tokens fuzzer (AFL++'s driver) runs the seeds as files, then 5 s of afl-fuzz.
afl_runs() {
  local out=$1 tag=$2
  local f=$out/mdc_fuzz_tokens log=$W/$tag-tokens.log
  (cd "$out" && "$f" "$W/run-$tag/tokens"/*) > "$log" 2>&1 || fail "$tag: tokens: the seeds did not run clean:
$(tail -30 "$log")"
  mkdir -p "$W/afl-in"
  cp "$W/run-$tag/tokens"/* "$W/afl-in/"
  # afl-fuzz refuses a symbolizing ASan (a crash must stop the target at once): ClusterFuzz's
  # AFL++ runs set symbolize=0 too.
  (cd "$out" && ASAN_OPTIONS="${ASAN_OPTIONS/symbolize=1/symbolize=0}" \
     AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1 \
     afl-fuzz -i "$W/afl-in" -o "$W/afl-out" -m none -t 1000 -V 5 -x "$out/mdc_fuzz_tokens.dict" -- "$f") \
    > "$W/$tag-afl-fuzz.log" 2>&1 || fail "$tag: afl-fuzz on the tokens fuzzer failed: $(tail -20 "$W/$tag-afl-fuzz.log")"
  local st=$W/afl-out/default/fuzzer_stats execs
  [ -f "$st" ] || fail "$tag: afl-fuzz wrote no fuzzer_stats: $(tail -20 "$W/$tag-afl-fuzz.log")"
  execs=$(awk -F' : ' '$1 ~ /^execs_done/ { print $2 }' "$st")
  [ "${execs:-0}" -gt 0 ] || fail "$tag: afl-fuzz ran no input"
  echo "test_oss_fuzz_build: $tag: tokens: $(ls "$W/run-$tag/tokens" | wc -l) seeds run as files, exit 0; afl-fuzz 5 s:" \
       "$execs execs, $(awk -F' : ' '$1 ~ /^edges_found/ { print $2 }' "$st") edges, $(awk -F' : ' '$1 ~ /^corpus_count/ { print $2 }' "$st") in its queue, $(awk -F' : ' '$1 ~ /^saved_crashes/ { print $2 }' "$st") crashes"
}

# mutant OUT TAG: the tokens fuzzer pointed at the planted mutant, on the same inputs: a finding.
mutant() {
  local out=$1 tag=$2 rc=0 sig
  local log=$W/$tag-mutant.log
  if [ "${tag%%-*}" = afl ]; then
    # An AFL++-instrumented driver loaded by dlopen after the fork server is up is refused: it is
    # preloaded (LD_PRELOAD here; AFL_PRELOAD under afl-fuzz, as `mdc fuzz` does).
    (cd "$out" && MDC_FUZZ_DRIVER="$out/libmd_driver_mutants.so" LD_PRELOAD="$out/libmd_driver_mutants.so" \
       MD_MUTANT=leak_report_wrong "$out/mdc_fuzz_tokens" "$W/run-$tag/tokens"/*) > "$log" 2>&1 || rc=$?
  else
    (cd "$out" && MDC_FUZZ_DRIVER="$out/libmd_driver_mutants.so" MD_MUTANT=leak_report_wrong \
       "$out/mdc_fuzz_tokens" -runs="$RUNS" -seed=1 -artifact_prefix="$W/artifacts/$tag-mutant-" "$W/run-$tag/tokens") \
      > "$log" 2>&1 || rc=$?
  fi
  [ "$rc" -ne 0 ] || fail "$tag: the tokens fuzzer found nothing on MD_MUTANT=leak_report_wrong: $(tail -5 "$log")"
  sig=$(grep -m1 -o 'MDC-FUZZ-FINDING [^ ]*' "$log" || true)
  [ -n "$sig" ] || fail "$tag: the tokens fuzzer on the mutant exited $rc without a finding line:
$(tail -30 "$log")"
  if [ "${tag%%-*}" != afl ]; then
    ls "$W/artifacts/$tag-mutant-crash-"* > /dev/null 2>&1 || fail "$tag: libFuzzer saved no crash input for the finding"
  fi
  echo "test_oss_fuzz_build: $tag: MD_MUTANT=leak_report_wrong: $sig (exit $rc)"
}

for b in $BUILDS; do
  engine=${b%/*} san=${b#*/} tag=${b/\//-}
  case "$b" in
    libfuzzer/address | libfuzzer/undefined | afl/address) ;;
    *) fail "BUILDS: '$b': want libfuzzer/address, libfuzzer/undefined or afl/address" ;;
  esac
  if [ "$engine" = afl ] && { [ -z "$AFL_DRIVER" ] || ! command -v afl-fuzz > /dev/null; }; then
    echo "test_oss_fuzz_build: $b: not run (no afl-clang-fast, afl-fuzz or libAFLDriver.a: apt-get install afl++)"
    continue
  fi
  build "$engine" "$san"
  outputs "$W/out-$tag" "$tag"
  if [ "$engine" = afl ]; then afl_runs "$W/out-$tag" "$tag"; else libfuzzer_runs "$W/out-$tag" "$tag"; fi
  mutant "$W/out-$tag" "$tag"
done
echo "test_oss_fuzz_build: ok"
