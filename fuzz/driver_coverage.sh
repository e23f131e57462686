#!/usr/bin/env bash
# driver_coverage.sh - what instrumenting a driver buys a campaign (docs/fuzzing.md "Instrumenting
# a driver"): the skeleton driver installed with mdc, built three ways against that install,
#   plain         gcc, as a vendor builds it (no coverage instrumentation)
#   instrumented  the documented command: -DCMAKE_C_COMPILER=afl-clang-fast -DMDC_FUZZ_ENGINE=afl
#   gcov          the documented -DMDC_FUZZ_ENGINE=gcov (gcc --coverage): the yardstick, never fuzzed
# and a campaign of the same length with the installed `mdc fuzz` on each of the first two, both
# from the same single seed (the target's smallest; SEEDS=all: its whole seed corpus), each
# measured by `mdc fuzz --driver-coverage` on the gcov build: the driver's own functions, lines
# and branches its queue reaches. Prints one line per build and a JSON summary.
#   driver_coverage.sh PREFIX WORK [SECONDS] [TARGET] [SEEDS]
# PREFIX: an mdc installed with its fuzz targets (cmake --install build --prefix PREFIX, then
# cmake --install build-fuzz --component fuzz --prefix PREFIX). Exit 0 when the instrumented
# campaign covered more of the driver's lines or branches than the plain one; 1 otherwise; 77
# without afl-clang-fast or gcov.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PREFIX WORK [SECONDS] [TARGET] [one|all]" >&2; exit 2; }
P=$(readlink -f "$1") W=$2 SECS=${3:-60} TARGET=${4:-tokens} SEEDS=${5:-one}
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
build gcov -DCMAKE_C_COMPILER=gcc -DMDC_FUZZ_ENGINE=gcov

# The campaigns' seeds: the target's smallest seed alone (feedback has everything left to find),
# or all of them.
ALL=$P/share/mdc/fuzz/seeds/$TARGET
if [ "$SEEDS" = all ]; then
  IN=$ALL
else
  IN=$W/seeds
  mkdir -p "$IN"
  cp "$(ls -S "$ALL"/* | tail -1)" "$IN/"
fi

declare -A EDGES EXECS QUEUE FN TOTAL LINES LTOTAL BR BTOTAL
for b in plain instrumented; do
  so=$W/$b/libmd_driver_skeleton.so
  out=$("$P/bin/mdc" fuzz --target "$TARGET" --driver "$so" --config backend=auto --seconds "$SECS" --no-db --json --tmin 0 \
        --triage-runs 1 --seeds "$IN" --out "$W/campaign-$b" --driver-coverage "$W/gcov/libmd_driver_skeleton.so" \
        2> "$W/campaign-$b.err") || [ $? -eq 1 ] || fail "the $b campaign failed: $(tail -5 "$W/campaign-$b.err")"
  grep -h "is instrumented\|is not instrumented" "$W/campaign-$b.err" | sed 's/^/  /' || true
  jq -e '.driver_coverage.lines_total > 0' <<< "$out" > /dev/null || fail "the $b campaign measured no driver coverage: $(jq -c .driver_coverage <<< "$out")"
  EDGES[$b]=$(jq -r .edges <<< "$out")
  EXECS[$b]=$(jq -r .execs <<< "$out")
  QUEUE[$b]=$(jq -r .driver_coverage.inputs_replayed <<< "$out")
  read -r FN[$b] TOTAL[$b] LINES[$b] LTOTAL[$b] BR[$b] BTOTAL[$b] < <(jq -r '.driver_coverage |
    "\(.functions_reached) \(.functions_total) \(.lines_covered) \(.lines_total) \(.branches_taken) \(.branches_total)"' <<< "$out")
  echo "driver_coverage: $b ($(jq -r .driver_instrumented <<< "$out")): ${SECS} s of $TARGET from $(ls "$IN" | wc -l) seed(s)," \
       "${EXECS[$b]} execs, ${EDGES[$b]} edges, ${QUEUE[$b]} queue inputs; the driver's own coverage: ${FN[$b]} of ${TOTAL[$b]} functions," \
       "${LINES[$b]} of ${LTOTAL[$b]} lines, ${BR[$b]} of ${BTOTAL[$b]} branches"
done
jq -n --arg t "$TARGET" --argjson s "$SECS" --argjson n "$(ls "$IN" | wc -l)" \
  --argjson pe "${EDGES[plain]}" --argjson ie "${EDGES[instrumented]}" \
  --argjson px "${EXECS[plain]}" --argjson ix "${EXECS[instrumented]}" \
  --argjson pq "${QUEUE[plain]}" --argjson iq "${QUEUE[instrumented]}" \
  --argjson pf "${FN[plain]}" --argjson inf "${FN[instrumented]}" --argjson tf "${TOTAL[plain]}" \
  --argjson pl "${LINES[plain]}" --argjson il "${LINES[instrumented]}" --argjson tl "${LTOTAL[plain]}" \
  --argjson pb "${BR[plain]}" --argjson ib "${BR[instrumented]}" --argjson tb "${BTOTAL[plain]}" \
  '{target: $t, seconds: $s, seeds: $n, functions_total: $tf, lines_total: $tl, branches_total: $tb,
    plain: {execs: $px, edges: $pe, queue: $pq, functions_reached: $pf, lines_covered: $pl, branches_taken: $pb},
    instrumented: {execs: $ix, edges: $ie, queue: $iq, functions_reached: $inf, lines_covered: $il, branches_taken: $ib}}'
[ "${LINES[instrumented]}" -gt "${LINES[plain]}" ] || [ "${BR[instrumented]}" -gt "${BR[plain]}" ] \
  || fail "the instrumented driver's campaign covered no more of the driver's lines or branches than the plain one"
