#!/bin/bash -eu
# .clusterfuzzlite/build.sh - builds mdc's fuzz targets for ClusterFuzzLite and OSS-Fuzz
# (docs/fuzzing.md "OSS-Fuzz and ClusterFuzzLite"). Run by the builder image's `compile` in
# $SRC/mdc (or anywhere in mdc's tree: MDC_SRC overrides), with what the builder sets:
#   $CC $CXX $CFLAGS $CXXFLAGS  the compiler and the engine's and sanitizer's flags
#                               (libFuzzer: clang, -fsanitize=fuzzer-no-link; AFL++: afl-clang-fast)
#   $LIB_FUZZING_ENGINE         what a fuzzer links (-fsanitize=fuzzer, or libAFLDriver.a)
#   $SANITIZER                  address, undefined (coverage and none too; memory is refused:
#                               MSan needs every library rebuilt with it)
#   $OUT $WORK $SRC             where fuzzers go, scratch, the sources
# For each target T (tokens, shapes, concurrency, trace) it writes $OUT/mdc_fuzz_T with
# $OUT/mdc_fuzz_T_seed_corpus.zip (seeds made from the trace corpus at build time),
# $OUT/mdc_fuzz_T.dict and $OUT/mdc_fuzz_T.options; beside them the libraries the fuzzers load
# ($ORIGIN): the reference driver they were linked with, the system libraries the runner image
# lacks, and libmd_driver_mutants.so (every mutant of conformance/mutants/mutants.txt compiled
# in: MDC_FUZZ_DRIVER=$OUT/libmd_driver_mutants.so MD_MUTANT=NAME points a fuzzer at one).
# Tested (fuzz/tests/test_oss_fuzz_build.sh) with the base builder's environment for libFuzzer +
# ASan, libFuzzer + UBSan, and AFL++ (afl-clang-fast, LIB_FUZZING_ENGINE=libAFLDriver.a) + ASan.
# With FUZZING_ENGINE=afl the libraries are instrumented for AFL++, whose runtime refuses one
# loaded by dlopen after its fork server started: a driver given with MDC_FUZZ_DRIVER (the
# mutants driver) is preloaded too, LD_PRELOAD when the fuzzer runs alone, AFL_PRELOAD under
# afl-fuzz; the reference driver, linked in, needs nothing.
: "${OUT:?}" "${WORK:?}" "${CC:=clang}" "${CXX:=clang++}" "${CFLAGS:=}" "${CXXFLAGS:=}"
: "${LIB_FUZZING_ENGINE:=-fsanitize=fuzzer}" "${SANITIZER:=address}" "${FUZZING_ENGINE:=libfuzzer}"

if [ -z "${MDC_SRC:-}" ]; then
  MDC_SRC=$(pwd -P)  # physical: a symlinked $SRC/mdc inside a build tree must not nest
  [ -f "$MDC_SRC/fuzz/fz_entry.c" ] || MDC_SRC=$(cd "$(dirname "$0")/.." && pwd -P)
fi
[ -f "$MDC_SRC/fuzz/fz_entry.c" ] || { echo "build.sh: mdc's sources not found (run in \$SRC/mdc or set MDC_SRC)" >&2; exit 1; }
case "$SANITIZER" in
  memory) echo "build.sh: SANITIZER=memory is not supported (jansson and libsodium would need MSan builds)" >&2; exit 1 ;;
esac
case "$FUZZING_ENGINE" in
  # The harness functions AFL++ leaves uninstrumented (see the file).
  afl) export AFL_LLVM_DENYLIST="$MDC_SRC/fuzz/afl-denylist.txt" AFL_QUIET=1 ;;
esac

B="$WORK/mdc-build-$FUZZING_ENGINE-$SANITIZER"
# A build folder kept from another source tree (a moved checkout) cannot be reused: start afresh.
if [ -f "$B/CMakeCache.txt" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$MDC_SRC" "$B/CMakeCache.txt"; then
  rm -rf "$B"
fi
INST="$WORK/mdc-install-$FUZZING_ENGINE-$SANITIZER"
# The sanitizer runtimes are linked into executables only: the driver .so leaves their symbols
# undefined (-z undefs after its own --no-undefined). CMAKE_BUILD_TYPE=OSSFuzz: no flags of
# CMake's own beside $CFLAGS. The seed maker runs at build time, under the sanitizer: no leak
# report may fail the build.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
cmake -S "$MDC_SRC" -B "$B" -DCMAKE_BUILD_TYPE=OSSFuzz \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCMAKE_C_STANDARD_LIBRARIES="-Wl,-z,undefs" -DMDC_LIB_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" \
  -DMD_BUILD_FUZZ=ON -DMD_BUILD_TESTS=OFF -DMD_BUILD_BENCH=OFF -DMD_HIP=off -DMDC_FUZZ_FLAVOR=oss-fuzz
cmake --build "$B" -j"$(nproc)" --target md_fuzz_targets md_driver_mutants
rm -rf "$INST"
cmake --install "$B" --component fuzz --prefix "$INST" > /dev/null

mkdir -p "$OUT"
bin="$INST/libexec/mdc/oss-fuzz"
cp "$bin/libmd_driver.so" "$bin/libmd_driver_mutants.so" "$OUT/"
for t in tokens shapes concurrency trace; do
  f="$OUT/mdc_fuzz_$t"
  cp "$bin/md_fuzz_$t" "$f"
  rm -f "${f}_seed_corpus.zip"
  (cd "$INST/share/mdc/fuzz/seeds/$t" && find . -type f -print | sed 's|^\./||' | zip -q -@ "${f}_seed_corpus.zip")
  cp "$INST/share/mdc/fuzz/dict/$t.dict" "$f.dict"
  # max_len: a trace input is parsed a line at a time and the seeds are whole traces (16 KiB
  # holds 95 % of them; docs/fuzzing.md "trace bounds"); timeout: seconds an input may take
  # under the sanitizer (the concurrency target's lanes are real threads).
  case "$t" in
    trace) max_len=16384 timeout=25 ;;
    concurrency) max_len=4096 timeout=30 ;;
    *) max_len=4096 timeout=25 ;;
  esac
  printf '[libfuzzer]\ndict = mdc_fuzz_%s.dict\nmax_len = %s\ntimeout = %s\n' "$t" "$max_len" "$timeout" > "$f.options"
done
# The system libraries the fuzzers need that a runner image does not have, beside them ($ORIGIN).
for lib in $(ldd "$OUT/mdc_fuzz_tokens" | awk '/libjansson|libsodium/ { print $3 }'); do
  cp -L "$lib" "$OUT/"
done
echo "build.sh: $FUZZING_ENGINE/$SANITIZER fuzzers in $OUT: $(cd "$OUT" && ls mdc_fuzz_* | grep -Ev '[.]|_seed_corpus' | tr '\n' ' ')"
