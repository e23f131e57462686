#!/usr/bin/env python3
"""test_docs.py - the CTest `docs_current`: the counts and commands the docs state are the ones
the build does, so a change to the corpus, the skeleton or a command's options that the docs do
not follow fails here, naming the file and line.

  test_docs.py --src DIR --mdc MDC --skeleton LIBSKELETON.so --ctest CTEST --cmake CMAKE

1. The skeleton on the whole corpus (mdc replay --json): the table of docs/driver-guide.md
   section 8 (Pass, NotSupported, Fail, Warn, Crash/Timeout/TraceError) and its exit status are
   what mdc reports, and examples/driver_skeleton/mdc.baseline lists exactly the traces that
   fail on it (what `mdc baseline write` lists).
2. Every "N traces" (or "N-trace") on a line of README.md, docs/driver-guide.md or
   docs/mdc-cli.md that names the corpus (or conformance/traces) is the corpus's size; every "N commands" of docs/mdc-cli.md is the number `mdc --help` lists.
3. The shell and CI blocks of the guide's section 6 ("The CTest gate", "In CI"): each option of
   an `mdc COMMAND`, `ctest` or `cmake` line is one that tool's --help lists, each -DMDC_* is one
   the skeleton's CMakeLists.txt reads, and each file under mdc-report/ is one `mdc report`
   writes.
Standard library only (like the corpus generator).
"""
import argparse
import json
import re
import subprocess
import sys

problems = []


def problem(msg):
    problems.append(msg)


def run(cmd, ok=(0,)):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode not in ok:
        sys.exit(f"docs_current: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def main():
    ap = argparse.ArgumentParser()
    for a in ("src", "mdc", "skeleton", "ctest", "cmake"):
        ap.add_argument("--" + a, required=True)
    a = ap.parse_args()
    src = a.src.rstrip("/")
    guide_path = f"{src}/docs/driver-guide.md"
    guide = open(guide_path).read().split("\n")

    # 1. the skeleton's results
    p = run([a.mdc, "replay", "--no-db", "--json", "--quiet", "--timeout", "60", "--driver", a.skeleton,
             f"{src}/conformance/traces"], ok=(0, 1))
    r = json.loads(p.stdout)
    n_traces = r["cases"]
    got = {"Pass": r["passed"], "NotSupported": r["not_supported"], "Fail": r["failed"], "Warn": r["warned"],
           "Crash, Timeout, TraceError": r["crashed"] + r["timed_out"] + r["trace_errors"]}
    sec8 = [i for i, l in enumerate(guide) if l.startswith("## 8.")]
    if not sec8:
        problem(f"{guide_path}: no section '## 8.' (the skeleton on the whole corpus)")
    else:
        seen = set()
        for i in range(sec8[0] + 1, len(guide)):
            if guide[i].startswith("## "):
                break
            m = re.match(r"\| (Pass|NotSupported|Fail|Warn|Crash, Timeout, TraceError) \| (\d+) \|", guide[i])
            if m:
                seen.add(m.group(1))
                if int(m.group(2)) != got[m.group(1)]:
                    problem(f"{guide_path}:{i + 1}: {m.group(1)} {m.group(2)}, but the skeleton gets "
                            f"{got[m.group(1)]} (mdc replay --driver libmd_driver_skeleton.so conformance/traces)")
            m = re.search(r"exit (\d)", guide[i])
            if m and int(m.group(1)) != p.returncode:
                problem(f"{guide_path}:{i + 1}: says exit {m.group(1)}, mdc exits {p.returncode}")
        for k in got:
            if k not in seen:
                problem(f"{guide_path}: section 8 has no '| {k} | N |' row (the skeleton gets {got[k]})")
    # What `mdc baseline write` lists: the statuses that fail a run.
    failing = {x["name"] for x in r["results"]
               if x["status"] in ("Fail", "Crash", "Timeout", "TraceError", "OrderDependent")}
    base_path = f"{src}/examples/driver_skeleton/mdc.baseline"
    listed = {l.split("#")[0].strip() for l in open(base_path)} - {""}
    for n in sorted(failing - listed):
        problem(f"{base_path}: lacks {n}, which fails on the skeleton (regenerate it: docs/driver-guide.md section 6)")
    for n in sorted(listed - failing):
        problem(f"{base_path}: lists {n}, which does not fail on the skeleton, or is no trace")

    # 2. counts in the prose
    top = run([a.mdc, "--help"]).stdout
    commands = []
    for l in top.split("\n"):
        m = re.match(r"^  ([a-z][a-z-]*) ", l)
        if m and m.group(1) not in commands:
            commands.append(m.group(1))
    words = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
    for doc in ("README.md", "docs/driver-guide.md", "docs/mdc-cli.md"):
        for i, l in enumerate(open(f"{src}/{doc}").read().split("\n")):
            # a count on a line about the corpus (not "a driver that fails 200 traces")
            corpus_line = re.search(r"corpus|conformance/traces", l)
            for m in re.finditer(r"(?<![\d.])(\d[\d,]*)[ -](?:`[^`]*` )?traces?\b", l if corpus_line else ""):
                if int(m.group(1).replace(",", "")) != n_traces:
                    problem(f"{doc}:{i + 1}: '{m.group(0)}', but the corpus has {n_traces} traces")
            # (README's "two commands" are make's: only mdc-cli.md counts mdc's)
            for m in re.finditer(r"\b(\d+|" + "|".join(words) + r") commands\b", l if doc.endswith("mdc-cli.md") else ""):
                n = int(m.group(1)) if m.group(1).isdigit() else words[m.group(1)]
                if n != len(commands):
                    problem(f"{doc}:{i + 1}: '{m.group(0)}', but mdc --help lists {len(commands)}: {', '.join(commands)}")

    # 3. the gate and CI blocks of section 6
    helps = {}

    def help_of(tool):
        if tool not in helps:
            if tool.startswith("mdc "):
                cmd = [a.mdc, tool[4:], "--help"]
            else:
                cmd = [a.ctest if tool == "ctest" else a.cmake, "--help"]
            helps[tool] = run(cmd).stdout
        return helps[tool]

    skel_cmake = open(f"{src}/examples/driver_skeleton/CMakeLists.txt").read()
    report_help = help_of("mdc report")
    sec6 = [i for i, l in enumerate(guide) if l.startswith("## 6.")]
    blocks, block, lineno, checked = [], None, 0, 0
    for i in range(sec6[0] if sec6 else len(guide), len(guide)):
        l = guide[i]
        if l.startswith("## ") and i != sec6[0]:
            break
        if l.startswith("```"):
            if block is None:
                block, lineno = [], i + 2
            else:
                blocks.append((lineno, block))
                block = None
        elif block is not None:
            block.append(l)
    kinds = [" ".join(b) for _, b in blocks]
    if not any("ctest --test-dir" in k and "after_script" in k for k in kinds):
        problem(f"{guide_path}: section 6 has no GitLab CI job (a block with after_script: and ctest)")
    if not any("ctest --test-dir" in k and "runs-on" in k for k in kinds):
        problem(f"{guide_path}: section 6 has no GitHub Actions job (a block with runs-on: and ctest)")
    for start, b in blocks:
        for j, l in enumerate(b):
            where = f"{guide_path}:{start + j}"
            for m in re.finditer(r"(?:^|[\s/])(mdc (?:[a-z]+)|ctest|cmake)\b(.*)", l):
                tool, rest = m.group(1), m.group(2)
                if tool == "mdc" or tool.startswith("mdc ") and tool[4:] not in commands:
                    problem(f"{where}: '{tool}': mdc has no such command ({', '.join(commands)})")
                    continue
                k = j
                while rest.rstrip().endswith("\\") and k + 1 < len(b):   # continued lines
                    k += 1
                    rest = rest.rstrip()[:-1] + " " + b[k]
                for o in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest.split("#")[0]):
                    checked += 1
                    if not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", help_of(tool)):
                        problem(f"{where}: '{tool} ... {o}': {tool} --help lists no {o}")
                for d in re.findall(r"-D(MDC_[A-Z_]+)", rest):
                    checked += 1
                    if d not in skel_cmake:
                        problem(f"{where}: -D{d}: examples/driver_skeleton/CMakeLists.txt reads no {d}")
            for f in re.findall(r"mdc-report/([\w.]+)", l):
                if f not in report_help:
                    problem(f"{where}: mdc-report/{f}: mdc report --help names no such file")
            if "build/mdc.db" in l and "/mdc.db" not in skel_cmake:
                problem(f"{where}: build/mdc.db: the skeleton's gate writes no mdc.db in its build")

    print(f"docs_current: corpus {n_traces} traces, skeleton {got}, exit {p.returncode}; "
          f"{len(commands)} commands; {len(blocks)} blocks of section 6, {checked} options checked")
    if problems:
        print("docs_current: the docs and the build disagree:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
