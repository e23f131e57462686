#!/usr/bin/env bash
# fuzz_figures.sh - the fuzzing figures of docs/fuzzing.md, measured: one campaign per target (the
# trivial harness's ceiling measured just before, by the same mdc fuzz run), then the sensitivity
# table (each program target against each mutant whose rule concerns it, from the tiny seeds of
# fuzz/tiny/, until the first finding or the limit). Sequential, one core at a time (--jobs 1).
# Usage: scripts/fuzz_figures.sh [SECONDS_PER_TARGET [SECONDS_PER_MUTANT [OUT_DIR]]]
# TARGETS="tokens shapes" and PAIRS="mutant:target ..." pick a part (two parts run side by side on
# two cores, each part on one).
# Needs `make fuzz-build`. Writes OUT_DIR/figures.db, OUT_DIR/<target>.json, OUT_DIR/sensitivity.tsv.
set -uo pipefail
secs=${1:-1800}
msecs=${2:-300}
out=${3:-results/fuzz-figures}
root=$(cd "$(dirname "$0")/.." && pwd)
mdc="$root/build/conformance/mdc/mdc"
mutants="$root/build-fuzz/runtime/libmd_driver_mutants.so"
mkdir -p "$out"
db="$out/figures.db"

if [ -z "${SKIP_CAMPAIGNS:-}" ]; then
  for t in ${TARGETS:-tokens shapes concurrency trace}; do
    echo "== $t: ${secs} s (ceiling first)" >&2
    "$mdc" fuzz --target "$t" --seconds "$secs" --ceiling 60 --fresh --out "$out/$t" --db "$db" --json --quiet \
      > "$out/$t.json"
    python3 - "$out/$t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("%-12s execs/s %7.0f  ceiling %7.0f  ratio %.3f  stability %s%%  edges %d  peak RSS %.1f MiB  findings %d" % (
    d["target"], d["execs_per_sec"], d.get("ceiling_execs_per_sec") or 0, d.get("ratio_to_ceiling") or 0,
    d["stability"], d["edges"], (d["peak_rss_kb"] or 0) / 1024, len(d["findings"])))
for f in d["findings"]:
    print("    %s %s (%d/%d) %s" % (f["kind"], f["signature"], f["reproduced"], f["replays"], f["message"][:160]))
PY
  done
fi

# mutant -> targets whose rule concerns it
pairs="${PAIRS:-mac_unchecked:tokens token_unbound:tokens leak_report_wrong:tokens role_unchecked:tokens
output_alias_unchecked:tokens init_unchecked:tokens stale_slot_token:tokens no_deinit:tokens
copy_to_init_first:shapes no_deinit:shapes fixed_dims_resized:shapes combine_zero_wrong:shapes
short_output_invalid:shapes resize_keeps_dims:shapes init_unchecked:shapes
free_under_kernel:concurrency writers_unguarded:concurrency wait_twice:concurrency release_under_kernel:concurrency}"
seeds="$out/tiny-seeds"
mkdir -p "$seeds"
if [ -z "${SKIP_SENSITIVITY:-}" ]; then
  printf 'mutant\ttarget\tfound\tseconds_to_first\tsignature\treproduced\n' > "$out/sensitivity.tsv"
  for p in $pairs; do
    m=${p%%:*}
    t=${p##*:}
    rm -rf "$seeds/$t"
    "$root/build/fuzz/md_fuzz_seeds" --target "$t" --out "$seeds/$t" "$root/fuzz/tiny" > /dev/null
    echo "== $m on $t (at most ${msecs} s)" >&2
    "$mdc" fuzz --target "$t" --driver "$mutants" --mutant "$m" --seeds "$seeds/$t" --seconds "$msecs" \
      --until-finding --tmin 0 --fresh --out "$out/sens/$m-$t" --db "$db" --json --quiet > "$out/sens-$m-$t.json"
    python3 - "$out/sens-$m-$t.json" "$m" "$t" >> "$out/sensitivity.tsv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
fs = d["findings"]
first = d.get("first_finding_s")
if fs:
    f = min(fs, key=lambda f: f["first_seen_s"] if f["first_seen_s"] is not None else 1e9)
    print("%s\t%s\tyes\t%.1f\t%s\t%d/%d" % (sys.argv[2], sys.argv[3], first if first is not None else -1,
                                          f["signature"], f["reproduced"], f["replays"]))
else:
    print("%s\t%s\tno\t-\t-\t-" % (sys.argv[2], sys.argv[3]))
PY
    tail -1 "$out/sensitivity.tsv" >&2
  done
fi
