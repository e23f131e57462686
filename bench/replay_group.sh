#!/usr/bin/env bash
# bench/replay_group.sh - grouped replay (issue 29): the conformance corpus replayed by
# `mdc replay` with --group G against --group 1 in the same run, traces per second and the ratio,
# on the simulator without a start-up cost and with init_ns (a GPU runtime's start-up, paid by
# the first open_device of each process); whether every case has the same verdict in both; and,
# with the planted state-leak driver (conformance/tests/drivers/group_driver.c, MDC_TEST_STICKY:
# a mem_limit that sticks to later devices) and --shuffle SEED, whether the leak is found as
# OrderDependent naming the same trace before it in every run.
#   bench/replay_group.sh [BUILD] [JOBS]   (default build/, 2; needs mdc, md_driver and
#                                          mdc_test_sticky_driver built)
# Env: INIT_NS (default 200000000), GROUP (default 256), SEEDED_RUNS (default 3), LEAK_SEED (default 6:
# a seed whose order puts a trace that sets mem_limit right before one that needs more; most seeds
# do not, and then nothing is found, rightly).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
JOBS=${2:-2}
INIT_NS=${INIT_NS:-200000000}
GROUP=${GROUP:-256}
SEEDED_RUNS=${SEEDED_RUNS:-3}
LEAK_SEED=${LEAK_SEED:-6}
MDC=$BUILD/conformance/mdc/mdc
STICKY=$BUILD/conformance/tests/libmdc_test_sticky_driver.so
for f in "$MDC" "$STICKY"; do
  [ -e "$f" ] || { echo "replay_group: $f not built (cmake --build $BUILD --target mdc mdc_test_sticky_driver)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "replay_group: python3 missing" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CORPUS=conformance/traces

# replay NAME ARGS...: one replay of the corpus, its JSON in $tmp/NAME.json, wall seconds printed.
replay() {
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$MDC" replay --no-db --quiet --json --jobs "$JOBS" --timeout 120 "$@" "$CORPUS" >"$tmp/$name.json" || true
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

# row LABEL BASE.json GROUPED.json BASE_S GROUPED_S TARGET_RATIO [MIN_RATE]
row() {
  python3 - "$@" <<'EOF'
import json, sys
label, a, b, sa, sb, target = sys.argv[1:7]
min_rate = float(sys.argv[7]) if len(sys.argv) > 7 else 0
ja, jb = json.load(open(a)), json.load(open(b))
sa, sb, target = float(sa), float(sb), float(target)
ra, rb = ja["cases"] / sa, jb["cases"] / sb
va = {r["name"]: r["status"] for r in ja["results"]}
vb = {r["name"]: r["status"] for r in jb["results"]}
diff = sorted(n for n in va if va[n] != vb.get(n)) + sorted(n for n in vb if n not in va)
ok = rb / ra >= target and rb >= min_rate and not diff
print(f"{label:<34} {ja['cases']:>5} {ra:>9.1f} {rb:>9.1f} {rb / ra:>7.2f}x {jb['children']:>8} "
      f"{len(diff):>6}  >= {target:g}x{f', >= {min_rate:g}/s' if min_rate else ''}: {'PASS' if ok else 'MISS'}")
for n in diff[:10]:
    print(f"    verdict differs: {n}: {va.get(n)} (group 1) vs {vb.get(n)} (grouped)")
EOF
}

echo "mdc replay --group: corpus $CORPUS, --jobs $JOBS, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %5s %9s %9s %8s %8s %6s  %s\n' setting cases "g1 /s" "grouped/s" ratio children diffs target
# Without a start-up cost: --group 1 against --group $GROUP, alternating, best of two each.
best() { python3 -c "import sys; print(min(float(x) for x in sys.argv[1:]))" "$@"; }
a1=$(replay g1 --group 1); b1=$(replay gN --group "$GROUP")
a2=$(replay g1 --group 1); b2=$(replay gN --group "$GROUP")
row "sim, no start-up cost (G=$GROUP)" "$tmp/g1.json" "$tmp/gN.json" "$(best "$a1" "$a2")" "$(best "$b1" "$b2")" 2 500
# With init_ns: each child pays it once (one run each: --group 1 is long).
ai=$(replay i1 --group 1 --config "backend=sim;init_ns=$INIT_NS")
bi=$(replay iN --group "$GROUP" --config "backend=sim;init_ns=$INIT_NS")
row "sim, init_ns=$INIT_NS (G=$GROUP)" "$tmp/i1.json" "$tmp/iN.json" "$ai" "$bi" 10
# The default (--group auto) with init_ns, for the record.
bd=$(replay iD --config "backend=sim;init_ns=$INIT_NS")
row "sim, init_ns, --group auto" "$tmp/i1.json" "$tmp/iD.json" "$ai" "$bd" 10

# The planted leak, shuffled with one seed, SEEDED_RUNS times: the same OrderDependent cases,
# each naming the same trace before it.
echo
echo "planted state leak (MDC_TEST_STICKY), --shuffle $LEAK_SEED --group $GROUP, $SEEDED_RUNS runs:"
for i in $(seq 1 "$SEEDED_RUNS"); do
  "$MDC" replay --no-db --quiet --json --jobs "$JOBS" --group "$GROUP" --shuffle "$LEAK_SEED" --driver "$STICKY" "$CORPUS" \
    >"$tmp/leak$i.json" || true
done
python3 - "$tmp" "$SEEDED_RUNS" <<'EOF'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
sets = []
for i in range(1, n + 1):
    j = json.load(open(f"{tmp}/leak{i}.json"))
    sets.append(sorted((r["name"], r.get("preceded_by", "")) for r in j["results"] if r["status"] == "OrderDependent"))
same = all(s == sets[0] for s in sets)
named = all(p for _, p in sets[0])
print(f"  OrderDependent cases per run: {[len(s) for s in sets]}; the same cases and predecessors in every run: "
      f"{'yes' if same else 'NO'}; each names the trace before it: {'yes' if named else 'NO'}: "
      f"{'PASS' if same and named and sets[0] else 'MISS'}")
for name, pred in sets[0][:5]:
    print(f"    {name}  after  {pred}")
EOF
