#!/usr/bin/env python3
"""corpus.py - writes the generated part of the conformance corpus: the traces that exercise every
rule of the rule table (gen/rules.py) along every variant axis that applies, as
traces/<area>/gen_<what>.jsonl, and the table's report (the rule map and area table of
traces/README.md, between its "generated" markers). Python 3 standard library only.

  python3 gen/corpus.py            rewrite the gen_* traces (stale ones removed) and the README report
  python3 gen/corpus.py --check    generate into a temporary folder and compare with what is committed:
                                   exit 1 naming every trace or report section that differs
  python3 gen/corpus.py --out DIR  write the generated traces and README.md under DIR (a traces root)

It fails (exit 2) when a (rule, axis) of the table has neither a generated trace nor a stated gap,
when a hand-written trace the table names does not exist, or when a hand-written trace is named gen_*."""
import sys

sys.dont_write_bytecode = True   # run from the source tree (the CTest): leave no __pycache__ there

import argparse
import filecmp
import glob
import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)    # conformance/traces
sys.path.insert(0, HERE)

from rules import RULES, RULE_ORDER, AXES, AXIS_ORDER  # noqa: E402
import report  # noqa: E402
import fam_handles  # noqa: E402
import fam_requests  # noqa: E402
import fam_pools  # noqa: E402
import fam_allocate  # noqa: E402
import fam_lifecycle  # noqa: E402
import fam_counts  # noqa: E402
import fam_shapes  # noqa: E402
import fam_numerics  # noqa: E402
import fam_models  # noqa: E402

FAMILIES = [fam_handles, fam_requests, fam_pools, fam_allocate, fam_lifecycle, fam_counts, fam_shapes, fam_numerics,
            fam_models]


def build():
    traces = []
    for fam in FAMILIES:
        for t in fam.generate():
            t.family = fam.FAMILY
            traces.append(t)
    names = set()
    for t in traces:
        if t.name in names:
            raise SystemExit("corpus.py: trace %s generated twice" % t.name)
        names.add(t.name)
    return traces


def hand_written(root):
    out = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*.jsonl"))):
        rel = os.path.relpath(path, root)[:-len(".jsonl")]
        area, what = rel.split(os.sep)
        if area == "workloads" or what.startswith("gen_"):
            continue
        out.append(area + "/" + what)
    return out


def coverage_problems(traces, hand):
    problems = []
    covered = {(rid, axis) for t in traces for rid, axis in t.covers}
    for rid in RULE_ORDER:
        r = RULES[rid]
        for axis in r.axes:
            if (rid, axis) not in covered and axis not in r.gaps:
                problems.append("rule %s (SPEC %s): axis '%s' has no generated trace and no stated gap"
                                % (rid, r.sec, axis))
            if (rid, axis) in covered and axis in r.gaps:
                problems.append("rule %s: axis '%s' is covered but also listed as a gap" % (rid, axis))
        for h in r.hand:
            if h not in hand:
                problems.append("rule %s names hand-written trace %s, which does not exist" % (rid, h))
    for rid, axis in covered:
        if axis not in RULES[rid].axes:
            problems.append("rule %s: a trace covers axis '%s', which the table does not list for it" % (rid, axis))
    return problems


def write_file(path, text):
    """Writes text to path only when it differs, through a temporary file renamed over it: a replay
    or `mdc mutate` reading the corpus meanwhile sees the old trace or the new one, never half of
    one (a trace rewritten in place during a mutate run once gave false kills)."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_tree(out_root, traces, readme_text):
    for t in traces:
        d = os.path.join(out_root, t.area)
        os.makedirs(d, exist_ok=True)
        write_file(os.path.join(d, t.what + ".jsonl"), t.render())
    if readme_text is not None:
        write_file(os.path.join(out_root, "README.md"), readme_text)


def committed_gen(root):
    return sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "*", "gen_*.jsonl")))


def main():
    ap = argparse.ArgumentParser(description="write the generated conformance traces and the rule map")
    ap.add_argument("--check", action="store_true", help="compare with the committed corpus instead of writing")
    ap.add_argument("--out", help="write under this folder instead of the corpus")
    ap.add_argument("--root", default=ROOT, help="the corpus (default: this generator's traces/)")
    a = ap.parse_args()
    traces = build()
    hand = hand_written(a.root)
    problems = coverage_problems(traces, hand)
    problems += ["hand-written trace %s/%s is named gen_*: the generator owns those" % tuple(h.split("/"))
                 for h in hand if h.split("/")[1].startswith("gen_")]
    if problems:
        for p in problems:
            print("corpus.py: " + p, file=sys.stderr)
        return 2
    with open(os.path.join(a.root, "README.md")) as f:
        readme = report.update_readme(f.read(), traces, hand, a.root)
    if a.out:
        write_tree(a.out, traces, readme)
        print("corpus.py: %d traces written under %s" % (len(traces), a.out))
        return 0
    if a.check:
        tmp = tempfile.mkdtemp(prefix="mdc-corpus-")
        try:
            write_tree(tmp, traces, readme)
            want = committed_gen(tmp)
            have = committed_gen(a.root)
            diffs = ["missing (not committed): " + p for p in sorted(set(want) - set(have))]
            diffs += ["stale (committed, no longer generated): " + p for p in sorted(set(have) - set(want))]
            for p in sorted(set(want) & set(have)):
                if not filecmp.cmp(os.path.join(tmp, p), os.path.join(a.root, p), shallow=False):
                    diffs.append("differs: " + p)
            if not filecmp.cmp(os.path.join(tmp, "README.md"), os.path.join(a.root, "README.md"), shallow=False):
                diffs.append("differs: README.md (the generated rule map or area table)")
        finally:
            shutil.rmtree(tmp)
        if diffs:
            for d in diffs:
                print("corpus.py --check: " + d)
            print("corpus.py --check: the committed corpus is not what gen/corpus.py writes now "
                  "(%d differences); run python3 conformance/traces/gen/corpus.py and commit the result" % len(diffs))
            return 1
        print("corpus.py --check: %d generated traces and the README report are up to date" % len(traces))
        return 0
    for p in committed_gen(a.root):
        os.remove(os.path.join(a.root, p))
    write_tree(a.root, traces, readme)
    print("corpus.py: %d traces written, README.md report updated" % len(traces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
