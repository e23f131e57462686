#!/usr/bin/env bash
# Runs a Criterion test binary built with ThreadSanitizer.
#
# Criterion 2.4.1's sandbox (boxfort) places its "inheritable arena" at a random address and
# gives up when its probes keep landing in TSan's reserved shadow ranges: the binary aborts at
# start-up with "Could not initialize inheritable arena" before any test runs (upstream
# Snaipe/Criterion#274; about 7 starts in 8 fail on these machines). This wrapper starts the
# binary again only in that case, up to 200 times; any other outcome — a test failure, a TSan
# report, a crash during the tests — is returned as it is.
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq 1 200); do
  "$@" >"$out" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && grep -q "Could not initialize inheritable arena" "$out" && ! grep -q "Synthesis:" "$out"; then
    continue
  fi
  cat "$out"
  exit $rc
done
cat "$out"
echo "criterion-tsan: Criterion could not start under TSan in 200 tries" >&2
exit 1
