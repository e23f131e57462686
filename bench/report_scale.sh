#!/usr/bin/env bash
# bench/report_scale.sh - how long `mdc report` takes and how much memory it holds on a large
# store: 50 runs of 2,010 cases (100,500 case results, with a mutants run and a fuzz campaign),
# and a store whose one run has 100,000 cases (with its baseline of as many), against a small
# store (one run of 2,010 cases) measured in the same run. Targets (issue 13): under 5 s and
# 256 MiB. Stores are written by mdc_report_fixture into a temporary folder, never committed.
#   bench/report_scale.sh [BUILD]      (default build/; needs mdc and mdc_report_fixture built)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MDC=$BUILD/conformance/mdc/mdc
FIX=$BUILD/reports/mdc_report_fixture
for f in "$MDC" "$FIX"; do [ -x "$f" ] || { echo "report_scale: $f not built (cmake --build $BUILD --target mdc mdc_report_fixture)" >&2; exit 2; }; done
[ -x /usr/bin/time ] || { echo "report_scale: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$FIX" "$tmp/small.db" --runs 1 --cases 2010 2>/dev/null
"$FIX" "$tmp/history.db" --runs 50 --cases 2010 2>/dev/null
"$FIX" "$tmp/one_run.db" --runs 2 --cases 100000 2>/dev/null

printf '%-34s %9s %9s %9s %12s %8s\n' store cases seconds "peak MiB" "vs small" target
for s in small history one_run; do
  cases=$(sqlite3 "$tmp/$s.db" "SELECT count(*) FROM cases" 2>/dev/null || echo "?")
  best=""
  rss=0
  # Best of three: the machines are shared.
  for i in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$MDC" report --quiet --db "$tmp/$s.db" --out "$tmp/report_$s"
    read -r sec kb <"$tmp/t"
    if [ -z "$best" ] || awk "BEGIN{exit !($sec < $best)}"; then best=$sec; fi
    [ "$kb" -gt "$rss" ] && rss=$kb
  done
  [ "$s" = small ] && small=$best
  ratio=$(awk "BEGIN{printf \"%.1fx\", ($small > 0 ? $best / $small : 0)}")
  ok=$(awk "BEGIN{print ($best < 5 && $rss < 262144) ? \"PASS\" : \"MISS\"}")
  printf '%-34s %9s %9s %9.1f %12s %8s\n' "$s" "$cases" "$best" "$(awk "BEGIN{print $rss/1024}")" "$ratio" "$ok"
done
