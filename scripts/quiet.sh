#!/usr/bin/env bash
# Runs one step of `make run` / `make test` with its output in a log file: one progress line on
# the terminal, then, on failure, the log's errors and last lines and its path (the Makefile).
#   scripts/quiet.sh build LABEL LOG -- COMMAND...   a build step (cmake --build): "LABEL ... done"
#   scripts/quiet.sh ctest LABEL LOG -- COMMAND...   a ctest run: its summary; on failure the output
#                                                    of every failed test and the list of them
# On a terminal the progress line is updated in place (build percentage, ctest's i/N and test).
# The exit status is COMMAND's. QUIET_TAIL (default 40) lines of the log are shown on failure.
set -uo pipefail
mode=$1 label=$2 log=$3
shift 3
[ "${1:-}" = "--" ] && shift
tail_n=${QUIET_TAIL:-40}
mkdir -p "$(dirname "$log")"
tty=0
[ -t 1 ] && tty=1

# The live line: on a terminal only, rewritten from the step's output as it comes.
progress() {
  if [ $tty -eq 1 ]; then
    awk -v label="$label" '
      /^\[ *[0-9]+%\]/ { match($0, /[0-9]+%/); p = substr($0, RSTART, RLENGTH) }
      /^ *[0-9]+\/[0-9]+ Test +#/ { p = $1; n = $4 }
      { if (p != last) { printf "\r\033[K%s ... %s %s", label, p, n; fflush(); last = p } }'
  else
    cat >/dev/null
  fi
}

start=$(date +%s)
if [ $tty -eq 1 ]; then printf '%s (log: %s) ...' "$label" "$log"; else printf '%s (log: %s)\n' "$label" "$log"; fi
"$@" 2>&1 | tee "$log" | progress
rc=${PIPESTATUS[0]}
secs=$(( $(date +%s) - start ))
[ $tty -eq 1 ] && printf '\r\033[K'

if [ "$mode" = ctest ]; then
  # ctest's own summary: "100% tests passed, 0 tests failed out of N" and the total time.
  summary=$(grep -E 'tests passed|tests failed out of|Total Test time' "$log")
  if [ $rc -eq 0 ]; then
    printf '%s: %s (%ss, log: %s)\n' "$label" "$(echo "$summary" | head -1)" "$secs" "$log"
    exit 0
  fi
  # With --output-on-failure each failed test's output follows its status line, up to the
  # next test's line: print those blocks, then ctest's list of failures.
  printf '%s: FAILED (exit %s)\n' "$label" "$rc"
  awk '/^ *[0-9]+\/[0-9]+ Test +#/ { show = ($0 ~ /\*\*\*|Failed|Timeout|Exception|Not Run/) }
       /^ +Start +[0-9]+:/ || /^[0-9]+% tests passed/ { show = 0 }
       show' "$log"
  echo "$summary"
  sed -n '/^The following tests FAILED:/,$p' "$log" | grep -v '^Errors while running CTest'
  [ -n "$summary" ] || tail -n "$tail_n" "$log"
  printf '%s: FAILED, full log: %s\n' "$label" "$log"
  exit $rc
fi

if [ $rc -eq 0 ]; then
  printf '%s: done (%ss, log: %s)\n' "$label" "$secs" "$log"
  exit 0
fi
printf '%s: FAILED (exit %s); the errors and the last %s lines of %s:\n' "$label" "$rc" "$tail_n" "$log"
grep -E ': (fatal )?error:|^CMake Error|undefined reference' "$log" | head -n 20
echo "..."
tail -n "$tail_n" "$log"
printf '%s: FAILED, full log: %s\n' "$label" "$log"
exit $rc
