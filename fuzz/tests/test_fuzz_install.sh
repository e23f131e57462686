#!/usr/bin/env bash
# test_fuzz_install.sh - the fuzz_install test (docs/fuzzing.md "Installed"): what `cmake --install`
# of a build puts in place for fuzzing, and what an installed mdc makes of it.
#   test_fuzz_install.sh BUILD WORK [FUZZ_BUILD]
# 1. `cmake --install BUILD --prefix WORK/prefix`: the seeds and dictionaries under
#    share/mdc/fuzz/, md_fuzz_replay under libexec/mdc/ (it runs the installed seeds: its RUNPATH
#    finds the installed driver), the program mutator under lib/mdc/;
# 2. the installed mdc looks for the fuzz targets beside itself (libexec/mdc/afl/md_fuzz_T) and
#    says how to install them; takes --no-db; `mdc mutants` says it needs the source tree
#    (and that --source must be one);
# 3. with FUZZ_BUILD (an AFL++ build, `make fuzz-build`'s build-fuzz) and afl-fuzz: its
#    `--component fuzz` install beside the first, and a 3-second campaign of the installed mdc on
#    the installed target, seeds and dictionary, stored nowhere (--no-db).
# Exit 0 when all hold, 1 with a message naming what did not.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD WORK [FUZZ_BUILD]" >&2; exit 2; }
BUILD=$1 WORK=$2 FUZZ_BUILD=${3:-}
fail() { echo "test_fuzz_install: $*" >&2; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK/fakebin"
P=$WORK/prefix
cmake --install "$BUILD" --prefix "$P" > "$WORK/install.log" || fail "cmake --install $BUILD failed: $(cat "$WORK/install.log")"

# 1. the files
for t in tokens shapes concurrency trace; do
  n=$(ls "$P/share/mdc/fuzz/seeds/$t" 2>/dev/null | wc -l)
  [ "$n" -gt 0 ] || fail "no seeds installed for $t in $P/share/mdc/fuzz/seeds/$t"
  [ -s "$P/share/mdc/fuzz/dict/$t.dict" ] || fail "no dictionary installed for $t"
done
[ ! -e "$P/share/mdc/fuzz/seeds/tokens.stamp" ] || fail "the build's stamp files were installed"
[ -x "$P/libexec/mdc/md_fuzz_replay" ] || fail "md_fuzz_replay not installed in $P/libexec/mdc"
[ -f "$P/lib/mdc/libmd_fuzz_mutator.so" ] || fail "the program mutator not installed in $P/lib/mdc"
"$P/libexec/mdc/md_fuzz_replay" --quiet --target tokens $(ls -d "$P"/share/mdc/fuzz/seeds/tokens/* | head -20) \
  > "$WORK/replay.log" 2>&1 || fail "the installed md_fuzz_replay failed on the installed seeds: $(cat "$WORK/replay.log")"

# 2. the installed mdc. A stand-in afl-fuzz: the targets are looked for only once afl-fuzz is found.
printf '#!/bin/sh\nexit 1\n' > "$WORK/fakebin/afl-fuzz"
chmod +x "$WORK/fakebin/afl-fuzz"
rc=0
err=$(PATH="$WORK/fakebin:$PATH" "$P/bin/mdc" fuzz --target tokens --no-db --seconds 1 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "installed mdc fuzz without installed targets: exit $rc, want 2: $err"
grep -qF "$P/bin/../libexec/mdc/afl/md_fuzz_tokens is not installed" <<< "$err" \
  || fail "installed mdc fuzz does not name the installed target's path: $err"
grep -qF -- "--component fuzz" <<< "$err" || fail "installed mdc fuzz does not say how to install the targets: $err"
"$P/bin/mdc" fuzz --help | grep -qF "(default $P/bin/../libexec/mdc/afl)" \
  || fail "installed mdc fuzz --help does not name the installed fuzz builds as the default"
rc=0
err=$("$P/bin/mdc" mutants --no-db 2>&1) || rc=$?
[ "$rc" -eq 2 ] && grep -qF "needs mdc's source tree" <<< "$err" && grep -qF -- "--source DIR" <<< "$err" \
  || fail "installed mdc mutants: exit $rc, want 2 and a message that it needs the source tree: $err"
rc=0
err=$("$P/bin/mdc" mutants --no-db --source "$WORK" 2>&1) || rc=$?
[ "$rc" -eq 2 ] && grep -qF "not mdc's source tree" <<< "$err" \
  || fail "installed mdc mutants --source NOT-A-TREE: exit $rc: $err"
echo "test_fuzz_install: seeds, dictionaries, md_fuzz_replay and the mutator installed; installed mdc fuzz and mutants say what they need"

# 3. a real fuzz build installed beside it, and a campaign of the installed mdc
if [ -z "$FUZZ_BUILD" ] || ! command -v afl-fuzz > /dev/null || [ ! -x "$FUZZ_BUILD/fuzz/md_fuzz_tokens" ] \
   || ! grep -qs "libexec/mdc/afl" "$FUZZ_BUILD/fuzz/cmake_install.cmake"; then
  echo "test_fuzz_install: no AFL++ fuzz build with install rules at '${FUZZ_BUILD:-}' (make fuzz-build) or no afl-fuzz: the installed campaign is not run"
  exit 0
fi
before=$(cksum < "$P/bin/mdc")
cmake --install "$FUZZ_BUILD" --component fuzz --prefix "$P" > "$WORK/install-fuzz.log" \
  || fail "cmake --install $FUZZ_BUILD --component fuzz failed: $(cat "$WORK/install-fuzz.log")"
for f in md_fuzz_tokens md_fuzz_shapes md_fuzz_concurrency md_fuzz_trace md_fuzz_ceiling libmd_driver.so; do
  [ -e "$P/libexec/mdc/afl/$f" ] || fail "$f not installed in $P/libexec/mdc/afl"
done
[ "$(cksum < "$P/bin/mdc")" = "$before" ] || fail "the fuzz component replaced the installed mdc"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
out=$(cd "$WORK" && "$P/bin/mdc" fuzz --target tokens --seconds 3 --no-db --json --quiet --tmin 0 --out "$WORK/campaign" 2> "$WORK/campaign.err") \
  || fail "the installed campaign failed: $(cat "$WORK/campaign.err")"
python3 - "$out" "$P" <<'PY' || exit 1
import json, sys
j = json.loads(sys.argv[1])
prefix = sys.argv[2]
bad = []
if not j["execs"] > 0: bad.append(f"execs {j['execs']}")
if not j["instances"][0]["binary"].startswith(prefix + "/bin/../libexec/mdc/afl/"): bad.append(f"binary {j['instances'][0]['binary']}")
if j["run_uuid"] is not None: bad.append("a run_uuid with --no-db")
if bad:
    print("test_fuzz_install: the installed campaign: " + ", ".join(bad) + "\n" + sys.argv[1], file=sys.stderr)
    sys.exit(1)
print(f"test_fuzz_install: installed campaign: {j['execs']} execs, {j['edges']} edges, binary {j['instances'][0]['binary']}")
PY
[ ! -e "$WORK/results/mdc.db" ] || fail "--no-db wrote $WORK/results/mdc.db"
echo "test_fuzz_install: ok"
