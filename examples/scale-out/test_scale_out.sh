#!/usr/bin/env bash
# test_scale_out.sh - the scale_out_examples test (docs/scale-out.md): the GitLab pipeline and the
# Kubernetes Jobs of examples/scale-out/ run as their engines would run them, on a subset of the
# corpus, and their merged verdicts compared with one unsharded run.
#   test_scale_out.sh MDC EXAMPLES_DIR WORK TRACES_DIR...
# For each engine: N shard processes (N from the file: GitLab's parallel:, the Job's completions),
# each the file's own script lines run by sh with the variables the engine sets (GitLab:
# CI_NODE_INDEX 1..N and CI_NODE_TOTAL; Kubernetes: JOB_COMPLETION_INDEX 0..N-1 and the pod's env
# from the file), `mdc` first in PATH, the corpus and results folder pointed at WORK; then the
# merge and report lines. Checked: every trace ran in exactly one shard, each with the verdict the
# unsharded run gave it; merging again changes nothing; a JUnit file per shard, whose test cases
# are the traces. Also the ClusterFuzzLite CI examples of examples/ci/ (GitHub, GitLab): they parse
# as YAML and run ClusterFuzzLite on the .clusterfuzzlite/ build that is there. Exit 0 when all
# hold, 1 with a message naming what did not.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 MDC EXAMPLES_DIR WORK TRACES_DIR..." >&2
  exit 2
fi
MDC=$(readlink -f "$1") EX=$(readlink -f "$2") WORK=$3
shift 3
fail() { echo "test_scale_out: $*" >&2; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK/bin" "$WORK/traces"
WORK=$(readlink -f "$WORK")
# The corpus subset: one folder (the examples take one path) of links to the folders given.
for d in "$@"; do
  [ -d "$d" ] || fail "no trace folder '$d'"
  ln -s "$(readlink -f "$d")" "$WORK/traces/$(basename "$d")"
done
TRACES=$WORK/traces
ln -s "$MDC" "$WORK/bin/mdc"
export PATH="$WORK/bin:$PATH"
# Nothing of the machine running the test decides a shard.
unset CI_NODE_INDEX CI_NODE_TOTAL JOB_COMPLETION_INDEX MDC_SHARD_INDEX MDC_SHARD_TOTAL

# The script items (`    - ...`, one line each) of GitLab job $2 in file $1.
gitlab_script() {
  awk -v job="$2" '
    /^[^ #]/ { injob = ($0 == job ":"); inscript = 0; next }
    injob && /^  script:/ { inscript = 1; next }
    injob && inscript && /^    - / { sub(/^    - /, ""); print; next }
    injob && inscript && /^  [^ ]/ { inscript = 0 }' "$1"
}
# The value of `key: N` under GitLab job $2 in file $1 (parallel:).
gitlab_key() {
  awk -v job="$2" -v key="$3" '
    /^[^ #]/ { injob = ($0 == job ":"); next }
    injob && $1 == key ":" { print $2; exit }' "$1"
}
# The `args: - |` block of the (only) container in Kubernetes file $1, dedented.
k8s_args() {
  awk '
    /^ *- \|$/ { inblock = 1; indent = -1; next }
    inblock {
      if ($0 ~ /^ *$/) next
      match($0, /^ */)
      if (indent < 0) indent = RLENGTH
      if (RLENGTH < indent) { inblock = 0; next }
      print substr($0, indent + 1)
    }' "$1"
}
# The container env of Kubernetes file $1 as NAME=VALUE lines (values unquoted).
k8s_env() {
  awk '
    /^ *- name: / { name = $3; next }
    name != "" && /^ *value: / { v = $0; sub(/^ *value: */, "", v); gsub(/^"|"$/, "", v); print name "=" v; name = ""; next }
    { name = "" }' "$1"
}

# (name, status) of every case of every run in a store, sorted; and the runs' and cases' counts.
verdicts() {
  python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for name, status in sorted(db.execute("SELECT name, status FROM cases")):
    print(f"{name}\t{status}")
PY
}
store_digest() {
  python3 - "$1" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
h = hashlib.sha256()
for table in ("runs", "cases"):
    cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] != "id" and r[1] != "run_id"]
    rows = sorted(map(repr, db.execute(f"SELECT {', '.join(cols)} FROM {table}")))
    h.update(f"{table}:{len(rows)}\n".encode())
    for r in rows:
        h.update(r.encode() + b"\n")
print(h.hexdigest())
PY
}
# Test cases in the JUnit files under folder $1.
junit_cases() {
  cat "$1"/*/junit.xml 2>/dev/null | grep -o '<testcase ' | wc -l
}

# The reference: one unsharded run, same options as the examples' (backend=sim).
mdc replay --quiet --config backend=sim --db "$WORK/unsharded.db" "$TRACES" || [ $? -eq 1 ]
verdicts "$WORK/unsharded.db" > "$WORK/unsharded.txt"
n_traces=$(wc -l < "$WORK/unsharded.txt")
[ "$n_traces" -gt 0 ] || fail "the unsharded run has no case"

# Checks the merged store $2 of engine $1 (N shards: $3) and that a second merge (the function
# $4: the engine's merge step again) changes nothing.
compare() {
  local engine=$1 merged=$2 n=$3 remerge=$4
  [ -f "$merged" ] || fail "$engine: the merge made no store ($merged)"
  verdicts "$merged" > "$WORK/$engine.txt"
  if ! diff -u "$WORK/unsharded.txt" "$WORK/$engine.txt" > "$WORK/$engine.diff"; then
    fail "$engine: merged verdicts differ from the unsharded run's:
$(cat "$WORK/$engine.diff")"
  fi
  local runs
  runs=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM runs WHERE shard_count = ?', (int(sys.argv[2]),)).fetchone()[0])" "$merged" "$n")
  [ "$runs" -eq "$n" ] || fail "$engine: $runs runs of $n shards in the merged store, want $n"
  local before after
  before=$(store_digest "$merged")
  "$remerge" > /dev/null 2>&1 || fail "$engine: merging again failed"
  after=$(store_digest "$merged")
  [ "$before" = "$after" ] || fail "$engine: merging again changed the merged store"
  echo "test_scale_out: $engine: $n shards, $n_traces cases, the unsharded run's verdicts; merging twice changes nothing"
}

# ---- GitLab ------------------------------------------------------------------------------------
GL=$EX/gitlab-ci.yml
N=$(gitlab_key "$GL" replay parallel)
[ -n "$N" ] && [ "$N" -ge 2 ] || fail "gitlab-ci.yml: the replay job has no parallel: N >= 2"
mkdir -p "$WORK/gitlab"
replay=$(gitlab_script "$GL" replay)
merge=$(gitlab_script "$GL" merge)
report=$(gitlab_script "$GL" report)
[ -n "$replay" ] && [ -n "$merge" ] && [ -n "$report" ] || fail "gitlab-ci.yml: a job without script lines"
grep -q -- '--shard auto' <<< "$replay" || fail "gitlab-ci.yml: the replay job does not use --shard auto"
for ((k = 1; k <= N; k++)); do
  # What GitLab sets for job k of a parallel: N job, and the pipeline's variables, the corpus
  # and the working folder pointed at this test's.
  (cd "$WORK/gitlab" && env CI=true GITLAB_CI=true CI_NODE_INDEX=$k CI_NODE_TOTAL=$N CI_JOB_NAME="replay $k/$N" \
     MDC_TRACES="$TRACES" MDC_REPLAY_OPTS="--config backend=sim" sh -ec "$replay") > "$WORK/gitlab/replay-$k.log" 2>&1 \
    || fail "gitlab: replay job $k/$N failed: $(cat "$WORK/gitlab/replay-$k.log")"
done
gitlab_merge() { (cd "$WORK/gitlab" && env CI=true GITLAB_CI=true CI_NODE_TOTAL=1 sh -ec "$merge"); }
gitlab_merge > "$WORK/gitlab/merge.log" 2>&1 || fail "gitlab: the merge job failed: $(cat "$WORK/gitlab/merge.log")"
(cd "$WORK/gitlab" && env CI=true GITLAB_CI=true CI_NODE_TOTAL=1 sh -ec "$report") > "$WORK/gitlab/report.log" 2>&1 \
  || fail "gitlab: the report job failed: $(cat "$WORK/gitlab/report.log")"
compare gitlab "$WORK/gitlab/results/mdc.db" "$N" gitlab_merge
reports=$(ls -d "$WORK"/gitlab/report/*/ 2>/dev/null | wc -l)
[ "$reports" -eq "$N" ] || fail "gitlab: $reports reports, want one per shard ($N)"
[ "$(junit_cases "$WORK/gitlab/report")" -eq "$n_traces" ] \
  || fail "gitlab: the JUnit files hold $(junit_cases "$WORK/gitlab/report") test cases, want $n_traces"

# ---- Kubernetes --------------------------------------------------------------------------------
KR=$EX/k8s-replay-job.yaml KM=$EX/k8s-merge-job.yaml
N=$(awk '$1 == "completions:" { print $2; exit }' "$KR")
grep -q '^  completionMode: Indexed' "$KR" || fail "k8s-replay-job.yaml: not an Indexed Job"
[ -n "$N" ] && [ "$N" -ge 2 ] || fail "k8s-replay-job.yaml: no completions: N >= 2"
total=$(k8s_env "$KR" | sed -n 's/^MDC_SHARD_TOTAL=//p')
[ "$total" = "$N" ] || fail "k8s-replay-job.yaml: MDC_SHARD_TOTAL ($total) is not completions ($N)"
replay=$(k8s_args "$KR")
merge=$(k8s_args "$KM")
[ -n "$replay" ] && [ -n "$merge" ] || fail "k8s: a Job without an args script"
mkdir -p "$WORK/k8s/results"
mapfile -t pod_env < <(k8s_env "$KR" | grep -v -e '^MDC_TRACES=' -e '^MDC_RESULTS=')
for ((k = 0; k < N; k++)); do
  # What the Job controller sets in pod k (JOB_COMPLETION_INDEX, the hostname mdc-replay-k-...),
  # and the container's env, the corpus and the volume pointed at this test's.
  (cd "$WORK/k8s" && env "${pod_env[@]}" JOB_COMPLETION_INDEX=$k HOSTNAME="mdc-replay-$k-x" \
     MDC_TRACES="$TRACES" MDC_RESULTS="$WORK/k8s/results" sh -ec "$replay") > "$WORK/k8s/replay-$k.log" 2>&1 \
    || fail "k8s: pod $k of $N failed: $(cat "$WORK/k8s/replay-$k.log")"
done
k8s_merge() { (cd "$WORK/k8s" && env MDC_RESULTS="$WORK/k8s/results" sh -ec "$merge"); }
k8s_merge > "$WORK/k8s/merge.log" 2>&1 || fail "k8s: the merge Job failed: $(cat "$WORK/k8s/merge.log")"
compare k8s "$WORK/k8s/results/mdc.db" "$N" k8s_merge
[ "$(junit_cases "$WORK/k8s/results/report")" -eq "$n_traces" ] \
  || fail "k8s: the JUnit files hold $(junit_cases "$WORK/k8s/results/report") test cases, want $n_traces"
# ---- environments that give no shard: a usage error naming what is missing ----------------------
# env assignments (a quoted list) | the message must contain
bad() {
  local vars=$1 want=$2 rc=0 err
  err=$(env $vars mdc replay --no-db --quiet --shard "${3:-auto}" "$TRACES" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 2 ] || fail "--shard ${3:-auto} with '$vars': exit $rc, want 2 (usage)"
  grep -qF -- "$want" <<< "$err" || fail "--shard ${3:-auto} with '$vars': '$err' does not say '$want'"
}
bad "" "none of CI_NODE_INDEX/CI_NODE_TOTAL"
bad "CI_NODE_INDEX=0 CI_NODE_TOTAL=4" "CI_NODE_INDEX=0 is not in 1..CI_NODE_TOTAL=4"
bad "CI_NODE_INDEX=5 CI_NODE_TOTAL=4" "CI_NODE_INDEX=5 is not in 1..CI_NODE_TOTAL=4"
bad "CI_NODE_TOTAL=4" "CI_NODE_TOTAL=4 without CI_NODE_INDEX"
bad "JOB_COMPLETION_INDEX=1" "give --shard auto/N or set MDC_SHARD_TOTAL"
bad "JOB_COMPLETION_INDEX=4 MDC_SHARD_TOTAL=4" "JOB_COMPLETION_INDEX=4 is not in 0..3"
bad "JOB_COMPLETION_INDEX=1 MDC_SHARD_TOTAL=4" "auto/3 disagrees with MDC_SHARD_TOTAL=4" auto/3
bad "JOB_COMPLETION_INDEX=x MDC_SHARD_TOTAL=4" "JOB_COMPLETION_INDEX='x' is not a number"
echo "test_scale_out: --shard auto without a usable shard in the environment: usage errors naming it"

# The ClusterFuzzLite examples beside these (examples/ci/, docs/fuzzing.md "OSS-Fuzz and
# ClusterFuzzLite"): YAML (when python3 has its yaml module), and what they run is there: the
# .clusterfuzzlite/ build they name, ClusterFuzzLite's actions or its GitLab entry point.
CI=$EX/../ci ROOT=$EX/../..
for f in Dockerfile build.sh project.yaml; do [ -s "$ROOT/.clusterfuzzlite/$f" ] || fail "no .clusterfuzzlite/$f"; done
if python3 -c 'import yaml' 2> /dev/null; then
  python3 - "$CI/cflite_pr.yml" "$CI/cflite_gitlab-ci.yml" <<'PY' || fail "the ClusterFuzzLite examples: see above"
import sys, yaml
gh, gl = (yaml.safe_load(open(p)) for p in sys.argv[1:])
steps = [s.get("uses", "") for s in gh["jobs"]["PR"]["steps"]]
assert any("clusterfuzzlite/actions/build_fuzzers" in u for u in steps), "cflite_pr.yml: no build_fuzzers step"
assert any("clusterfuzzlite/actions/run_fuzzers" in u for u in steps), "cflite_pr.yml: no run_fuzzers step"
assert gl["variables"]["CFL_PLATFORM"] == "gitlab" and gl["variables"]["LANGUAGE"] == "c", "gitlab: CFL_PLATFORM, LANGUAGE"
base = gl[".clusterfuzzlite"]
assert "clusterfuzzlite-run-fuzzers" in base["image"]["name"], "gitlab: not ClusterFuzzLite's image"
assert any("cifuzz_combined_entrypoint.py" in line for line in base["script"]), "gitlab: no entry point"
for job in ("clusterfuzzlite", "clusterfuzzlite-build", "clusterfuzzlite-batch"):
    assert gl[job]["extends"] == ".clusterfuzzlite" and gl[job]["rules"], "gitlab: job " + job
sans = gl["clusterfuzzlite"]["parallel"]["matrix"][0]["SANITIZER"]
assert sorted(sans) == ["address", "undefined"], "gitlab: the merge request job's sanitizers: %s" % sans
print("test_scale_out: ClusterFuzzLite examples: YAML, GitHub build_fuzzers/run_fuzzers, GitLab jobs",
      ", ".join(k for k in gl if k.startswith("clusterfuzzlite")), "for", "/".join(sans))
PY
else
  echo "test_scale_out: python3 has no yaml module: the ClusterFuzzLite examples checked by text only"
fi
grep -q "cifuzz_combined_entrypoint.py" "$CI/cflite_gitlab-ci.yml" && grep -q "\.clusterfuzzlite/" "$CI/cflite_gitlab-ci.yml" \
  || fail "cflite_gitlab-ci.yml: no ClusterFuzzLite entry point or no .clusterfuzzlite/ named"
echo "test_scale_out: ok"
