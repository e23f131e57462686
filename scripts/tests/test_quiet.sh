#!/usr/bin/env bash
# test_quiet.sh - the CTest `make_quiet_steps`: scripts/quiet.sh, which keeps `make run` and
# `make test` short (Makefile), on stand-ins for a build and a ctest run: a step that passes is
# two lines (what runs and its log, then done), its output all in the log; a build that fails
# shows the compiler's error, the log's last lines and its path, with its exit status; a ctest
# run that passes shows ctest's summary line; one that fails shows each failed test's output
# and ctest's list of failures, and none of the passing tests.
set -uo pipefail
quiet=$(cd "$(dirname "$0")/.." && pwd)/quiet.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
check() {  # check WHAT CONDITION...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fails=$((fails + 1)); fi
}
lines() { wc -l < "$1"; }

# 1. a build that passes: 300 lines of output, 2 on the terminal
"$quiet" build "build b/" "$work/b/build.log" -- \
  bash -c 'for i in $(seq 300); do echo "[ $((i / 3))%] Building C object $i.o"; done' > "$work/out1"
rc=$?
check "a passing build exits 0 (got $rc)" test $rc -eq 0
check "a passing build prints 2 lines (got $(lines "$work/out1"))" test "$(lines "$work/out1")" -eq 2
check "a passing build names its log" grep -q "log: $work/b/build.log" "$work/out1"
check "a passing build says done" grep -q "build b/: done" "$work/out1"
check "the log has the build's 300 lines" test "$(lines "$work/b/build.log")" -eq 300

# 2. a build that fails: the error, the last lines, the path, the status
"$quiet" build "build f/" "$work/f/build.log" -- bash -c '
  for i in $(seq 200); do echo "[ 10%] Building C object $i.o"; done
  echo "/src/x.c:3:7: error: expected ; before } token"
  for i in $(seq 100); do echo "[ 20%] Building C object late$i.o"; done
  echo "gmake: *** [Makefile:146: all] Error 2"; exit 2' > "$work/out2"
rc=$?
check "a failing build exits with its status 2 (got $rc)" test $rc -eq 2
check "a failing build shows the compiler's error" grep -q "x.c:3:7: error: expected" "$work/out2"
check "a failing build shows the log's last line" grep -q "gmake: \*\*\* \[Makefile:146: all\] Error 2" "$work/out2"
check "a failing build names its log" grep -q "FAILED, full log: $work/f/build.log" "$work/out2"
check "a failing build stays short (got $(lines "$work/out2") lines)" test "$(lines "$work/out2")" -lt 70

# 3. ctest that passes: its summary line
cat > "$work/ctest_ok" <<'EOF'
Test project /b
    Start 1: a
1/2 Test #1: a ................   Passed    0.01 sec
    Start 2: b
2/2 Test #2: b ................   Passed    0.02 sec

100% tests passed, 0 tests failed out of 2

Total Test time (real) =   0.05 sec
EOF
"$quiet" ctest "ctest c/" "$work/c/ctest.log" -- cat "$work/ctest_ok" > "$work/out3"
rc=$?
check "passing tests exit 0 (got $rc)" test $rc -eq 0
check "passing tests print 2 lines (got $(lines "$work/out3"))" test "$(lines "$work/out3")" -eq 2
check "passing tests show ctest's summary" grep -q "ctest c/: 100% tests passed, 0 tests failed out of 2" "$work/out3"

# 4. ctest that fails: the failed test's output and the list, not the passing ones
cat > "$work/ctest_bad" <<'EOF'
Test project /b
    Start 1: good_one
1/3 Test #1: good_one .........   Passed    0.01 sec
    Start 2: bad_one
2/3 Test #2: bad_one ..........***Failed    0.02 sec
[----] test_x.c:12: Assertion failed: the token was refused
[FAIL] token::reused_slot
    Start 3: good_two
3/3 Test #3: good_two .........   Passed    0.01 sec

67% tests passed, 1 tests failed out of 3

Total Test time (real) =   0.05 sec

The following tests FAILED:
	  2 - bad_one (Failed)
Errors while running CTest
EOF
"$quiet" ctest "ctest d/" "$work/d/ctest.log" -- bash -c "cat '$work/ctest_bad'; exit 8" > "$work/out4"
rc=$?
check "failing tests exit with ctest's status 8 (got $rc)" test $rc -eq 8
check "failing tests show the failed test's output" grep -q "Assertion failed: the token was refused" "$work/out4"
check "failing tests show ctest's list" grep -q "2 - bad_one (Failed)" "$work/out4"
check "failing tests show no passing test" bash -c "! grep -q good_ '$work/out4'"
check "failing tests name the log" grep -q "FAILED, full log: $work/d/ctest.log" "$work/out4"

if [ $fails -ne 0 ]; then
  for f in "$work"/out*; do echo "--- $f"; cat "$f"; done
  exit 1
fi
echo "make_quiet_steps: all checks passed"
