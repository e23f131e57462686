#!/usr/bin/env bash
# driver_coverage.sh - what instrumenting a driver buys a campaign (docs/fuzzing.md "Instrumenting
# a driver"): the skeleton driver installed with mdc, built three ways against that install,
#   plain         gcc, as a vendor builds it (no coverage instrumentation)
#   instrumented  the documented command: -DCMAKE_C_COMPILER=afl-clang-fast -DMDC_FUZZ_ENGINE=afl
#   gcov          gcc --coverage: the yardstick, never fuzzed
# a campaign of the same length with the installed `mdc fuzz` on each of the first two, then each
# campaign's queue replayed (installed md_fuzz_replay) through the gcov build: the driver's own
# functions (and lines) the campaign reached. Prints one line per build and a JSON summary.
#   driver_coverage.sh PREFIX WORK [SECONDS] [TARGET]
# PREFIX: an mdc installed with its fuzz targets (cmake --install build --prefix PREFIX, then
# cmake --install build-fuzz --component fuzz --prefix PREFIX). Exit 0 when the instrumented
# campaign counted more edges than the plain one (its driver's edges are in the map) and reached
# at least as many of the driver's functions; 1 otherwise; 77 without afl-clang-fast or gcov.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PREFIX WORK [SECONDS] [TARGET]" >&2; exit 2; }
P=$(readlink -f "$1") W=$2 SECS=${3:-60} TARGET=${4:-tokens}
fail() { echo "driver_coverage: $*" >&2; exit 1; }
for tool in afl-clang-fast afl-fuzz gcov gcc; do
  command -v $tool > /dev/null || { echo "driver_coverage: SKIP: no $tool"; exit 77; }
done
[ -x "$P/libexec/mdc/afl/md_fuzz_$TARGET" ] || fail "$P/libexec/mdc/afl/md_fuzz_$TARGET: no installed fuzz build"
rm -rf "$W"
mkdir -p "$W"
W=$(readlink -f "$W")
SK=$P/share/mdc/examples/driver_skeleton
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1

build() {   # build NAME CMAKE-ARGS...
  local name=$1
  shift
  cmake -S "$SK" -B "$W/$name" -DCMAKE_PREFIX_PATH="$P" "$@" > "$W/$name.log" 2>&1 \
    && AFL_QUIET=1 cmake --build "$W/$name" >> "$W/$name.log" 2>&1 || fail "building the $name skeleton: $(tail -20 "$W/$name.log")"
}
build plain -DCMAKE_C_COMPILER=gcc
build instrumented -DCMAKE_C_COMPILER=afl-clang-fast -DMDC_FUZZ_ENGINE=afl
build gcov -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage

# Functions and lines of the driver the inputs in queue dir $1 reach, measured on the gcov build.
measure() {
  find "$W/gcov" -name '*.gcda' -delete
  find "$1" -maxdepth 1 -type f -name 'id:*' -print0 \
    | xargs -0 -r -n 200 "$P/libexec/mdc/md_fuzz_replay" --quiet --allow-findings --target "$TARGET" --config backend=auto \
        --driver "$W/gcov/libmd_driver_skeleton.so" > /dev/null 2>&1 || true
  local gcda
  gcda=$(find "$W/gcov" -name 'driver_skeleton.c.gcda' | head -1)
  [ -n "$gcda" ] || { echo "0 0 0.00"; return; }
  (cd "$(dirname "$gcda")" && gcov -n -f "$gcda" 2> /dev/null) | awk '
    /^Function / { infn = 1; nfn++; next }
    infn && /^Lines executed:/ { split($2, a, ":"); if (a[2] + 0 > 0) reached++; infn = 0; next }
    /^File .*driver_skeleton.c/ { infile = 1; next }
    infile && /^Lines executed:/ { split($2, a, ":"); lines = a[2]; infile = 0 }
    END { printf "%d %d %s\n", reached, nfn, lines }'
}

declare -A EDGES EXECS FN TOTAL LINES
for b in plain instrumented; do
  so=$W/$b/libmd_driver_skeleton.so
  out=$("$P/bin/mdc" fuzz --target "$TARGET" --driver "$so" --config backend=auto --seconds "$SECS" --no-db --json --tmin 0 \
        --triage-runs 1 --out "$W/campaign-$b" 2> "$W/campaign-$b.err") || [ $? -eq 1 ] \
    || fail "the $b campaign failed: $(tail -5 "$W/campaign-$b.err")"
  grep -h "instrumented\|warning" "$W/campaign-$b.err" | sed 's/^/  /' || true
  EDGES[$b]=$(jq -r .edges <<< "$out")
  EXECS[$b]=$(jq -r .execs <<< "$out")
  read -r FN[$b] TOTAL[$b] LINES[$b] < <(measure "$W/campaign-$b/afl/main/queue")
  echo "driver_coverage: $b ($(jq -r .driver_instrumented <<< "$out")): ${SECS} s of $TARGET, ${EXECS[$b]} execs," \
       "${EDGES[$b]} edges; the driver's own coverage: ${FN[$b]} of ${TOTAL[$b]} functions reached, ${LINES[$b]} of its lines"
done
jq -n --arg t "$TARGET" --argjson s "$SECS" \
  --argjson pe "${EDGES[plain]}" --argjson ie "${EDGES[instrumented]}" \
  --argjson pf "${FN[plain]}" --argjson inf "${FN[instrumented]}" --argjson tf "${TOTAL[plain]}" \
  --arg pl "${LINES[plain]}" --arg il "${LINES[instrumented]}" \
  '{target: $t, seconds: $s, functions_total: $tf,
    plain: {edges: $pe, driver_functions: $pf, driver_lines: $pl},
    instrumented: {edges: $ie, driver_functions: $inf, driver_lines: $il}}'
[ "${EDGES[instrumented]}" -gt "${EDGES[plain]}" ] || fail "the instrumented driver's campaign counted no more edges"
[ "${FN[instrumented]}" -ge "${FN[plain]}" ] || fail "the instrumented driver's campaign reached fewer of its functions"
