"""report.py - the rule table's report, written into traces/README.md between its GENERATED markers:
the table of areas (hand-written and generated traces per area) and the rule map (every rule of
the table, every axis, the traces that exercise it, the gaps)."""
import glob
import json
import os
from collections import OrderedDict

from rules import RULES, RULE_ORDER, AXES, AXIS_ORDER

CONTRACT = "../../docs/contract.md"

# What each area covers (the layout table's last column).
AREA_TEXT = OrderedDict([
    ("basic", "[§1](%s#s1), [§5](%s#s5), [§8.12](%s#s8.12): what any driver passes first, using no model, buffer or "
              "execution that succeeds — devices, config keys, capabilities, clients and their leak reports, client "
              "handles checked and unpredictable, never-issued handles of every kind refused at every entry point, a "
              "NULL device (`docs/driver-guide.md`; the skeleton driver passes all of them)" % ((CONTRACT,) * 3)),
    ("pools", "§2, 8.2: pool kinds per use, validation before mapping (each defect at every entry point), BLOB and "
              "non-BLOB hardware buffer geometry (8.13), access rights of every kind at every use (8.14), MMAP_FD "
              "windows at unaligned offsets, constant storage ranges and offsets that wrap (8.17), request-arg bounds "
              "and lengths, token-arg offset/length, unused invalid pools"),
    ("models", "§7: float32 supported, quant8 reported unsupported (a TENSOR_INT32 bias with a scale is valid, v1.2); "
               "8.15: every kind of invalid graph and parameter refused by get_supported_operations and prepare_model, "
               "alone and beside an unsupported operation, and accepted once made valid"),
    ("allocate", "§3 allocate on input and output roles: prepared handles, roles, indexes, probability (NaN, "
                 "infinities), duplicates, identity of prepared models, operand agreement across directions, scalar "
                 "roles, dims; `combine_*`: the combine rule seen through initial dims; unservable sizes"),
    ("copy", "§3 copy_from / copy_to: dims, sizes (8.17: dims whose byte size does not fit), failures of every "
             "cause uninitialize and keep current dims (8.8), size-before-init order, pools and their access rights "
             "(8.14)"),
    ("execute", "§2 request arguments, §4 request validation, 8.1, 8.5-8.7, 8.14 (access rights), 8.17 (sizes and "
                "ranges that wrap): every rule on the input and the output side, through execute and execute_async, "
                "with what a failure leaves checked after it"),
    ("shapes", "§4, 8.1: OUTPUT_INSUFFICIENT_SIZE and shapes for every output position (dims known or produced, "
               "sync and async), a length of 0 included; 8.16: nothing written to any pool output and the request's "
               "device outputs uninitialized, dims kept; shared pools with the bytes outside every output checked; "
               "§3 never for device memory"),
    ("dynamic", "§3 dynamic shapes: size from execution / copy_from, resizing (sync and async), fixed dims never "
                "resized; 8.6 dims kept after a failure, checked before initialization"),
    ("deinit", "§4 every failure uninitializes the request's device outputs (every position, validation and run "
               "time, sync and async) and only them; 8.8 dims kept"),
    ("clients", "§5 tokens/handles bound to their client, close_client, leak reports (8.10: buffers resized by "
                "executions and copies, failures, never written), hundreds of clients and events"),
    ("tokens", "§5 the handle kind x entry point matrix (a token where an event goes ... another device's, small "
               "literals, neighbours of live values), a NULL device at every entry point (8.18), forged / "
               "never-issued / freed / reused-slot handles of every kind, one slot reused 1,000 times per kind, 5,000 "
               "live tokens; 8.12 predictability per kind"),
    ("async", "§4 execute_async / wait_event: results, consumed events (failed ones too, 8.9), validation without "
              "an event, timeouts, release and close while in flight (§6)"),
    ("concurrency", "§6 concurrent readers, racing writers with invariants, free_buffer under async kernels, "
                    "close_client during calls"),
    ("faults", "simulator fault plans (`requires: [\"sim\"]`): alloc_fail, copy_fail, kernel_fail, device_lost, "
               "stall (a held async execution: deterministic MISSED_DEADLINE_TRANSIENT, frees, releases and "
               "close_client under it), mem_limit, malformed plans; refused calls interleaved take no number"),
    ("registered", "[§9](%s#s9) registered pools (trace format 1.1, `requires: [\"registered_pools\"]`): used as "
                   "their descriptor with tokens and descriptors, client binding, dead after unregister and after "
                   "`close_client` (not counted as leaks), forged/stale/foreign handles, unregister during async "
                   "executions, the client closing or replacing its fd, registration validating the descriptor; "
                   "`not_a_pool_handle_rejected_by_every_driver` holds for drivers without §9 too" % CONTRACT),
    ("fuzz", "findings of the fuzz targets (`docs/fuzzing.md`), exported by `mdc fuzz` (minimised, expecting what "
             "SPEC allows): §8.1 a short output with fully known dims is OUTPUT_INSUFFICIENT_SIZE; §8.10 leak report "
             "bytes are the current size of a buffer shrunk in place; §3/8.3 dims not fully known are no size, whatever the "
             "order of their axes; and regressions of the fuzz oracle's own faults (written by `md_fuzz_replay --trace`, "
             "not minimised): §5 another client's or a forged client's wait racing the owner's calls leaves the event "
             "live; §2 a prot 0 pool may be refused before anything else; §8.3 a temporary past the device may run "
             "out before the output's rank is found to disagree"),
    ("numerics", "§7 operation semantics: ADD/SUB/MUL broadcasting of either and both operands under every fused "
                 "activation, RELU, FULLY_CONNECTED, SOFTMAX and CONCATENATION on every axis of ranks 1-4, RESHAPE; "
                 "NaN and infinities"),
])


def header_of(path):
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s and not s.startswith("#"):
                return json.loads(s)
    return {}


def link(sec):
    return "[§%s](%s#s%s)" % (sec, CONTRACT, sec)


def group(names):
    """Trace names listed compactly: names sharing a stem are written stem{a,b,c}."""
    stems = OrderedDict()
    for n in sorted(names):
        area, what = n.split("/", 1)
        if "__" in what:
            stem, tail = what.rsplit("__", 1)
            stem += "__"
        elif "_" in what:
            stem, tail = what.rsplit("_", 1)
            stem += "_"
        else:
            stem, tail = what, ""
        stems.setdefault(area + "/" + stem, []).append(tail)
    out = []
    for stem, tails in stems.items():
        if len(tails) == 1:
            out.append("`%s%s`" % (stem, tails[0]))
        else:
            out.append("`%s{%s}`" % (stem, ",".join(tails)))
    return ", ".join(out)


def areas_table(traces, hand, root):
    gen_by_area, hand_by_area, nmp = {}, {}, {}
    for t in traces:
        gen_by_area[t.area] = gen_by_area.get(t.area, 0) + 1
        if not t.must_pass:
            nmp[t.area] = nmp.get(t.area, 0) + 1
    for h in hand:
        area = h.split("/")[0]
        hand_by_area[area] = hand_by_area.get(area, 0) + 1
        if not header_of(os.path.join(root, h + ".jsonl")).get("must_pass", True):
            nmp[area] = nmp.get(area, 0) + 1
    areas = list(AREA_TEXT) + sorted((set(gen_by_area) | set(hand_by_area)) - set(AREA_TEXT))
    lines = ["| area | hand-written | generated | not must-pass | covers |", "|---|---|---|---|---|"]
    tot = [0, 0, 0]
    for a in areas:
        h, g, n = hand_by_area.get(a, 0), gen_by_area.get(a, 0), nmp.get(a, 0)
        tot = [tot[0] + h, tot[1] + g, tot[2] + n]
        lines.append("| `%s/` | %d | %d | %d | %s |" % (a, h, g, n, AREA_TEXT.get(a, "")))
    lines.append("| **all** | **%d** | **%d** | **%d** | %d traces (`workloads/`, recorded, not counted) |" % (
        tot[0], tot[1], tot[2], tot[0] + tot[1]))
    return "\n".join(lines)


def rule_map(traces):
    by = {}
    for t in traces:
        for rid, axis in t.covers:
            by.setdefault((rid, axis), set()).add(t.name)
    short = {"side": "side", "handle": "handle", "entry": "entry", "after_failure": "after failure",
             "counts": "past a size", "geometry": "geometry", "shared_pool": "shared pools", "numerics": "numerics",
             "leaks": "leaks", "predictability": "8.12"}
    out = ["Generated by `gen/corpus.py` from the rule table `gen/rules.py` (do not edit by hand). A cell is the "
           "number of generated traces exercising the rule along that axis; `gap` means no trace can (the reason is "
           "in the rule's entry below), `n*` that part of the axis cannot be reached; `·` means the axis does not "
           "apply. Hand-written traces are the base case of each rule.", "",
           "Axes: " + "; ".join("**%s** — %s" % (short[a], AXES[a][1]) for a in AXIS_ORDER) + ".", "",
           "| rule | § | broken: | side | hand | " + " | ".join(short[a] for a in AXIS_ORDER) + " |",
           "|---|---|---|---|---|" + "---|" * len(AXIS_ORDER)]
    for rid in RULE_ORDER:
        r = RULES[rid]
        cells = []
        for a in AXIS_ORDER:
            if a not in r.axes:
                cells.append("·")
            elif a in r.gaps:
                cells.append("gap")
            else:
                n = len(by.get((rid, a), ()))
                cells.append("%d%s" % (n, "*" if a in r.partial else ""))
        out.append("| [%s](#rule-%s) | %s | %s | %s | %d | %s |" % (
            rid, rid.replace(".", "-").replace("_", "-"), link(r.sec), r.status, r.side, len(r.hand), " | ".join(cells)))
    out.append("")
    for rid in RULE_ORDER:
        r = RULES[rid]
        out.append('<a id="rule-%s"></a>' % rid.replace(".", "-").replace("_", "-"))
        out.append("**%s** (%s) — %s. Entry points: %s. Broken: %s; side: %s." % (
            rid, link(r.sec), r.text, ", ".join("`%s`" % e for e in r.entries) or "none (not reachable)",
            r.status, r.side))
        if r.note:
            out.append("Note: %s." % r.note)
        out.append("")
        out.append("* hand-written: %s" % (", ".join("`%s`" % h for h in r.hand) or "none"))
        for a in r.axes:
            names = sorted(by.get((rid, a), ()))
            if a in r.gaps:
                out.append("* %s: **gap** — %s" % (short[a], r.gaps[a]))
                continue
            txt = group(names)
            if a in r.partial:
                txt += " (not reached: %s)" % r.partial[a]
            if len(names) > 12:
                out.append("* %s (%d): <details><summary>%d traces</summary>%s</details>" % (short[a], len(names),
                                                                                          len(names), txt))
            else:
                out.append("* %s (%d): %s" % (short[a], len(names), txt))
        out.append("")
    nmp = sorted(t.name for t in traces if not t.must_pass)
    out.append("Generated traces that are not must-pass (they pin the reference's decisions where the contract "
               "leaves a choice): %s." % (group(nmp) or "none"))
    return "\n".join(out)


def replace_section(text, key, body):
    begin = "<!-- BEGIN GENERATED: %s (gen/corpus.py) -->" % key
    end = "<!-- END GENERATED: %s -->" % key
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit("corpus.py: traces/README.md has no '%s' ... '%s' markers" % (begin, end))
    return text[:i + len(begin)] + "\n" + body + "\n" + text[j:]


def update_readme(text, traces, hand, root):
    text = replace_section(text, "areas", areas_table(traces, hand, root))
    return replace_section(text, "rule map", rule_map(traces))
