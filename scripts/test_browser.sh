#!/usr/bin/env bash
# make test-browser: opens a report in headless Chromium (Debian's package, installed when
# missing), takes a screenshot of the first screen and checks it: not blank, the run header across
# the top, the totals on the first screen (reports/tests/png_check.c); and checks in the DOM
# Chromium built that the header and the totals come first. The report is of a fixture store
# written for the purpose (reports/fixture.c: a history with regressions, a mutants run, a fuzz
# campaign), so every section is there. Then (issue 26) the report of a real run: the causes test
# driver replayed on the 227 traces it fails for three causes (conformance/tests/drivers/): its
# first screen must show the causes table with exactly three rows. Output in results/browser/
# (BROWSER_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${BROWSER_OUT:-results/browser}
SCREEN_W=1280
SCREEN_H=800

scripts/deps.sh chromium libpng-dev
test -f "$BUILD/CMakeCache.txt" || cmake -S . -B "$BUILD" -DMD_WERROR=ON >/dev/null
cmake "$BUILD" >/dev/null   # finds libpng if it was just installed
cmake --build "$BUILD" -j "${JOBS:-2}" --target mdc mdc_report_fixture mdc_png_check mdc_test_cause_traces \
  mdc_test_causes_driver

rm -rf "$OUT"
mkdir -p "$OUT"
abs_out=$(cd "$OUT" && pwd)
"$BUILD/reports/mdc_report_fixture" "$OUT/fixture.db" --runs 30 --cases 600
"$BUILD/conformance/mdc/mdc" report --db "$OUT/fixture.db" --out "$OUT/report"

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" "$@" 2>>"$OUT/chromium.log"
}
page="file://$abs_out/report/index.html"
chrome --screenshot="$abs_out/first-screen.png" --window-size=$SCREEN_W,$SCREEN_H "$page" >/dev/null
chrome --screenshot="$abs_out/full-page.png" --window-size=$SCREEN_W,9000 "$page" >/dev/null
chrome --dump-dom "$page" >"$OUT/dom.html"

fail=0
"$BUILD/reports/mdc_png_check" "$OUT/first-screen.png" --screen $SCREEN_H || fail=1
# The DOM as Chromium built it: the run header, then the totals, before any other section.
ids=$(grep -o ' id="[a-z]*"' "$OUT/dom.html" | head -2 | tr -d ' \n')
if [ "$ids" = 'id="run"id="totals"' ]; then
  echo "DOM: the run header and the totals come first"
else
  echo "FAIL: the DOM starts with $ids, not the run header and the totals"
  fail=1
fi
if grep -q 'http' "$OUT/report/index.html"; then
  echo "FAIL: the page names a URL"
  fail=1
fi

# The causes: three causes of 220 failing cases, on the first screen.
mkdir -p "$OUT/causes/traces"
"$BUILD/conformance/tests/mdc_test_cause_traces" "$OUT/causes/traces"
rc=0
"$BUILD/conformance/mdc/mdc" replay --quiet --no-rerun --db "$OUT/causes/causes.db" \
  --driver "$BUILD/conformance/tests/libmdc_test_causes_driver.so" "$OUT/causes/traces" || rc=$?
[ $rc -eq 1 ] || { echo "FAIL: the causes run exited $rc, not 1"; fail=1; }
"$BUILD/conformance/mdc/mdc" report --db "$OUT/causes/causes.db" --out "$OUT/causes/report"
cpage="file://$abs_out/causes/report/index.html"
chrome --screenshot="$abs_out/causes-first-screen.png" --window-size=$SCREEN_W,$SCREEN_H "$cpage" >/dev/null
chrome --dump-dom "$cpage" >"$OUT/causes/dom.html"
"$BUILD/reports/mdc_png_check" "$OUT/causes-first-screen.png" --screen $SCREEN_H --causes 3 || fail=1
ids=$(grep -o ' id="[a-z]*"' "$OUT/causes/dom.html" | head -3 | tr -d ' \n')
groups=$(grep -c '<details class="cause"' "$OUT/causes/dom.html" || true)
if [ "$ids" = 'id="run"id="totals"id="causes"' ] && [ "$groups" = 3 ]; then
  echo "DOM: the run header, the totals, then the causes: 3 groups"
else
  echo "FAIL: the causes report's DOM starts with $ids and has $groups cause groups, not 3 after the totals"
  fail=1
fi
echo "screenshots: $abs_out/first-screen.png, $abs_out/causes-first-screen.png (checked), $abs_out/full-page.png"
exit $fail
