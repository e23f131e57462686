"""fam_handles.py - the handle kind x entry point matrix (SPEC 5, 3, 4, 8.7, 8.18): every argument of
every entry point that takes a client, prepared model, token or event is given, in its own trace,
each wrong kind of value: a handle of another kind of this client, 0, a released one, another
client's, another device's, small literals, neighbours of a live value; and every entry point that
takes a device given a NULL one (8.18, v1.2). Each trace then proves
that nothing the refused calls named was touched: every object of the set-up still works (the
token holds its bytes, the events wait with their results, the prepared models run) and every
client's leak report is what the set-up left."""
from tracelib import Trace, binary_model, role, f32, fill, INVALID, F32_ADD_A, F32_ADD_B

FAMILY = "handles"
KINDS = ["client", "prepared", "token", "event"]
LIVE = {"client": "c", "prepared": "p", "token": "t", "event": "e"}
RELEASED = {"client": "cx", "prepared": "p_rel", "token": "t_rel", "event": "e_rel"}
OTHER_CLIENT = {"prepared": "p2", "token": "t2", "event": "e2"}
OTHER_DEVICE = {"client": "c3", "prepared": "p3", "token": "t3", "event": "e3"}
SMALL = [1, 2, 3, 0x100, 0x1000001, 0xffffffff, 0x100000001, 0xffffffffffffffff]
NEIGHBOURS = [("add", 1), ("add", -1), ("add", 0x1000000), ("add", -0x1000000), ("add", 1 << 32),
              ("xor", 1 << 32), ("xor", 1 << 63), ("xor", 0x80000000)]
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]

# (call, argument) -> the kind the argument takes, and how the call is written with value v.
SLOTS = [
    ("close_client", "client", "client"),
    ("prepare_model", "client", "client"),
    ("release_prepared_model", "client", "client"),
    ("release_prepared_model", "prepared", "prepared"),
    ("allocate", "client", "client"),
    ("allocate", "prepared", "prepared"),
    ("allocate", "prepared_unreferenced", "prepared"),
    ("copy_to", "client", "client"),
    ("copy_to", "token", "token"),
    ("copy_from", "client", "client"),
    ("copy_from", "token", "token"),
    ("free_buffer", "client", "client"),
    ("free_buffer", "token", "token"),
    ("execute", "client", "client"),
    ("execute", "prepared", "prepared"),
    ("execute", "token_in", "token"),
    ("execute", "token_out", "token"),
    ("execute", "token_unused", "token"),
    ("execute_async", "client", "client"),
    ("execute_async", "prepared", "prepared"),
    ("execute_async", "token_in", "token"),
    ("execute_async", "token_out", "token"),
    ("execute_async", "token_unused", "token"),
    ("wait_event", "client", "client"),
    ("wait_event", "event", "event"),
]


def hexlit(v):
    return {"literal": "0x%x" % v}


def categories(kind, arg):
    """(category, [values], rule ids) for an argument of `kind`."""
    live = "tout" if arg == "token_out" else LIVE[kind]
    out = []
    for k in KINDS:
        if k != kind:
            out.append((k, [LIVE[k]], ["5.kinds"]))
    out.append(("zero", [{"literal": 0}], ["5.dead"]))
    out.append(("released", [RELEASED[kind]], ["5.dead"]))
    if kind != "client":
        out.append(("other_client", [OTHER_CLIENT[kind]], ["5.token_bound" if kind == "token" else "5.kinds"]))
    out.append(("other_device", [OTHER_DEVICE[kind]], ["5.dead"]))
    out.append(("small_literals", [hexlit(v) for v in SMALL], ["5.unguessable"]))
    out.append(("neighbours", [{"forge": live, how: ("0x%x" % n if how == "xor" else n)} for how, n in NEIGHBOURS],
                ["5.unguessable"]))
    return out


def prologue(t):
    t.device("dev", "")
    t.device("dev2", "")
    t.comment("client c holds one live object of each kind and one released one; c2 and c3 (on a second "
              "device) hold their own")
    t.client("c", device="dev")
    t.client("c2", device="dev")
    t.client("c3", device="dev2")
    t.client("cx", device="dev")
    t.call("close_client", device="dev", client="cx", expect={"leaks": {"buffers": 0, "prepared_models": 0, "events": 0, "bytes": 0}})
    t.model("add", binary_model())
    t.prepare("p", "add", client="c", device="dev")
    t.prepare("p_rel", "add", client="c", device="dev")
    t.call("release_prepared_model", device="dev", client="c", prepared="p_rel")
    t.prepare("p2", "add", client="c2", device="dev")
    t.prepare("p3", "add", client="c3", device="dev2")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))
    t.mem("o_att", 24, data=fill(24))
    t.mem("m_tmp", 24, data=fill(24))
    for tok, cl, dv, pm in (("t", "c", "dev", "p"), ("t2", "c2", "dev", "p2"), ("t3", "c3", "dev2", "p3")):
        t.allocate(tok, [pm], input_roles=[role(0, 0)], client=cl, device=dv)
        t.call("copy_from", device=dv, client=cl, token=tok, src="a")
    t.allocate("tout", ["p"], output_roles=[role(0, 0)], client="c", device="dev")
    t.allocate("t_rel", ["p"], input_roles=[role(0, 0)], client="c", device="dev")
    t.call("free_buffer", device="dev", client="c", token="t_rel")
    for ev, cl, dv, pm in (("e", "c", "dev", "p"), ("e_rel", "c", "dev", "p"), ("e2", "c2", "dev", "p2"),
                           ("e3", "c3", "dev2", "p3")):
        t.mem("o_" + ev, 24, data=fill(24))
        t.call("execute_async", device=dv, client=cl, prepared=pm, as_=ev,
               request={"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                        "outputs": [{"pool": 2, "length": 24}],
                        "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o_" + ev}]})
    t.call("wait_event", device="dev", client="c", event="e_rel", expect={"shapes": [{"dims": [2, 3]}]})


def epilogue(t):
    t.comment("nothing the refused calls named was touched: every object still works, every leak report is the "
              "set-up's")
    for tok, cl, dv in (("t", "c", "dev"), ("t2", "c2", "dev"), ("t3", "c3", "dev2")):
        m = "back_" + tok
        t.mem(m, 24)
        t.call("copy_to", device=dv, client=cl, token=tok, dst=m)
        t.check(m, f32(F32_ADD_A))
    for ev, cl, dv in (("e", "c", "dev"), ("e2", "c2", "dev"), ("e3", "c3", "dev2")):
        t.call("wait_event", device=dv, client=cl, event=ev, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.check("o_" + ev, f32(SUM))
    for pm, cl, dv, tok in (("p", "c", "dev", "t"), ("p2", "c2", "dev", "t2"), ("p3", "c3", "dev2", "t3")):
        m = "run_" + pm
        t.mem(m, 24)
        t.call("execute", device=dv, client=cl, prepared=pm,
               request={"inputs": [{"pool": 0}, {"pool": 1, "length": 24}], "outputs": [{"pool": 2, "length": 24}],
                        "pools": [{"token": tok}, {"memory": "b"}, {"memory": m}]},
               expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.check(m, f32(SUM))
    t.call("copy_to", device="dev", client="c", token="tout", dst="m_tmp", expect={"status": "GENERAL_FAILURE"})
    t.call("close_client", device="dev", client="c",
           expect={"leaks": {"buffers": 2, "prepared_models": 1, "events": 0, "bytes": 48}})
    t.call("close_client", device="dev", client="c2",
           expect={"leaks": {"buffers": 1, "prepared_models": 1, "events": 0, "bytes": 24}})
    t.call("close_client", device="dev2", client="c3",
           expect={"leaks": {"buffers": 1, "prepared_models": 1, "events": 0, "bytes": 24}})


def attempt(t, call, arg, v, n, dev="dev"):
    """One refused call: `call` with its `arg` set to v (or, for arg "device", on the device `dev`),
    everything else valid."""
    dev = {"device": dev}
    client = v if arg == "client" else "c"
    if call == "close_client":
        t.call("close_client", client=client, expect=INVALID, **dev)
    elif call == "prepare_model":
        t.call("prepare_model", client=client, model="add", as_="px%d" % n, expect=INVALID, **dev)
    elif call == "release_prepared_model":
        t.call("release_prepared_model", client=client, prepared=v if arg == "prepared" else "p", expect=INVALID, **dev)
    elif call == "allocate":
        prepared = {"client": ["p"], "device": ["p"], "prepared": [v], "prepared_unreferenced": ["p", v]}[arg]
        t.call("allocate", client=client, prepared=prepared, input_roles=[role(0, 0)], as_="tx%d" % n,
               expect=INVALID, **dev)
    elif call == "copy_to":
        t.call("copy_to", client=client, token=v if arg == "token" else "t", dst="m_tmp", expect=INVALID, **dev)
        t.check("m_tmp", type="u8", data=fill(24))
    elif call == "copy_from":
        t.call("copy_from", client=client, token=v if arg == "token" else "t", src="b", expect=INVALID, **dev)
    elif call == "free_buffer":
        t.call("free_buffer", client=client, token=v if arg == "token" else "t", expect=INVALID, **dev)
    elif call in ("execute", "execute_async"):
        ins = [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}]
        outs = [{"pool": 2, "length": 24}]
        pools = [{"memory": "a"}, {"memory": "b"}, {"memory": "o_att"}]
        if arg == "token_in":
            ins[0] = {"pool": 0}
            pools[0] = {"token": v}
        elif arg == "token_out":
            outs[0] = {"pool": 2}
            pools[2] = {"token": v}
        elif arg == "token_unused":
            pools.append({"token": v})
        req = {"inputs": ins, "outputs": outs, "pools": pools}
        extra = {"as_": "ex%d" % n} if call == "execute_async" else {}
        t.call(call, client=client, prepared=v if arg == "prepared" else "p", request=req, expect=INVALID,
               **extra, **dev)
        if arg != "token_out":
            t.check("o_att", type="u8", data=fill(24))
    elif call == "wait_event":
        t.call("wait_event", client=client, event=v if arg == "event" else "e", timeout_ns=0, n_shapes=1,
               expect=INVALID, **dev)
    else:
        raise AssertionError(call)


def slot_rules(call, arg):
    """The rule the argument's own check belongs to, with its axes, beyond SPEC 5."""
    if call == "allocate" and arg.startswith("prepared"):
        return [("3.alloc_prepared", "handle")]
    if call.startswith("execute") and arg.startswith("token"):
        if arg == "token_unused":
            out = [("8.7", "handle")]
            if call == "execute_async":
                out.append(("8.7", "entry"))
            return out
        out = [("4.token_valid", "handle"), ("4.token_valid", "side")]
        if call == "execute_async":
            out.append(("4.token_valid", "entry"))
        return out
    if call == "wait_event" and arg == "event":
        return [("4.wait", "handle")]
    return []


# SPEC 8.18 (v1.2): every entry point that takes a device, given a NULL one.
NULL_DEVICE_CALLS = ["get_capabilities", "get_supported_operations", "open_client", "close_client", "prepare_model",
                     "release_prepared_model", "allocate", "copy_to", "copy_from", "free_buffer", "execute",
                     "execute_async", "wait_event", "register_memory", "unregister_memory"]


def null_device_attempt(t, call):
    """`call` with a NULL device and every other argument valid (c's live objects)."""
    null = {"device": {"literal": 0}, "expect": INVALID}
    if call == "get_capabilities":
        t.call(call, **null)
    elif call == "get_supported_operations":
        t.call(call, model="add", **null)
    elif call == "open_client":
        t.call(call, as_="cn", **null)
    elif call == "register_memory":
        t.call(call, client="c", memory="a", as_="rn", **null)
    elif call == "unregister_memory":
        t.call(call, client="c", pool="rp", **null)
    else:
        attempt(t, call, "device", None, 0, dev=null["device"])


def null_device_traces():
    out = []
    for call in NULL_DEVICE_CALLS:
        registered = call.endswith("_memory")
        t = Trace("tokens", "gen_handle_%s_device__null" % call, "%s given a NULL device (every other argument "
                  "valid): INVALID_ARGUMENT, never a crash (8.18), and every object of the set-up is untouched" % call,
                  [("8.18", "entry")], requires=["memory_domains"] + (["registered_pools"] if registered else []))
        prologue(t)
        if call == "unregister_memory":
            t.call("register_memory", device="dev", client="c", memory="a", as_="rp")
        t.comment("the refused call")
        null_device_attempt(t, call)
        if call == "unregister_memory":
            t.comment("the registered pool is still live")
            t.mem("o_rp", 24)
            t.call("execute", device="dev", client="c", prepared="p",
                   request={"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                            "outputs": [{"pool": 2, "length": 24}],
                            "pools": [{"registered": "rp"}, {"memory": "b"}, {"memory": "o_rp"}]},
                   expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
            t.check("o_rp", f32(SUM))
            t.call("unregister_memory", device="dev", client="c", pool="rp")
        epilogue(t)
        out.append(t)
    return out


def generate():
    traces = null_device_traces()
    for call, arg, kind in SLOTS:
        for cat, values, rids in categories(kind, arg):
            what = "gen_handle_%s_%s__%s" % (call, arg, cat)
            argname = {"token_in": "token input", "token_out": "token output", "token_unused": "unused token pool",
                       "prepared_unreferenced": "second prepared handle, named by no role"}.get(arg, arg)
            desc = "%s's %s given %s: INVALID_ARGUMENT, and every object of the set-up (this client's, another " \
                   "client's, another device's) is untouched" % (call, argname, {
                       "client": "a client handle", "prepared": "a prepared model", "token": "a token",
                       "event": "a live event", "zero": "0", "released": "a released %s" % kind,
                       "other_client": "another client's %s" % kind, "other_device": "another device's %s" % kind,
                       "small_literals": "small literals (1, 2, 3, 0x100, 0x1000001, 2^32-1, 2^32+1, 2^64-1)",
                       "neighbours": "neighbours of a live %s (+-1, +-2^24, +2^32, bit 31, 32 and 63 flipped)" % kind}[cat])
            covers = [(r, "handle") for r in rids] + slot_rules(call, arg)
            t = Trace("tokens", what, desc, covers, requires=["memory_domains"])
            prologue(t)
            t.comment("the refused call%s" % ("s" if len(values) > 1 else ""))
            for n, v in enumerate(values):
                attempt(t, call, arg, v, n)
            epilogue(t)
            traces.append(t)
    return traces
