"""fam_lifecycle.py - what failures leave behind (SPEC 3, 4, 8.8, 8.9, 8.10): copy_from failures of
every cause on dynamic buffers, dims whose byte size wraps included (8.17) (uninitialized, current
dims kept: copy_to of the kept size is GENERAL_FAILURE, of another size INVALID_ARGUMENT); failed
synchronous and asynchronous executions with device outputs in every position; the events of failed
executions waited once, twice, by another client or left for close_client; fault plans with refused
calls interleaved (they take no number); leak reports of buffers resized by executions and copies."""
from tracelib import Trace, binary_model, two_output_model, relu_model, role, f32, fill, tensor, i32_const, \
    F32_ADD_A, F32_ADD_B

FAMILY = "lifecycle"
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]
PROD = [a * b for a, b in zip(F32_ADD_A, F32_ADD_B)]
DYN = {"operands": [tensor((0, 3), "SUBGRAPH_INPUT"), tensor((0, 3), "SUBGRAPH_INPUT"), i32_const(),
                    tensor((0, 3), "SUBGRAPH_OUTPUT")],
       "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
       "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}}
DYN2 = two_output_model(dims=(0, 3))


def base(t, config=""):
    t.device("dev", config)
    t.client("c")
    t.model("add", binary_model())
    t.prepare("p", "add")
    t.model("dyn", DYN)
    t.prepare("pd", "dyn")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))
    t.mem("a48", 48, data=f32(F32_ADD_A * 2))
    t.mem("b48", 48, data=f32(F32_ADD_B * 2))
    t.mem("m24", 24)
    t.mem("m48", 48)


def dims_kept(t, tok, kept_bytes, other_bytes, note=""):
    """SPEC 8.8: uninitialized with its dims kept: copy_to of the kept size is GENERAL_FAILURE (not
    initialized), of another size INVALID_ARGUMENT (the size check sees the kept dims first)."""
    t.comment("uninitialized, current dims kept (8.8)%s" % note)
    t.call("copy_to", token=tok, dst="m%d" % kept_bytes, expect={"status": "GENERAL_FAILURE"})
    t.call("copy_to", token=tok, dst="m%d" % other_bytes, expect={"status": "INVALID_ARGUMENT"})


def copy_failures():
    out = []
    causes = [
        ("size_mismatch", "dims [4,3] with a 24-byte source", {"src": "a", "dims": [4, 3]}, None),
        ("zero_in_dims", "dims [0,3]", {"src": "a", "dims": [0, 3]}, None),
        ("dims_not_combining", "dims [2,4] against the initial [0,3]", {"src": "a", "dims": [2, 4]}, None),
        ("rank_differs", "dims [6] against the initial [0,3]", {"src": "a", "dims": [6]}, None),
        ("no_dims_unknown_initial", "no dims while the initial dims [0,3] are not fully known", {"src": "a"}, None),
        ("bad_descriptor", "a source with fd -1", {"src": "bad", "dims": [2, 3]},
         ("bad_memory", {"kind": "ashmem", "fd": -1, "size": 24})),
        ("hardware_buffer_source", "a non-BLOB hardware buffer source", {"src": "hwb", "dims": [2, 3]},
         ("memory", {"kind": "hardware_buffer", "size": 24, "width": 6, "format": 1})),
    ]
    for name, desc, args, mk in causes:
        t = Trace("copy", "gen_copy_from_failure_%s" % name, "A dynamic [0,3] buffer filled at [2,3]: a copy_from "
                  "refused for %s leaves it uninitialized with its current dims [2,3] (copy_to of 24 bytes: "
                  "GENERAL_FAILURE, of 48: INVALID_ARGUMENT), and refused as an execution input; a good copy_from "
                  "restores it" % desc,
                  [("3.copy_from_failure", "after_failure"), ("8.8", "after_failure"), ("3.copy_to", "after_failure"),
                   ("3.copy_from", "after_failure"), ("4.init", "after_failure")], requires=["memory_domains"])
        base(t)
        if mk:
            t.ev(mk[0], as_=args["src"], **mk[1])
        t.allocate("td", ["pd"], input_roles=[role(0, 0)])
        t.call("copy_from", token="td", src="a", dims=[2, 3])
        t.call("copy_to", token="td", dst="m24")
        t.check("m24", f32(F32_ADD_A))
        t.call("copy_from", token="td", expect={"status": "INVALID_ARGUMENT"}, **args)
        dims_kept(t, "td", 24, 48)
        t.call("execute", prepared="pd", request={"inputs": [{"pool": 0}, {"pool": 1, "length": 24, "dims": [2, 3]}],
                                                  "outputs": [{"pool": 2, "length": 24}],
                                                  "pools": [{"token": "td"}, {"memory": "b"}, {"memory": "m24"}]},
               expect={"status": "GENERAL_FAILURE"})
        t.call("copy_from", token="td", src="a48", dims=[4, 3])
        t.call("copy_to", token="td", dst="m48")
        t.check("m48", f32(F32_ADD_A * 2))
        out.append(t)

    wrap = [769546, 742155, 48448661]   # 6 * 2^64 + 24 bytes of float32: 24 modulo 2^64
    t = Trace("copy", "gen_copy_from_failure_dims_size_wraps", "A dynamic [0,0,0] buffer filled at [1,2,3]: a "
              "copy_from of a 24-byte source with dims [%s], whose byte size (6*2^64 + 24) wraps to 24, is refused "
              "(INVALID_ARGUMENT: the dims have no size, 8.17) and leaves it uninitialized with its current dims "
              "[1,2,3] (copy_to of 24 bytes: GENERAL_FAILURE, of 48: INVALID_ARGUMENT); a good copy_from restores "
              "it" % ",".join(map(str, wrap)),
              [("8.17", "entry"), ("3.copy_from_failure", "after_failure"), ("8.8", "after_failure"),
               ("3.copy_to", "after_failure")], requires=["memory_domains"])
    base(t)
    t.model("dyn3", {"operands": [tensor((0, 0, 0), "SUBGRAPH_INPUT"), tensor((0, 0, 0), "SUBGRAPH_INPUT"), i32_const(),
                                  tensor((0, 0, 0), "SUBGRAPH_OUTPUT")],
                     "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
                     "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}})
    t.prepare("pd3", "dyn3")
    t.allocate("td", ["pd3"], input_roles=[role(0, 0)])
    t.call("copy_from", token="td", src="a", dims=[1, 2, 3])
    t.call("copy_from", token="td", src="a", dims=wrap, expect={"status": "INVALID_ARGUMENT"})
    dims_kept(t, "td", 24, 48)
    t.call("copy_from", token="td", src="b", dims=[1, 2, 3])
    t.call("copy_to", token="td", dst="m24")
    t.check("m24", f32(F32_ADD_B))
    out.append(t)
    return out


def execution_failures():
    out = []
    for call in ("execute", "execute_async"):
        sfx = "sync" if call == "execute" else "async"
        # a dynamic output uninitialized by a validation failure keeps the dims its last write gave it
        t = Trace("deinit", "gen_dynamic_output_failure_keeps_dims__%s" % sfx,
                  "A dynamic [0,3] output written at [2,3], then named by a request refused for its input 1 length "
                  "(through %s): uninitialized, dims [2,3] kept" % call,
                  [("8.8", "after_failure"), ("8.8", "entry"), ("4.failure_results", "after_failure"),
                   ("4.failure_results", "entry")], requires=["memory_domains"])
        base(t)
        t.allocate("td", ["pd"], output_roles=[role(0, 0)])
        ok = {"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 24, "dims": [2, 3]}],
              "outputs": [{"pool": 2}], "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "td"}]}
        t.call("execute", prepared="pd", request=ok, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        bad = {"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 20, "dims": [2, 3]}],
               "outputs": [{"pool": 2}], "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "td"}]}
        if call == "execute":
            t.call("execute", prepared="pd", request=bad, expect={"status": "INVALID_ARGUMENT"})
        else:
            t.call("execute_async", prepared="pd", request=bad, as_="ev", expect={"status": "INVALID_ARGUMENT"})
        dims_kept(t, "td", 24, 48)
        t.call("close_client", client="c", expect={"leaks": {"buffers": 1, "events": 0, "bytes": 24}})
        out.append(t)

        # both device outputs of a two-output request, failing at validation and at run time
        for when in ("validation", "run"):
            t = Trace("deinit", "gen_two_device_outputs_%s_failure__%s" % (when, sfx),
                      "Two initialized token outputs (output 0 and output 1) of a request that fails %s (through %s): "
                      "both become uninitialized%s" % (
                          "validation (input 1 length 20)" if when == "validation" else
                          "at run time (fixed [2,3] outputs, batch 4 produced: GENERAL_FAILURE%s)" % (
                              " from wait_event, 8.9" if call == "execute_async" else ""),
                          call, "; a later good execution writes both again"),
                      [("4.failure_results", "side"), ("4.failure_results", "after_failure"),
                       ("4.failure_results", "entry")] +
                      ([("3.fixed_dims", "entry"), ("3.fixed_dims", "after_failure"), ("8.9", "after_failure")]
                       if when == "run" else []), requires=["memory_domains"])
            base(t)
            t.model("dyn2", DYN2)
            t.prepare("p2", "dyn2")
            for u in ("u0", "u1"):
                t.allocate(u, ["p2"], output_roles=[role(0, int(u[1]))], dims=[2, 3])
                t.call("copy_from", token=u, src="a")
            if when == "validation":
                req = {"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 20, "dims": [2, 3]}],
                       "outputs": [{"pool": 2}, {"pool": 3}],
                       "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "u0"}, {"token": "u1"}]}
                status = "INVALID_ARGUMENT"
            else:
                req = {"inputs": [{"pool": 0, "length": 48, "dims": [4, 3]}, {"pool": 1, "length": 48, "dims": [4, 3]}],
                       "outputs": [{"pool": 2}, {"pool": 3}],
                       "pools": [{"memory": "a48"}, {"memory": "b48"}, {"token": "u0"}, {"token": "u1"}]}
                status = "GENERAL_FAILURE"
            if call == "execute":
                t.call("execute", prepared="p2", request=req, expect={"status": status})
            elif when == "validation":
                t.call("execute_async", prepared="p2", request=req, as_="ev", expect={"status": status})
            else:
                t.call("execute_async", prepared="p2", request=req, as_="ev")
                t.call("wait_event", event="ev", expect={"status": status})
                t.call("wait_event", event="ev", expect={"status": "INVALID_ARGUMENT"})
            for u in ("u0", "u1"):
                t.call("copy_to", token=u, dst="m24", expect={"status": "GENERAL_FAILURE"})
            good = {"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 24, "dims": [2, 3]}],
                    "outputs": [{"pool": 2}, {"pool": 3}],
                    "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "u0"}, {"token": "u1"}]}
            t.call("execute", prepared="p2", request=good,
                   expect={"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
            for u, vals in (("u0", SUM), ("u1", PROD)):
                t.call("copy_to", token=u, dst="m24")
                t.check("m24", f32(vals))
            t.call("close_client", client="c", expect={"leaks": {"events": 0}})
            out.append(t)
    return out


def fixed_dims_async_fixture(t):
    """p2: two-output dyn model; u0 fixed [2,3] output 0 token; r_fail produces [4,3] (GENERAL_FAILURE at
    run time), r_ok [2,3]."""
    t.model("dyn2", DYN2)
    t.prepare("p2", "dyn2")
    t.allocate("u0", ["p2"], output_roles=[role(0, 0)], dims=[2, 3])
    t.mem("o1", 48)
    t.ev("request", as_="r_fail", inputs=[{"pool": 0, "length": 48, "dims": [4, 3]}, {"pool": 1, "length": 48, "dims": [4, 3]}],
         outputs=[{"pool": 2}, {"pool": 3, "length": 48}],
         pools=[{"memory": "a48"}, {"memory": "b48"}, {"token": "u0"}, {"memory": "o1"}])
    t.mem("o1b", 24)
    t.ev("request", as_="r_ok", inputs=[{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 24, "dims": [2, 3]}],
         outputs=[{"pool": 2}, {"pool": 3, "length": 24}],
         pools=[{"memory": "a"}, {"memory": "b"}, {"token": "u0"}, {"memory": "o1b"}])


def async_events():
    out = []
    t = Trace("async", "gen_failed_event_waited_twice", "An asynchronous execution that fails at run time (a fixed "
              "[2,3] token output, [4,3] produced): execute_async returns an event (8.9), its first wait returns "
              "GENERAL_FAILURE with no shapes, the second INVALID_ARGUMENT (consumed like any other); close_client "
              "counts no event",
              [("8.9", "after_failure"), ("4.wait", "after_failure"), ("4.async_validates", "after_failure"),
               ("3.fixed_dims", "entry")], requires=["memory_domains"])
    base(t)
    fixed_dims_async_fixture(t)
    t.call("execute_async", prepared="p2", request="r_fail", as_="ev")
    t.call("wait_event", event="ev", expect={"status": "GENERAL_FAILURE"})
    t.call("wait_event", event="ev", expect={"status": "INVALID_ARGUMENT"})
    t.call("wait_event", event="ev", timeout_ns=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("close_client", client="c", expect={"leaks": {"events": 0}})
    out.append(t)

    t = Trace("async", "gen_failed_event_unwaited_at_close", "Events left for close_client: one of a failed "
              "execution and one of a successful one, never waited, are both counted (8.9: counted only while not "
              "waited for); one waited (failed) and one waited (successful) are not",
              [("8.9", "after_failure"), ("8.9", "leaks"), ("4.close_in_flight", "after_failure"),
               ("5.close_client", "leaks")], requires=["memory_domains"])
    base(t)
    fixed_dims_async_fixture(t)
    t.call("execute_async", prepared="p2", request="r_fail", as_="ev_fail_waited")
    t.call("wait_event", event="ev_fail_waited", expect={"status": "GENERAL_FAILURE"})
    t.call("execute_async", prepared="p2", request="r_ok", as_="ev_ok_waited")
    t.call("wait_event", event="ev_ok_waited", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
    t.call("execute_async", prepared="p2", request="r_fail", as_="ev_fail")
    t.call("execute_async", prepared="p2", request="r_ok", as_="ev_ok")
    t.call("close_client", client="c", expect={"leaks": {"buffers": 1, "prepared_models": 3, "events": 2}})
    out.append(t)

    t = Trace("async", "gen_failed_event_unwaited_finished_at_close", "A failed execution's event, certainly "
              "finished (a later execution on the same client was waited for), is still counted by close_client "
              "while not waited for (8.9)",
              [("8.9", "after_failure"), ("8.9", "leaks")], requires=["memory_domains"])
    base(t)
    fixed_dims_async_fixture(t)
    t.call("execute_async", prepared="p2", request="r_fail", as_="ev_fail")
    t.call("execute", prepared="p2", request="r_ok", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
    t.call("execute_async", prepared="p2", request="r_ok", as_="ev_ok")
    t.call("wait_event", event="ev_ok")
    t.call("close_client", client="c", expect={"leaks": {"events": 1}})
    out.append(t)

    t = Trace("async", "gen_failed_event_foreign_wait", "Another client's wait on a failed execution's event is "
              "INVALID_ARGUMENT and does not consume it: its owner's wait then returns GENERAL_FAILURE",
              [("8.9", "after_failure"), ("4.wait", "handle"), ("5.kinds", "handle")], requires=["memory_domains"])
    base(t)
    fixed_dims_async_fixture(t)
    t.client("c2")
    t.call("execute_async", client="c", prepared="p2", request="r_fail", as_="ev")
    t.call("wait_event", client="c2", event="ev", expect={"status": "INVALID_ARGUMENT"})
    t.call("wait_event", client="c2", event="ev", timeout_ns=0, expect={"status": "INVALID_ARGUMENT"})
    t.call("wait_event", client="c", event="ev", expect={"status": "GENERAL_FAILURE"})
    t.call("close_client", client="c", expect={"leaks": {"events": 0}})
    out.append(t)
    return out


def fault_plans():
    """Fault plans number only the calls that pass their argument checks (docs/sim.md): refused calls
    interleaved between valid ones take no number."""
    out = []
    t = Trace("faults", "gen_alloc_fail_refused_calls_take_no_number", "faults=alloc_fail@2 with refused "
              "allocates (probability 0, a released prepared model, no role, a NaN probability) between the first "
              "and the second valid one: the second valid allocate fails RESOURCE_EXHAUSTED_TRANSIENT, the third "
              "works", [("3.alloc_unservable", "after_failure")], requires=["sim", "memory_domains"])
    out.append(t)
    base(t, "backend=sim;faults=alloc_fail@2")
    t.prepare("p_rel", "add")
    t.call("release_prepared_model", prepared="p_rel")
    t.allocate("t1", ["p"], input_roles=[role(0, 0)])
    t.allocate("x1", ["p"], input_roles=[role(0, 0, 0)], expect={"status": "INVALID_ARGUMENT"})
    t.allocate("x2", ["p_rel"], input_roles=[role(0, 0)], expect={"status": "INVALID_ARGUMENT"})
    t.allocate("x3", ["p"], expect={"status": "INVALID_ARGUMENT"})
    t.allocate("x4", ["p"], input_roles=[role(0, 0, "nan")], expect={"status": "INVALID_ARGUMENT"})
    t.allocate("t2", ["p"], input_roles=[role(0, 0)], expect={"status": "RESOURCE_EXHAUSTED_TRANSIENT"})
    t.allocate("t3", ["p"], input_roles=[role(0, 0)])
    t.call("close_client", client="c", expect={"leaks": {"buffers": 2}})

    t = Trace("faults", "gen_copy_fail_refused_calls_take_no_number", "faults=copy_fail@2: after the first "
              "copy_from, refused copies (a size mismatch each way, an invalid token, an uninitialized source "
              "buffer) take no number: the next valid copy_from is the second and fails GENERAL_FAILURE, leaving the "
              "buffer uninitialized with its dims; the third works",
              [("3.copy_from_failure", "after_failure")], requires=["sim", "memory_domains"])
    out.append(t)
    base(t, "backend=sim;faults=copy_fail@2")
    t.allocate("t1", ["p"], input_roles=[role(0, 0)])
    t.allocate("tu", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="t1", src="a")
    t.call("copy_from", token="t1", src="a48", expect={"status": "INVALID_ARGUMENT"})
    t.call("copy_to", token="t1", dst="m48", expect={"status": "INVALID_ARGUMENT"})
    t.call("copy_to", token={"forge": "t1", "xor": "0x100000000"}, dst="m24", expect={"status": "INVALID_ARGUMENT"})
    t.call("copy_to", token="tu", dst="m24", expect={"status": "GENERAL_FAILURE"})
    t.call("copy_from", token="t1", src="b", expect={"status": "GENERAL_FAILURE"})
    t.call("copy_to", token="t1", dst="m24", expect={"status": "GENERAL_FAILURE"})
    t.call("copy_from", token="t1", src="b")
    t.call("copy_to", token="t1", dst="m24")
    t.check("m24", f32(F32_ADD_B))
    return out


def fault_plans_exec():
    out = []
    for call in ("execute", "execute_async"):
        sfx = "sync" if call == "execute" else "async"
        t = Trace("faults", "gen_kernel_fail_refused_calls_take_no_number__%s" % sfx,
                  "faults=kernel_fail@2: between the first execution and the second valid one (through %s) come "
                  "refused executions (an input length mismatch, an uninitialized token input, a forged prepared "
                  "model, through execute and execute_async): they take no number; the second valid execution "
                  "fails GENERAL_FAILURE with no shapes and its token output uninitialized, the third works" % call,
                  [("4.kernel_failure", "entry"), ("4.kernel_failure", "after_failure"),
                   ("4.failure_results", "after_failure")], requires=["sim", "memory_domains"])
        base(t, "backend=sim;faults=kernel_fail@2")
        t.allocate("tu", ["p"], input_roles=[role(0, 0)])
        t.allocate("to", ["p"], output_roles=[role(0, 0)])
        t.ev("request", as_="r_ok", inputs=[{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
             outputs=[{"pool": 2}], pools=[{"memory": "a"}, {"memory": "b"}, {"token": "to"}])
        t.ev("request", as_="r_len", inputs=[{"pool": 0, "length": 20}, {"pool": 1, "length": 24}],
             outputs=[{"pool": 2, "length": 24}], pools=[{"memory": "a"}, {"memory": "b"}, {"memory": "m24"}])
        t.ev("request", as_="r_uninit", inputs=[{"pool": 0}, {"pool": 1, "length": 24}],
             outputs=[{"pool": 2, "length": 24}], pools=[{"token": "tu"}, {"memory": "b"}, {"memory": "m24"}])
        t.call("execute", prepared="p", request="r_ok")
        t.call("execute", prepared="p", request="r_len", expect={"status": "INVALID_ARGUMENT"})
        t.call("execute", prepared="p", request="r_uninit", expect={"status": "GENERAL_FAILURE"})
        t.call("execute_async", prepared="p", request="r_len", as_="x1", expect={"status": "INVALID_ARGUMENT"})
        t.call("execute_async", prepared="p", request="r_uninit", as_="x2", expect={"status": "GENERAL_FAILURE"})
        t.call("execute", prepared={"forge": "p", "add": 1}, request="r_ok", expect={"status": "INVALID_ARGUMENT"})
        if call == "execute":
            t.call("execute", prepared="p", request="r_ok", expect={"status": "GENERAL_FAILURE"})
        else:
            t.call("execute_async", prepared="p", request="r_ok", as_="ev")
            t.call("wait_event", event="ev", expect={"status": "GENERAL_FAILURE"})
        t.call("copy_to", token="to", dst="m24", expect={"status": "GENERAL_FAILURE"})
        t.call("execute", prepared="p", request="r_ok", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.call("copy_to", token="to", dst="m24")
        t.check("m24", f32(SUM))
        out.append(t)
    return out


def leaks():
    """close_client's leak report (SPEC 5, 8.10): bytes at each live buffer's current size."""
    out = []
    relu_in = [-1, 2, -3, 4, -5, 6, -7, 8, -9, 10]

    def relu_run(t, tok, n):
        t.call("execute", prepared="pr", request={"inputs": [{"pool": 0, "length": 4 * n, "dims": [n]}],
                                                  "outputs": [{"pool": 1}],
                                                  "pools": [{"memory": "x"}, {"token": tok}]},
               expect={"status": "NONE", "shapes": [{"dims": [n]}]})

    scenarios = [
        ("grown_by_executions", "written at [2], [5], [8] by executions", [2, 5, 8], 32),
        ("shrunk_by_executions", "written at [8], then [3] (smaller, in place)", [8, 3], 12),
        ("grown_shrunk_grown", "written at [2], [9], [1], [4]", [2, 9, 1, 4], 16),
        ("never_written", "never written, dims [0]", [], 0),
    ]
    for name, desc, sizes, nbytes in scenarios:
        t = Trace("clients", "gen_leak_dynamic_%s" % name, "A dynamic [0] float buffer %s: close_client reports 1 "
                  "buffer of %d bytes, its current size (8.10)" % (desc, nbytes),
                  [("8.10", "leaks"), ("5.close_client", "leaks"), ("3.dynamic", "leaks")],
                  requires=["memory_domains"])
        t.device("dev", "")
        t.client("c")
        t.model("relu", relu_model())
        t.prepare("pr", "relu")
        t.mem("x", 40, data=f32(relu_in))
        t.allocate("td", ["pr"], output_roles=[role(0, 0)])
        for n in sizes:
            relu_run(t, "td", n)
        t.call("close_client", client="c", expect={"leaks": {"buffers": 1, "prepared_models": 1, "events": 0,
                                                             "bytes": nbytes}})
        out.append(t)

    t = Trace("clients", "gen_leak_dynamic_resized_by_copies_and_failures", "Leak bytes at the current size after "
              "copy_from resizes a [0,3] buffer to [4,3] then [1,3] (12 bytes); a buffer written at [3] by an "
              "execution and uninitialized by a failed one keeps its dims and counts 12; a fully known [2,3] buffer "
              "never written counts 24; a scalar INT32 buffer 4 (or is refused, 8.4)",
              [("8.10", "leaks"), ("5.close_client", "leaks"), ("8.8", "after_failure")], requires=["memory_domains"])
    t.device("dev", "")
    t.client("c")
    t.model("dyn", DYN)
    t.prepare("pd", "dyn")
    t.model("relu", relu_model())
    t.prepare("pr", "relu")
    t.mem("x", 40, data=f32(relu_in))
    t.mem("a48", 48, data=f32(F32_ADD_A * 2))
    t.mem("a12", 12, data=f32(F32_ADD_A[:3]))
    t.allocate("tc", ["pd"], input_roles=[role(0, 0)])
    t.call("copy_from", token="tc", src="a48", dims=[4, 3])
    t.call("copy_from", token="tc", src="a12", dims=[1, 3])
    t.allocate("tf", ["pr"], output_roles=[role(0, 0)])
    relu_run(t, "tf", 3)
    t.call("execute", prepared="pr", request={"inputs": [{"pool": 0, "length": 16, "dims": [3]}], "outputs": [{"pool": 1}],
                                              "pools": [{"memory": "x"}, {"token": "tf"}]},
           expect={"status": "INVALID_ARGUMENT"})
    t.allocate("tk", ["pd"], input_roles=[role(0, 0)], dims=[2, 3])
    t.model("actin", {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), tensor((2, 3), "SUBGRAPH_INPUT"),
                                   {"type": "INT32", "lifetime": "SUBGRAPH_INPUT"}, tensor((2, 3), "SUBGRAPH_OUTPUT")],
                      "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
                      "inputs": [0, 1, 2], "outputs": [3]})
    t.prepare("ps", "actin")
    t.allocate("ts", ["ps"], input_roles=[role(0, 2)], expect={"status": ["NONE", "GENERAL_FAILURE"]})
    t.call("close_client", client="c", when={"produced": "ts"},
           expect={"leaks": {"buffers": 4, "prepared_models": 3, "bytes": 12 + 12 + 24 + 4}})
    t.call("close_client", client="c", when={"not_produced": "ts"},
           expect={"leaks": {"buffers": 3, "prepared_models": 3, "bytes": 12 + 12 + 24}})
    out.append(t)
    return out


def in_use():
    """SPEC 6: releasing an object an asynchronous execution uses kills its handle at once for new calls;
    the execution still completes with its results (nothing freed under it). Four executions are queued
    so that some are still in flight when the release comes (the rules hold either way)."""
    out = []
    for kind in ("token_input", "token_output", "prepared_model", "client"):
        t = Trace("async", "gen_in_use_release_%s" % kind, "Four queued asynchronous executions use a %s; it is "
                  "released at once (%s): its handle is dead for new calls, and every execution completes with its "
                  "results" % (kind.replace("_", " "), {
                      "token_input": "free_buffer", "token_output": "free_buffer",
                      "prepared_model": "release_prepared_model", "client": "close_client"}[kind]),
                  [("6.in_use", "handle")], requires=["memory_domains"])
        base(t)
        t.allocate("tin", ["p"], input_roles=[role(0, 0)])
        t.call("copy_from", token="tin", src="a")
        t.allocate("tout", ["p"], output_roles=[role(0, 0)])
        for i in range(4):
            t.mem("o%d" % i, 24)
            if kind == "token_output":
                req = {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}], "outputs": [{"pool": 2}],
                       "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "tout"}]}
            else:
                req = {"inputs": [{"pool": 0}, {"pool": 1, "length": 24}], "outputs": [{"pool": 2, "length": 24}],
                       "pools": [{"token": "tin"}, {"memory": "b"}, {"memory": "o%d" % i}]}
            t.call("execute_async", prepared="p", request=req, as_="e%d" % i)
        if kind == "token_input":
            t.call("free_buffer", token="tin")
            t.call("copy_to", token="tin", dst="m24", expect={"status": "INVALID_ARGUMENT"})
        elif kind == "token_output":
            t.call("free_buffer", token="tout")
            t.call("copy_to", token="tout", dst="m24", expect={"status": "INVALID_ARGUMENT"})
        elif kind == "prepared_model":
            t.call("release_prepared_model", prepared="p")
            t.call("execute", prepared="p", request={"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                                                     "outputs": [{"pool": 2, "length": 24}],
                                                     "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "m24"}]},
                   expect={"status": "INVALID_ARGUMENT"})
        else:
            t.call("close_client", client="c", expect={"leaks": {"buffers": 2, "prepared_models": 2, "events": 4}})
            t.call("wait_event", client="c", event="e0", expect={"status": "INVALID_ARGUMENT"})
            out.append(t)
            continue
        for i in range(4):
            t.call("wait_event", event="e%d" % i, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
            if kind != "token_output":
                t.check("o%d" % i, f32(SUM))
        t.call("close_client", client="c", expect={"leaks": {"events": 0}})
        out.append(t)
    return out


def in_use_queued_constants():
    """SPEC 6, deterministic: four heavy FULLY_CONNECTED executions keep both of a device's async workers
    busy, so an execution of a model with device-resident constants is still queued when its prepared model
    is released; fresh buffers then take the freed memory. It must still compute with its constants."""
    t = Trace("async", "gen_in_use_release_prepared_queued_constants", "An execution of a model whose second "
              "operand is a CONSTANT_COPY tensor is queued behind four heavy FULLY_CONNECTED executions; its "
              "prepared model is released at once and fresh buffers are filled with -7: the execution still "
              "returns NONE and a + constant, and the handle is dead for new calls", [("6.in_use", "handle")],
              requires=["memory_domains"])
    base(t)
    fc = {"operands": [tensor((64, 1024), "SUBGRAPH_INPUT"), tensor((1024, 1024), "SUBGRAPH_INPUT"),
                       tensor((1024,), "SUBGRAPH_INPUT"), i32_const(), tensor((64, 1024), "SUBGRAPH_OUTPUT")],
          "operations": [{"type": "FULLY_CONNECTED", "inputs": [0, 1, 2, 3], "outputs": [4]}],
          "inputs": [0, 1, 2], "outputs": [4], "operand_values": {"i32": [0]}}
    t.model("fc", fc)
    t.prepare("pf", "fc")
    t.mem("x", 262144, data={"random": {"seed": 1, "type": "f32", "count": 65536, "min": -1, "max": 1}})
    t.mem("wt", 4194304, data={"random": {"seed": 2, "type": "f32", "count": 1048576, "min": -1, "max": 1}})
    t.mem("bias", 4096, data=fill(4096, 0))
    const = {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"),
                          tensor((2, 3), "CONSTANT_COPY", offset=4, length=24), i32_const(),
                          tensor((2, 3), "SUBGRAPH_OUTPUT")],
             "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
             "inputs": [0], "outputs": [3], "operand_values": f32([0] + F32_ADD_B)}
    t.model("addc", const)
    t.prepare("pc", "addc")
    for i in range(4):
        t.mem("y%d" % i, 262144)
        t.call("execute_async", prepared="pf", as_="h%d" % i,
               request={"inputs": [{"pool": 0, "length": 262144}, {"pool": 1, "length": 4194304},
                                   {"pool": 2, "length": 4096}], "outputs": [{"pool": 3, "length": 262144}],
                        "pools": [{"memory": "x"}, {"memory": "wt"}, {"memory": "bias"}, {"memory": "y%d" % i}]})
    t.mem("oc", 24)
    rc = {"inputs": [{"pool": 0, "length": 24}], "outputs": [{"pool": 1, "length": 24}],
          "pools": [{"memory": "a"}, {"memory": "oc"}]}
    t.call("execute_async", prepared="pc", request=rc, as_="ev")
    t.call("release_prepared_model", prepared="pc")
    t.call("execute_async", prepared="pc", request=rc, as_="ev_dead", expect={"status": "INVALID_ARGUMENT"})
    t.mem("z", 24, data=f32([-7] * 6))
    for i in range(4):
        t.allocate("n%d" % i, ["p"], input_roles=[role(0, 0)])
        t.call("copy_from", token="n%d" % i, src="z")
    t.call("wait_event", event="ev", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
    t.check("oc", f32(SUM))
    for i in range(4):
        t.call("wait_event", event="h%d" % i, expect={"status": "NONE", "shapes": [{"dims": [64, 1024]}]})
    t.call("close_client", client="c", expect={"leaks": {"buffers": 4, "prepared_models": 3, "events": 0}})
    return [t]


def dynamic_async_and_dims():
    out = []
    t = Trace("dynamic", "gen_resized_by_async_executions", "A dynamic [0,3] buffer written by asynchronous "
              "executions at [2,3], [4,3], [1,3]: each wait reports the new dims and the buffer holds them (copy_to "
              "of the new size works, of the old one is refused)", [("3.dynamic", "entry")], requires=["memory_domains"])
    base(t)
    t.mem("m12", 12)
    t.allocate("td", ["pd"], output_roles=[role(0, 0)])
    for n, (src_a, src_b, dst, vals) in ((2, ("a", "b", "m24", SUM)), (4, ("a48", "b48", "m48", SUM * 2)),
                                          (1, ("a", "b", "m12", SUM[:3]))):
        t.call("execute_async", prepared="pd", as_="ev%d" % n,
               request={"inputs": [{"pool": 0, "length": 12 * n, "dims": [n, 3]},
                                   {"pool": 1, "length": 12 * n, "dims": [n, 3]}],
                        "outputs": [{"pool": 2}], "pools": [{"memory": src_a}, {"memory": src_b}, {"token": "td"}]})
        t.call("wait_event", event="ev%d" % n, expect={"status": "NONE", "shapes": [{"dims": [n, 3]}]})
        t.call("copy_to", token="td", dst=dst)
        t.check(dst, f32(vals))
        t.call("copy_to", token="td", dst="m24" if n != 2 else "m48", expect={"status": "INVALID_ARGUMENT"})
    out.append(t)

    for call in ("execute", "execute_async"):
        t = Trace("dynamic", "gen_kept_dims_checked_before_init__%s" % ("sync" if call == "execute" else "async"),
                  "A dynamic [0,3] buffer (input and output roles) written at [2,3], then uninitialized by a failed "
                  "request, keeps [2,3] (8.8): as an input with dims [4,3] it is INVALID_ARGUMENT (dims combine with "
                  "the current dims, 8.6, checked before initialization, 8.5), with dims [2,3] GENERAL_FAILURE "
                  "(through %s)" % call,
                  [("8.6", "after_failure"), ("8.6", "side"), ("8.5", "entry"), ("8.8", "after_failure")],
                  requires=["memory_domains"])
        base(t)
        t.allocate("td", ["pd"], input_roles=[role(0, 0)], output_roles=[role(0, 0)])
        t.call("execute", prepared="pd", request={"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]},
                                                             {"pool": 1, "length": 24, "dims": [2, 3]}],
                                                  "outputs": [{"pool": 2}],
                                                  "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "td"}]})
        t.call("execute", prepared="pd", request={"inputs": [{"pool": 0, "length": 20, "dims": [2, 3]},
                                                             {"pool": 1, "length": 24, "dims": [2, 3]}],
                                                  "outputs": [{"pool": 2}],
                                                  "pools": [{"memory": "a"}, {"memory": "b"}, {"token": "td"}]},
               expect={"status": "INVALID_ARGUMENT"})
        for dims, status in (([4, 3], "INVALID_ARGUMENT"), ([2, 3], "GENERAL_FAILURE")):
            n = dims[0]
            req = {"inputs": [{"pool": 0, "dims": dims}, {"pool": 1, "length": 12 * n, "dims": dims}],
                   "outputs": [{"pool": 2, "length": 12 * n}],
                   "pools": [{"token": "td"}, {"memory": "b48" if n == 4 else "b"}, {"memory": "m48" if n == 4 else "m24"}]}
            if call == "execute":
                t.call("execute", prepared="pd", request=req, expect={"status": status})
            else:
                t.call("execute_async", prepared="pd", request=req, as_="ev%d" % n, expect={"status": status})
        out.append(t)
    return out


def generate():
    return copy_failures() + execution_failures() + async_events() + fault_plans() + fault_plans_exec() + leaks() + \
        in_use() + in_use_queued_constants() + dynamic_async_and_dims()
