"""fam_counts.py - counts past a structure's size and handle predictability (SPEC 5, 8.12, 8.3):
one slot reused a thousand times for each handle kind with the first handle tried at every reuse
(generation counters wrap), 5,000 live tokens (a handle table past its first chunks) released by
close_client and reported, hundreds of clients and of events in flight, and 1,000 handles of each
kind collected live and churned through one slot, judged by expect_unpredictable (two tries)."""
from tracelib import Trace, binary_model, role, f32, fill, F32_ADD_A, F32_ADD_B

FAMILY = "counts"
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]
REQ = {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}], "outputs": [{"pool": 2}],
       "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "to"}]}


def base(t, config=""):
    t.device("dev", config)
    t.client("c")
    t.model("add", binary_model())
    t.prepare("p", "add")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))
    t.mem("m", 24, data=fill(24))
    t.allocate("to", ["p"], output_roles=[role(0, 0)])


def block(t, repeat, lanes=1):
    t.ev("concurrent", lanes=lanes, repeat=repeat)


def end(t):
    t.ev("end_concurrent")


def slot_reuse():
    out = []
    N = 1000
    common = [("5.stale_slot", "counts"), ("5.dead", "counts"), ("5.kinds", "counts")]

    t = Trace("tokens", "gen_count_token_slot_reused_%d_times" % N, "A freed token's slot is reused %d times "
              "(allocate + free): at every reuse the first token stays dead for copy_to and free_buffer, whatever "
              "the generation counter wraps to; afterwards it is dead at every entry point and the live token works"
              % N, common, requires=["memory_domains"])
    base(t)
    t.allocate("t0", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="t0", src="a")
    t.call("free_buffer", token="t0")
    block(t, N)
    t.allocate("tk", ["p"], input_roles=[role(0, 0)], lane=0)
    t.call("copy_to", token="t0", dst="m", lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("free_buffer", token="t0", lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("free_buffer", token="tk", lane=0)
    end(t)
    t.allocate("live", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="live", src="a")
    for op, kw in (("copy_to", {"dst": "m"}), ("copy_from", {"src": "b"}), ("free_buffer", {})):
        t.call(op, token="t0", expect={"status": "INVALID_ARGUMENT"}, **kw)
    t.call("execute", prepared="p", request={"inputs": [{"pool": 0}, {"pool": 1, "length": 24}],
                                             "outputs": [{"pool": 2, "length": 24}],
                                             "pools": [{"token": "t0"}, {"memory": "b"}, {"memory": "m"}]},
           expect={"status": "INVALID_ARGUMENT"})
    t.check_untouched("m", 0, 24)
    t.call("copy_to", token="live", dst="m")
    t.check("m", f32(F32_ADD_A))
    t.call("close_client", client="c", expect={"leaks": {"buffers": 2, "prepared_models": 1}})
    out.append(t)

    t = Trace("tokens", "gen_count_prepared_slot_reused_%d_times" % N, "A released prepared model's slot is reused "
              "%d times (prepare + release): at every reuse the first handle stays dead for execute and release" % N,
              common, requires=["memory_domains"])
    base(t)
    t.prepare("p0", "add")
    t.call("release_prepared_model", prepared="p0")
    block(t, N)
    t.prepare("pk", "add", lane=0)
    t.call("release_prepared_model", prepared="p0", lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("execute", prepared="p0", request=REQ, lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("release_prepared_model", prepared="pk", lane=0)
    end(t)
    t.prepare("plive", "add")
    t.allocate("tx", ["p0"], input_roles=[role(0, 0)], expect={"status": "INVALID_ARGUMENT"})
    t.call("execute", prepared="plive", request=dict(REQ, outputs=[{"pool": 2, "length": 24}],
                                                    pools=[{"memory": "a"}, {"memory": "b"}, {"memory": "m"}]))
    t.check("m", f32(SUM))
    t.call("close_client", client="c", expect={"leaks": {"prepared_models": 2}})
    out.append(t)

    t = Trace("tokens", "gen_count_event_slot_reused_%d_times" % N, "A consumed event's slot is reused %d times "
              "(execute_async + wait_event): at every reuse the first event stays dead" % N,
              common + [("4.wait", "counts")], requires=["memory_domains"])
    base(t)
    t.call("execute_async", prepared="p", request=REQ, as_="e0")
    t.call("wait_event", event="e0")
    block(t, N)
    t.call("execute_async", prepared="p", request=REQ, as_="ek", lane=0)
    t.call("wait_event", event="e0", timeout_ns=0, lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("wait_event", event="ek", lane=0)
    end(t)
    t.call("execute_async", prepared="p", request=REQ, as_="elive")
    t.call("wait_event", event="e0", expect={"status": "INVALID_ARGUMENT"})
    t.call("wait_event", event="elive", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
    t.call("copy_to", token="to", dst="m")
    t.check("m", f32(SUM))
    t.call("close_client", client="c", expect={"leaks": {"events": 0}})
    out.append(t)

    t = Trace("tokens", "gen_count_client_slot_reused_%d_times" % N, "A closed client's slot is reused %d times "
              "(open_client + close_client): at every reuse the first client stays dead" % N,
              common, requires=["memory_domains"])
    t.device("dev", "")
    t.model("add", binary_model())
    t.client("c0")
    t.call("close_client", client="c0")
    block(t, N)
    t.client("ck", lane=0)
    t.call("close_client", client="c0", lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("prepare_model", client="c0", model="add", as_="px", lane=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("close_client", client="ck", lane=0, expect={"leaks": {"buffers": 0, "prepared_models": 0, "events": 0}})
    end(t)
    t.client("clive")
    t.call("close_client", client="c0", expect={"status": "INVALID_ARGUMENT"})
    t.call("close_client", client="clive")
    out.append(t)
    return out


def growth():
    out = []
    N = 5000
    t = Trace("tokens", "gen_count_%d_live_tokens" % N, "%d tokens live at once (a handle table past its first "
              "chunks): the first and the last work; close_client releases and reports all %d and %d bytes; the "
              "table shrinks back and a new client's tokens work while the old ones stay dead" % (N, N + 1, 24 * (N + 1)),
              [("5.dead", "counts"), ("5.close_client", "counts"), ("5.kinds", "counts")], requires=["memory_domains"])
    base(t)
    t.allocate("t_first", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="t_first", src="a")
    block(t, N - 1)
    t.allocate("tk", ["p"], input_roles=[role(0, 0)], lane=0)
    end(t)
    t.call("copy_from", token="tk", src="b")
    t.call("copy_to", token="t_first", dst="m")
    t.check("m", f32(F32_ADD_A))
    t.call("copy_to", token="tk", dst="m")
    t.check("m", f32(F32_ADD_B))
    t.call("close_client", client="c",
           expect={"leaks": {"buffers": N + 1, "prepared_models": 1, "events": 0, "bytes": 24 * (N + 1)}})
    t.client("c2")
    t.prepare("p2", "add", client="c2")
    block(t, 64)
    t.allocate("t2k", ["p2"], input_roles=[role(0, 0)], client="c2", lane=0)
    t.call("free_buffer", client="c2", token="t2k", lane=0)
    end(t)
    for tok in ("t_first", "tk"):
        t.call("copy_to", client="c2", token=tok, dst="m", expect={"status": "INVALID_ARGUMENT"})
        t.call("free_buffer", client="c2", token=tok, expect={"status": "INVALID_ARGUMENT"})
    t.call("close_client", client="c2", expect={"leaks": {"buffers": 0, "prepared_models": 1}})
    out.append(t)

    M = 300
    t = Trace("clients", "gen_count_%d_clients" % M, "%d clients open at once, each preparing a model and "
              "allocating a buffer: the last one's objects are refused to the first client and vice versa; "
              "close_client reports each one's own" % M,
              [("5.close_client", "counts"), ("5.kinds", "counts")], requires=["memory_domains"])
    t.device("dev", "")
    t.client("c_first")
    t.model("add", binary_model())
    t.prepare("p_first", "add", client="c_first")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("m", 24, data=fill(24))
    t.allocate("t_first", ["p_first"], input_roles=[role(0, 0)], client="c_first")
    t.call("copy_from", client="c_first", token="t_first", src="a")
    block(t, M)
    t.client("ck", lane=0)
    t.prepare("pk", "add", client="ck", lane=0)
    t.allocate("tk", ["pk"], input_roles=[role(0, 0)], client="ck", lane=0)
    end(t)
    t.call("copy_to", client="c_first", token="tk", dst="m", expect={"status": "INVALID_ARGUMENT"})
    t.call("copy_to", client="ck", token="t_first", dst="m", expect={"status": "INVALID_ARGUMENT"})
    t.allocate("tx", ["pk"], input_roles=[role(0, 0)], client="c_first", expect={"status": "INVALID_ARGUMENT"})
    t.check_untouched("m", 0, 24)
    t.call("close_client", client="ck", expect={"leaks": {"buffers": 1, "prepared_models": 1, "bytes": 24}})
    t.call("close_client", client="c_first", expect={"leaks": {"buffers": 1, "prepared_models": 1, "bytes": 24}})
    out.append(t)

    E = 300
    t = Trace("clients", "gen_count_%d_events_unwaited_at_close" % E, "%d asynchronous executions of one client "
              "writing one token, never waited for: close_client counts %d events and releases everything" % (E, E),
              [("5.close_client", "counts"), ("4.wait", "counts")], requires=["memory_domains"])
    base(t)
    block(t, E)
    t.call("execute_async", prepared="p", request=REQ, as_="ek", lane=0)
    end(t)
    t.call("close_client", client="c", expect={"leaks": {"buffers": 1, "prepared_models": 1, "events": E, "bytes": 24}})
    out.append(t)

    t = Trace("faults", "gen_mem_limit_persistent_vs_transient", "mem_limit=64K: buffers over the whole limit are "
              "RESOURCE_EXHAUSTED_PERSISTENT however many are tried; 48 KiB live, a 32 KiB buffer is "
              "RESOURCE_EXHAUSTED_TRANSIENT (fits the limit, not what is free) until the live ones are freed",
              [("8.3", "counts")], requires=["memory_domains"])
    t.device("dev", "mem_limit=65536")
    t.client("c")
    for nm, n in (("big", 8192), ("k8", 2048), ("huge", 1 << 20)):
        t.model(nm, binary_model(da=(n,), db=(n,), dout=(n,)))
        t.prepare("p_" + nm, nm)
    block(t, 8)
    t.allocate("tb", ["p_huge"], input_roles=[role(0, 0)], lane=0, expect={"status": "RESOURCE_EXHAUSTED_PERSISTENT"})
    end(t)
    for i in range(6):
        t.allocate("t8_%d" % i, ["p_k8"], input_roles=[role(0, 0)])
    t.allocate("tx", ["p_big"], input_roles=[role(0, 0)], expect={"status": "RESOURCE_EXHAUSTED_TRANSIENT"})
    t.allocate("tx2", ["p_huge"], input_roles=[role(0, 0)], expect={"status": "RESOURCE_EXHAUSTED_PERSISTENT"})
    for i in range(6):
        t.call("free_buffer", token="t8_%d" % i)
    t.allocate("tok", ["p_big"], input_roles=[role(0, 0)])
    out.append(t)
    return out


def predictability():
    out = []
    N = 1000
    kinds = [
        ("clients", "open_client", "close_client"),
        ("prepared_models", "prepare_model", "release_prepared_model"),
        ("tokens", "allocate", "free_buffer"),
        ("events", "execute_async", "wait_event"),
    ]
    for kind, make, drop in kinds:
        for mode in ("live", "churned"):
            t = Trace("tokens", "gen_unpredictable_%s_%s" % (kind, mode), "8.12: %d %s issued to one client%s, in "
                      "two collections (one try each): no two of a collection differ only in their low 32 bits" % (
                          N, kind.replace("_", " "), ", all live at once" if mode == "live" else
                          ", each released before the next (one slot reused)"),
                      [("8.12", "predictability")], requires=["memory_domains"])
            base(t)
            for coll in ("try1", "try2"):
                block(t, N)
                nm = "h_" + coll
                if make == "open_client":
                    t.client(nm, lane=0, collect=coll)
                    if mode == "churned":
                        t.call("close_client", client=nm, lane=0)
                elif make == "prepare_model":
                    t.prepare(nm, "add", client="c", lane=0, collect=coll)
                    if mode == "churned":
                        t.call("release_prepared_model", client="c", prepared=nm, lane=0)
                elif make == "allocate":
                    t.allocate(nm, ["p"], input_roles=[role(0, 0)], client="c", lane=0, collect=coll)
                    if mode == "churned":
                        t.call("free_buffer", client="c", token=nm, lane=0)
                else:
                    t.call("execute_async", client="c", prepared="p", request=REQ, as_=nm, lane=0, collect=coll)
                    if mode == "churned":
                        t.call("wait_event", client="c", event=nm, lane=0)
                end(t)
            t.ev("expect_unpredictable", collections=["try1", "try2"])
            out.append(t)
    return out


def generate():
    return slot_reuse() + growth() + predictability()
