#!/usr/bin/env bash
# test_driver_coverage.sh - the fuzz_driver_coverage test (docs/fuzzing.md "The driver's own
# coverage"): `mdc fuzz --driver-coverage SO`, with the skeleton driver built with gcc --coverage.
#   test_driver_coverage.sh MDC SKELETON_SO WORK [FUZZ_BUILD]
# MDC: this build's mdc (its md_fuzz_replay and seeds beside it); SKELETON_SO: the skeleton as
# built here (no --coverage). The gcov build: this build installed, the installed skeleton built
# with -DMDC_FUZZ_ENGINE=gcov. Checked:
#   - bad input exits 2 before any campaign, naming the problem: SO missing, SO not built with
#     --coverage, no gcov in PATH;
#   - a campaign (a stand-in afl-fuzz that keeps its seeds as its queue, as test_mdc_fuzz does:
#     no AFL++ needed) replays its queue through the gcov build: the summary line and --json's
#     driver_coverage, whose lines match what gcov's own text report says for the same inputs
#     (replayed here with md_fuzz_replay), and which counts the skeleton's functions only;
#     all seeds reach more of the driver than one seed;
#   - with afl-fuzz and FUZZ_BUILD's md_fuzz_tokens (make fuzz-build), a real 5-second campaign.
# Exit 77 (CTest SKIP) without gcov or gcc; 1 with a message on a failure.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 MDC SKELETON_SO WORK [FUZZ_BUILD]" >&2; exit 2; }
MDC=$(readlink -f "$1") SKEL=$(readlink -f "$2") W=$3 FB=${4:-}
fail() { echo "test_driver_coverage: $*" >&2; exit 1; }
for tool in gcov gcc; do command -v $tool > /dev/null || { echo "test_driver_coverage: SKIP: no $tool"; exit 77; }; done
rm -rf "$W"
mkdir -p "$W"
W=$(readlink -f "$W")
BUILD=$(dirname "$(dirname "$(dirname "$MDC")")")   # <build>/conformance/mdc/mdc
REPLAY=$BUILD/fuzz/md_fuzz_replay SEEDS=$BUILD/fuzz/seeds/tokens
[ -x "$REPLAY" ] && [ -d "$SEEDS" ] || fail "no $REPLAY or $SEEDS"

# The gcov build of the skeleton, as the docs give it: this build installed, the installed
# skeleton configured with -DMDC_FUZZ_ENGINE=gcov (cmake/mdcFuzz.cmake: gcc --coverage).
cmake --install "$BUILD" --prefix "$W/prefix" > "$W/install.log" 2>&1 || fail "cmake --install $BUILD: $(tail -5 "$W/install.log")"
cmake -S "$W/prefix/share/mdc/examples/driver_skeleton" -B "$W/gcov" -DCMAKE_PREFIX_PATH="$W/prefix" \
  -DCMAKE_C_COMPILER=gcc -DMDC_FUZZ_ENGINE=gcov -DMD_BUILD_TESTS=OFF > "$W/gcov.log" 2>&1 \
  && cmake --build "$W/gcov" --target md_driver_skeleton >> "$W/gcov.log" 2>&1 || fail "the gcov skeleton: $(tail -20 "$W/gcov.log")"
GSO=$W/gcov/libmd_driver_skeleton.so OBJ=$W/gcov/CMakeFiles/md_driver_skeleton.dir
ls "$OBJ"/*.gcno > /dev/null 2>&1 || fail "-DMDC_FUZZ_ENGINE=gcov: no .gcno notes in $OBJ"

# Stand-ins (no AFL++): afl-fuzz keeps its -i inputs as its queue; the target opens nothing.
mkdir -p "$W/fake/bin" "$W/fake/build/fuzz"
cat > "$W/fake/bin/afl-fuzz" <<'EOF'
#!/bin/sh
out=; name=; in=
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift;; -M|-S) name=$2; shift;; -i) in=$2; shift;; --) break;; esac; shift; done
d="$out/$name"; mkdir -p "$d/queue" "$d/crashes" "$d/hangs"
i=0; for f in "$in"/*; do cp "$f" "$d/queue/$(printf 'id:%06d,orig:x' $i)"; i=$((i+1)); done
printf 'run_time : 1\nexecs_done : %d\nexecs_per_sec : 1.00\ncorpus_count : %d\nsaved_crashes : 0\nsaved_hangs : 0\nedges_found : 1\n' $i $i > "$d/fuzzer_stats"
EOF
printf '#!/bin/sh\nexit 0\n' > "$W/fake/build/fuzz/md_fuzz_tokens"
chmod +x "$W/fake/bin/afl-fuzz" "$W/fake/build/fuzz/md_fuzz_tokens"
FAKE_PATH=$W/fake/bin:$PATH
# js FILE EXPR: EXPR (Python) of the JSON object d in FILE, printed (python3: no jq needed)
js() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); v = eval(sys.argv[2]); print(json.dumps(v) if isinstance(v, (dict, list, bool)) else v)' "$@"; }

campaign() {   # campaign NAME SEEDS-DIR EXTRA-ARGS...: the --json of a stand-in campaign
  local name=$1 seeds=$2
  shift 2
  PATH=$FAKE_PATH "$MDC" fuzz --target tokens --seconds 1 --no-db --json --tmin 0 --fuzz-build "$W/fake/build" \
    --config backend=auto --seeds "$seeds" --out "$W/$name" "$@" 2> "$W/$name.err"
}

# ---- bad input: exit 2 before the campaign ----
expect_usage() {   # expect_usage NAME MESSAGE-PATTERN ARGS...
  local name=$1 pat=$2 rc=0
  shift 2
  campaign "$name" "$SEEDS" "$@" > /dev/null || rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, want 2: $(cat "$W/$name.err")"
  grep -q -- "$pat" "$W/$name.err" || fail "$name: no '$pat' in: $(cat "$W/$name.err")"
  [ ! -e "$W/$name/afl/main" ] || fail "$name: a campaign started"
  echo "test_driver_coverage: $name: exit 2: $(head -1 "$W/$name.err")"
}
expect_usage missing "No such file" --driver-coverage "$W/none.so"
expect_usage plain "not built with --coverage" --driver-coverage "$SKEL"
mkdir -p "$W/nogcov"
for t in sh cp mkdir printf; do ln -sf "$(command -v $t)" "$W/nogcov/$t"; done
rc=0
PATH=$W/fake/bin:$W/nogcov "$MDC" fuzz --target tokens --seconds 1 --no-db --fuzz-build "$W/fake/build" \
  --out "$W/nogcov-out" --driver-coverage "$GSO" > /dev/null 2> "$W/nogcov.err" || rc=$?
[ $rc -eq 2 ] && grep -q "gcov is not installed" "$W/nogcov.err" || fail "no gcov: exit $rc: $(cat "$W/nogcov.err")"
echo "test_driver_coverage: no gcov: exit 2: $(head -1 "$W/nogcov.err")"

# ---- one seed, then every seed ----
mkdir -p "$W/seed1"
cp "$(ls -S "$SEEDS"/* | tail -1)" "$W/seed1/"
campaign one "$W/seed1" --driver-coverage "$GSO" > "$W/one.json" || fail "one seed: exit $?: $(tail -5 "$W/one.err")"
campaign all "$SEEDS" --driver-coverage "$GSO" > "$W/all.json" || fail "all seeds: exit $?: $(tail -5 "$W/all.json")"
for n in one all; do
  dc="d['driver_coverage']"
  [ "$(js "$W/$n.json" "(${dc}['functions_total'] > 0 and ${dc}['lines_total'] > 0 and ${dc}['branches_total'] > 0
       and ${dc}['functions_reached'] <= ${dc}['functions_total'] and ${dc}['lines_covered'] <= ${dc}['lines_total']
       and ${dc}['branches_taken'] <= ${dc}['branches_total'] and ${dc}['failed_batches'] == 0)")" = true ] \
    || fail "$n: driver_coverage: $(js "$W/$n.json" "$dc")"
  echo "test_driver_coverage: $n: $(js "$W/$n.json" "$dc")"
done
[ "$(js "$W/all.json" "d['driver_coverage']['inputs_replayed']")" -eq "$(ls "$SEEDS" | wc -l)" ] || fail "all: not every queue input replayed"
# The skeleton's own functions only: those gcov's text report lists for its object, less the
# inline ones of mdc's headers (include/md/*.h) it compiled in.
fns=$(cd "$OBJ" && gcov -n -f driver_skeleton.c.o 2> /dev/null | grep -c '^Function ' || true)
mdc_fns=$(cd "$OBJ" && gcov -j -t driver_skeleton.c.o 2> /dev/null | python3 -c 'import json, sys
print(sum(len(f["functions"]) for f in json.load(sys.stdin)["files"] if "/include/md/" in f["file"]))')
fns=$((fns - mdc_fns))
[ "$(js "$W/all.json" "d['driver_coverage']['functions_total']")" -eq "$fns" ] || fail "functions_total is not the skeleton's $fns"
for k in lines_covered branches_taken functions_reached; do
  [ "$(js "$W/all.json" "d['driver_coverage']['$k']")" -gt "$(js "$W/one.json" "d['driver_coverage']['$k']")" ] \
    || fail "every seed reaches no more $k than one seed"
done
PATH=$FAKE_PATH "$MDC" fuzz --target tokens --seconds 1 --no-db --tmin 0 --fuzz-build "$W/fake/build" --seeds "$W/seed1" --config backend=auto \
  --out "$W/text" --driver-coverage "$GSO" > "$W/text.out" 2> "$W/text.err" || fail "text summary: $(cat "$W/text.err")"
grep -q "driver coverage (gcov build $GSO, 1 queue inputs replayed): functions [0-9]* of $fns, lines" "$W/text.out" \
  || fail "no driver coverage line in the summary: $(cat "$W/text.out")"

# gcov's own text report for the same inputs (every seed replayed here) says the same lines.
find "$W/gcov" -name '*.gcda' -delete
find "$SEEDS" -type f -print0 | xargs -0 -n 100 "$REPLAY" --quiet --allow-findings --target tokens --config backend=auto --driver "$GSO" > /dev/null 2>&1 || true
read -r pct total < <(cd "$OBJ" && gcov -n driver_skeleton.c.o 2> /dev/null \
  | awk '/^File .*driver_skeleton.c/ { f = 1; next } f && /^Lines executed:/ { split($2, a, ":"); sub("%", "", a[2]); print a[2], $4; exit }')
want=$(awk -v p="$pct" -v t="$total" 'BEGIN { printf "%d", p * t / 100 + 0.5 }')
got=$(js "$W/all.json" "'%d %d' % (d['driver_coverage']['lines_covered'], d['driver_coverage']['lines_total'])")
[ "$got" = "$want $total" ] || fail "lines covered and total: $got; gcov's text report: $want of $total ($pct %)"
echo "test_driver_coverage: gcov's text report agrees: $pct % of $total lines"

# ---- a real campaign: afl-fuzz and a fuzz build ----
if command -v afl-fuzz > /dev/null && [ -n "$FB" ] && [ -x "$FB/fuzz/md_fuzz_tokens" ]; then
  AFL_SKIP_CPUFREQ=1 "$MDC" fuzz --target tokens --seconds 5 --no-db --json --tmin 0 --fuzz-build "$FB" \
    --driver "$SKEL" --config backend=auto --seeds "$W/seed1" --out "$W/real" --driver-coverage "$GSO" > "$W/real.json" 2> "$W/real.err" \
    || [ $? -eq 1 ] || fail "real campaign: $(tail -5 "$W/real.err")"
  [ "$(js "$W/real.json" "d['driver_coverage']['lines_covered'] > 0 and d['driver_coverage']['inputs_replayed'] >= 1")" = true ] \
    || fail "real campaign: $(js "$W/real.json" "d['driver_coverage']")"
  echo "test_driver_coverage: 5 s with afl-fuzz: $(js "$W/real.json" "[d['execs'], d['edges'], d['driver_coverage']]")"
else
  echo "test_driver_coverage: no afl-fuzz or no $FB/fuzz/md_fuzz_tokens: the real campaign not run"
fi
echo "test_driver_coverage: ok"
