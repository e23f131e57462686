#!/usr/bin/env bash
# test_reduce.sh MDC MUTANTS_SO CRASH_ENTRY_SO TRACES - `mdc reduce` (docs/mdc-cli.md):
#  1. a recorded workload trace (460 lines) that a mutant of the reference driver fails is
#     reduced to at most a few dozen events; the reduced trace is a valid trace that still fails
#     on the mutant the same way and passes on the reference driver; its header says what it was
#     reduced from;
#  2. bad input: a trace that passes, a TraceError, a driver that crashes on every run: exit 2,
#     a message naming the problem, and no output file (not even a half-written one).
set -euo pipefail
mdc=$1 mutants=$2 crash=$3 traces=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. the workload
out=$tmp/seq.reduced.jsonl
MD_MUTANT=output_alias_unchecked "$mdc" reduce "$traces/workloads/sequence.jsonl" --driver "$mutants" \
  --config backend=sim --out "$out" --quiet > "$tmp/stdout" || fail "reduce exited $?"
grep -q "events ->" "$tmp/stdout" || fail "no summary line: $(cat "$tmp/stdout")"
events=$(grep -v '^#' "$out" | grep -c . )
events=$((events - 1))   # the header
echo "reduced: $(grep -c . "$traces/workloads/sequence.jsonl") lines -> $events events"
[ "$events" -le 40 ] || fail "reduced to $events events, want at most 40"
[ "$events" -ge 1 ] || fail "reduced to nothing"
grep -q '^# mdc reduce: from .*sequence.jsonl' "$out" || fail "no comment naming the original"
grep -q '"name":"workloads/sequence/reduced"' "$out" || fail "the header's name is not marked"
grep -q 'reduced by mdc reduce from workloads/sequence' "$out" || fail "the description does not say"
rc=0
MD_MUTANT=output_alias_unchecked "$mdc" replay --no-db --no-rerun --config backend=sim --driver "$mutants" \
  --json "$out" > "$tmp/mut.json" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "the reduced trace does not fail on the mutant (exit $rc)"
grep -q '"status": "Fail"' "$tmp/mut.json" || fail "the mutant's verdict is not Fail"
"$mdc" replay --no-db --config backend=sim "$out" > /dev/null 2>&1 || fail "the reduced trace fails on the reference driver"

# 1b. --db: the reduced trace recorded on the failing case of the latest replay, shown with its
#     cause by `mdc results --groups` (and its JSON) and in the report's causes
db=$tmp/r.db
MD_MUTANT=output_alias_unchecked "$mdc" replay --db "$db" --no-rerun --config backend=sim --driver "$mutants" \
  --include 'workloads/*' "$traces/workloads" > /dev/null 2>&1 || true
MD_MUTANT=output_alias_unchecked "$mdc" reduce "$traces/workloads/sequence.jsonl" --driver "$mutants" \
  --config backend=sim --out "$tmp/seq2.jsonl" --db "$db" --quiet > /dev/null || fail "reduce --db exited $?"
"$mdc" results --db "$db" --groups > "$tmp/groups.txt" || true
grep -q "reduced: .*seq2.jsonl" "$tmp/groups.txt" || fail "results --groups does not link the reduced trace: $(cat "$tmp/groups.txt")"
"$mdc" report --db "$db" --out "$tmp/report" > /dev/null 2>&1 || true
grep -q "Reduced reproducer: <a href=\"[^\"]*seq2.jsonl\"" "$tmp/report/index.html" || fail "the report's causes do not link it"
rc=0
MD_MUTANT=output_alias_unchecked "$mdc" reduce "$traces/workloads/sequence.jsonl" --driver "$mutants" \
  --config backend=sim --out "$tmp/seq3.jsonl" --db "$db" --run no-such-run --quiet > /dev/null 2> "$tmp/norun.err" || rc=$?
[ "$rc" = 2 ] || fail "reduce --run no-such-run: exit $rc, want 2"
grep -q "no-such-run" "$tmp/norun.err" || fail "the message does not name the run: $(cat "$tmp/norun.err")"
[ -s "$tmp/seq3.jsonl" ] || fail "the reduced trace was not kept when recording it failed"

# 2. bad input: exit 2, a clear message, no output
expect_refused() { # name, expected message part, mdc reduce args...
  local what=$1 msg=$2; shift 2
  local o=$tmp/$what.out rc=0
  "$mdc" reduce "$@" --out "$o" --quiet 2> "$tmp/$what.err" > /dev/null || rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, want 2"
  grep -q -- "$msg" "$tmp/$what.err" || fail "$what: message '$(cat "$tmp/$what.err")' lacks '$msg'"
  [ ! -e "$o" ] || fail "$what: an output file was written"
  ! ls "$tmp" | grep -q "$what.out.tmp" || fail "$what: a temporary file was left"
}
expect_refused passes "passes on this driver" "$traces/basic/device_open_close.jsonl" --config backend=sim
printf '{"mdc_trace": "1.1", "name": "x/bad", "rules": ["r"]}\n{"op": "execute", "prepared": "nothing"}\n' > "$tmp/bad.jsonl"
expect_refused trace_error "TraceError" "$tmp/bad.jsonl" --config backend=sim
expect_refused crashes "crashes even on a trace with no events" "$traces/workloads/sequence.jsonl" --driver "$crash"
expect_refused missing "no-such.jsonl" "$tmp/no-such.jsonl"
printf 'not json\n' > "$tmp/garbage.jsonl"
expect_refused garbage "not a JSON object" "$tmp/garbage.jsonl"
echo "ok"
