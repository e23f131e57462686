#!/usr/bin/env python3
"""Static checks of the hand-written corpus (docs/trace-format.md, 1.0 and 1.1): every non-comment line
is one JSON object, the header comes first with the required fields, `name` equals the file's
path under traces/ without .jsonl, names are unique across the corpus, every `as` is new in its
trace, and every name an event uses was produced earlier (or is a literal/forge).
Usage: python3 gen/lint.py [TRACE...]   (default: every traces/**/*.jsonl)"""
import json, os, sys, glob

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_KEYS = {"mdc_trace", "name", "description", "rules", "recorded_on", "requires", "must_pass", "tags"}
REF_KEYS = ("device", "client", "prepared", "token", "src", "dst", "memory", "event", "model", "request",
            "pool", "with")

def refs(ev):
    for k in REF_KEYS:
        v = ev.get(k)
        if isinstance(v, str):
            yield k, v
    for p in ev.get("prepared", []) if isinstance(ev.get("prepared"), list) else []:
        if isinstance(p, str):
            yield "prepared", p
    if ev.get("op") == "request":
        for p in ev.get("pools", []):
            for k in ("memory", "token", "registered"):
                if isinstance(p.get(k), str):
                    yield k, p[k]
    if ev.get("op") == "model":
        for p in ev.get("pools", []):
            yield "pool", p
    for k in ("request", "model"):
        if isinstance(ev.get(k), dict):
            for p in ev[k].get("pools", []):
                for kk in ("memory", "token", "registered"):
                    if isinstance(p, dict) and isinstance(p.get(kk), str):
                        yield kk, p[kk]

def lint(path, seen_names):
    errs = []
    rel = os.path.relpath(path, ROOT)[:-len(".jsonl")]
    names, header = set(), None
    with open(path) as f:
        for no, line in enumerate(f, 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                ev = json.loads(s)
            except ValueError as e:
                errs.append(f"{path}:{no}: bad JSON: {e}")
                continue
            if header is None:
                header = ev
                unknown = set(ev) - HEADER_KEYS
                if unknown: errs.append(f"{path}:{no}: unknown header keys {unknown}")
                if ev.get("mdc_trace") not in ("1.0", "1.1"): errs.append(f"{path}:{no}: mdc_trace is not 1.0 or 1.1")
                if ev.get("name") != rel: errs.append(f"{path}:{no}: name {ev.get('name')!r} != {rel!r}")
                if not ev.get("rules"): errs.append(f"{path}:{no}: empty rules")
                if ev.get("name") in seen_names: errs.append(f"{path}:{no}: duplicate name")
                seen_names.add(ev.get("name"))
                if "must_pass" not in ev: errs.append(f"{path}:{no}: must_pass missing")
                continue
            if "op" not in ev:
                errs.append(f"{path}:{no}: no op"); continue
            for k, v in refs(ev):
                if v not in names:
                    errs.append(f"{path}:{no}: {ev['op']}: {k} {v!r} never produced")
            a = ev.get("as")
            if isinstance(a, str):
                if a in names: errs.append(f"{path}:{no}: name {a!r} reused")
                names.add(a)
    if header is None: errs.append(f"{path}: no header")
    return errs

def main():
    files = sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "**", "*.jsonl"), recursive=True))
    files = [f for f in files if "/workloads/" not in f]
    seen, errs = set(), []
    for f in files:
        errs += lint(f, seen)
    for e in errs: print(e)
    print(f"{len(files)} traces, {len(errs)} problems")
    return 1 if errs else 0

if __name__ == "__main__":
    sys.exit(main())
