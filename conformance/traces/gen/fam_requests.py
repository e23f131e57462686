"""fam_requests.py - request validation (SPEC 2 request arguments, SPEC 4, 8.1, 8.5-8.7, 8.14, 8.17), each
rule on the input side and on the output side, through execute and through execute_async (which
must refuse at once and make no event, SPEC 8.9). After every refused request the trace checks
what SPEC 4 says a failure leaves: an initialized device output of the request is uninitialized
(its dims kept, 8.8), inputs are untouched, no event was made (the leak report counts none), and
the client still runs a valid request."""
from rules import RULES
from tracelib import (Trace, binary_model, two_output_model, act_input_model, role, f32, fill, tensor, i32_const,
                      F32_ADD_A, F32_ADD_B)

FAMILY = "requests"
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]
DYN = {"operands": [tensor((0, 3), "SUBGRAPH_INPUT"), tensor((0, 3), "SUBGRAPH_INPUT"), i32_const(),
                    tensor((0, 3), "SUBGRAPH_OUTPUT")],
       "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
       "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}}
BIG = 1 << 64


def A(off=0, length=24, pool=0, **kw):
    d = {"pool": pool}
    if off:
        d["offset"] = off if off < (1 << 53) else "0x%x" % off
    if length:
        d["length"] = length
    d.update(kw)
    return d


def T(pool, **kw):
    d = {"pool": pool}
    d.update(kw)
    return d


def fixture(t):
    t.device("dev", "")
    t.client("c")
    t.model("add", binary_model())
    t.prepare("p", "add")
    t.prepare("p_same", "add")
    t.model("add_dyn", DYN)
    t.prepare("pd", "add_dyn")
    t.model("two", two_output_model())
    t.prepare("p2o", "two")
    t.model("actin", act_input_model())
    t.prepare("ps", "actin")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))
    t.mem("a32", 32, data=f32(F32_ADD_A + [7, 8]))
    t.mem("o", 24, data=fill(24))
    t.mem("o32", 32, data=fill(32))
    t.mem("back", 24)
    t.allocate("tin", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="tin", src="a")
    t.allocate("tin1", ["p"], input_roles=[role(0, 1)])
    t.call("copy_from", token="tin1", src="b")
    t.allocate("tout", ["p"], output_roles=[role(0, 0)])
    t.call("copy_from", token="tout", src="b")
    t.allocate("tio", ["p"], input_roles=[role(0, 0)], output_roles=[role(0, 0)])
    t.call("copy_from", token="tio", src="a")
    t.allocate("tu", ["p"], input_roles=[role(0, 0)])


def run_call(t, call, prepared, req, exp, n, shapes=None):
    """The request through execute, or execute_async (+ wait_event when it is accepted)."""
    if call == "execute":
        e = {"status": exp}
        if shapes is not None and exp == "NONE":
            e["shapes"] = shapes
        t.call("execute", prepared=prepared, request=req, expect=e)
    else:
        t.call("execute_async", prepared=prepared, request=req, as_="ev%d" % n, expect={"status": exp})
        if exp == "NONE":
            e = {"status": "NONE"}
            if shapes is not None:
                e["shapes"] = shapes
            t.call("wait_event", event="ev%d" % n, expect=e)


def after_failure(t, out_token):
    """What SPEC 4 says a failed request leaves, and a valid request still runs."""
    if out_token:
        t.comment("the request's initialized device output is uninitialized now (SPEC 4), its dims kept (8.8)")
        t.call("copy_to", token=out_token, dst="back", expect={"status": "GENERAL_FAILURE"})
    t.call("copy_to", token="tin", dst="back")
    t.check("back", f32(F32_ADD_A))
    t.mem("ok_out", 24)
    t.call("execute", prepared="p", request={"inputs": [A(), A(pool=1)], "outputs": [A(pool=2)],
                                             "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "ok_out"}]},
           expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
    t.check("ok_out", f32(SUM))
    t.call("close_client", client="c", expect={"leaks": {"events": 0}})


MEM = {"memory": "a"}, {"memory": "b"}


def req(ins, outs, pools):
    return {"inputs": ins, "outputs": outs, "pools": pools}


# Each scenario: name -> (description, covers, side, builder). A builder gets the trace and returns
# (prepared, request, expected status, the device output token to check afterwards or None).
def scenarios():
    S = {}

    def add(name, desc, covers, fn, must_pass=True):
        S[name] = (desc, covers, fn, must_pass)

    std_out = [T(2)], [{"memory": "a"}, {"memory": "b"}, {"token": "tout"}]
    tok_in = [T(2)], [{"token": "tin"}, {"memory": "b"}, {"token": "tout"}]

    # ---- argument counts (SPEC 4) ----
    add("inputs_missing", "one input for a two-input model", [("4.counts", "side")],
        lambda t: ("p", req([A()], *std_out), "INVALID_ARGUMENT", "tout"))
    add("inputs_extra", "three inputs for a two-input model", [("4.counts", "side")],
        lambda t: ("p", req([A(), A(pool=1), A()], *std_out), "INVALID_ARGUMENT", "tout"))
    add("outputs_missing", "no output for a one-output model", [("4.counts", "side")],
        lambda t: ("p", req([A(), A(pool=1)], [], [{"memory": "a"}, {"memory": "b"}]), "INVALID_ARGUMENT", None))
    add("outputs_extra", "two outputs (the token and a pool) for a one-output model", [("4.counts", "side")],
        lambda t: ("p", req([A(), A(pool=1)], [T(2), A(pool=3)],
                            [{"memory": "a"}, {"memory": "b"}, {"token": "tout"}, {"memory": "o"}]),
                   "INVALID_ARGUMENT", "tout"))
    # ---- arguments inside their pool (SPEC 2) ----
    add("input_pool_index_out_of_range", "input 0 names pool 5 of a 3-pool request", [("2.arg_range", "side")],
        lambda t: ("p", req([A(pool=5), A(pool=1)], *std_out), "INVALID_ARGUMENT", "tout"))
    add("output_pool_index_out_of_range", "the output names pool 5 of a 3-pool request", [("2.arg_range", "side")],
        lambda t: ("p", req([A(), A(pool=1)], [A(pool=5)], [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]),
                   "INVALID_ARGUMENT", None))
    for side in ("input", "output"):
        for nm, off, ln, d in (("past_end", 4, 24, "offset 4 + length 24 of a 24-byte pool"),
                               ("offset_past_end", 100, 24, "offset 100 of a 24-byte pool"),
                               ("wrapping", BIG - 8, 24, "offset 2^64-8 + length 24 wraps 64 bits")):
            cov = [("2.arg_range", "side")]
            if nm == "wrapping":
                cov += [("2.arg_range", "geometry"), ("8.17", "side"), ("8.17", "geometry")]
            if side == "input":
                add("%s_%s" % (side, nm), "input 0 at %s" % d, cov,
                    (lambda off, ln: lambda t: ("p", req([A(off, ln), A(pool=1)], *std_out), "INVALID_ARGUMENT",
                                                "tout"))(off, ln))
            else:
                add("%s_%s" % (side, nm), "the output at %s" % d, cov,
                    (lambda off, ln: lambda t: ("p", req([T(0), A(pool=1)], [A(off, ln, pool=2)],
                                                         [{"token": "tin"}, {"memory": "b"}, {"memory": "o"}]),
                                                "INVALID_ARGUMENT", None))(off, ln))

    def window(t, side):
        t.comment("an MMAP_FD pool: a 24-byte window at file offset 4196 of an 8192-byte file; the argument "
                  "lies past the window but inside the file")
        t.mem("win", 24, kind="mmap_fd", offset=4196, file_size=8192,
              data=f32(F32_ADD_A if side == "input" else [0] * 6))
        if side == "input":
            return "p", req([A(24, 24), A(pool=1)], [T(2)], [{"memory": "win"}, {"memory": "b"}, {"token": "tout"}]), \
                "INVALID_ARGUMENT", "tout"
        return "p", req([T(0), A(pool=1)], [A(24, 24, pool=2)], [{"token": "tin"}, {"memory": "b"}, {"memory": "win"}]), \
            "INVALID_ARGUMENT", None
    for side in ("input", "output"):
        add("%s_past_mmap_window" % side, "%s past its MMAP_FD window, inside the file" % side,
            [("2.arg_range", "side"), ("2.arg_range", "geometry")], (lambda s: lambda t: window(t, s))(side))

    def blob(t, side):
        t.mem("bl", 24, kind="blob", data=f32(F32_ADD_A))
        if side == "input":
            return "p", req([A(8, 24), A(pool=1)], [T(2)], [{"memory": "bl"}, {"memory": "b"}, {"token": "tout"}]), \
                "INVALID_ARGUMENT", "tout"
        return "p", req([T(0), A(pool=1)], [A(8, 24, pool=2)], [{"token": "tin"}, {"memory": "b"}, {"memory": "bl"}]), \
            "INVALID_ARGUMENT", None
    for side in ("input", "output"):
        add("%s_past_blob" % side, "%s at offset 8 + 24 of a 24-byte BLOB" % side,
            [("2.arg_range", "side"), ("2.arg_range", "geometry")], (lambda s: lambda t: blob(t, s))(side))

    # ---- byte sizes that do not fit 64 bits (8.17, v1.2): 769546 x 742155 x 48448661 floats are
    # 6 * 2^64 + 24 bytes, exactly the argument's length 24 when computed modulo 2^64 ----
    for side in ("input", "output"):
        add("%s_dims_size_wraps" % side, "%s dims [%s] whose float32 byte size (6*2^64 + 24) wraps to the "
            "argument's length 24" % ("input 0" if side == "input" else "the output", ",".join(map(str, WRAP_DIMS))),
            [("8.17", "side")], (lambda s: lambda t: size_wraps(t, s))(side))
    # ---- lengths (SPEC 2, 8.1) ----
    add("input_length_short", "input 0 length 20 for [2,3] floats (24 bytes)",
        [("2.arg_length", "side"), ("8.1", "side")],
        lambda t: ("p", req([A(0, 20), A(pool=1)], *std_out), "INVALID_ARGUMENT", "tout"))
    add("input_length_long", "input 0 length 28 (in a 32-byte pool) for [2,3] floats",
        [("2.arg_length", "side"), ("8.1", "side")],
        lambda t: ("p", req([A(0, 28), A(pool=1)], [T(2)], [{"memory": "a32"}, {"memory": "b"}, {"token": "tout"}]),
                   "INVALID_ARGUMENT", "tout"))
    add("output_length_long", "the output length 28 (in a 32-byte pool) for [2,3] floats: longer is "
        "INVALID_ARGUMENT (8.1)", [("2.arg_length", "side"), ("8.1", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [A(0, 28, pool=2)], [{"token": "tin"}, {"memory": "b"}, {"memory": "o32"}]),
                   "INVALID_ARGUMENT", None))
    add("input_length_short_combined_dims", "input 0 of model dims [0,3] given dims [2,3] and length 20",
        [("2.arg_length", "side"), ("4.arg_dims", "side")],
        lambda t: ("pd", req([A(0, 20, dims=[2, 3]), A(pool=1, dims=[2, 3])], [A(pool=2)],
                             [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]), "INVALID_ARGUMENT", None))
    add("output_length_long_combined_dims", "the output of model dims [0,3] given dims [2,3] and length 28",
        [("2.arg_length", "side"), ("4.arg_dims", "side")],
        lambda t: ("pd", req([A(dims=[2, 3]), A(pool=1, dims=[2, 3])], [A(0, 28, pool=2, dims=[2, 3])],
                             [{"memory": "a"}, {"memory": "b"}, {"memory": "o32"}]), "INVALID_ARGUMENT", None))
    # ---- token arguments: offset and length 0 (SPEC 2) ----
    for side in ("input", "output"):
        for nm, kw in (("offset", {"offset": 4}), ("length", {"length": 24}), ("length_short", {"length": 4})):
            if side == "input":
                fn = (lambda kw: lambda t: ("p", req([T(0, **kw), A(pool=1)], *tok_in), "INVALID_ARGUMENT", "tout"))(kw)
            else:
                fn = (lambda kw: lambda t: ("p", req([T(0), A(pool=1)], [T(2, **kw)],
                                                     [{"token": "tin"}, {"memory": "b"}, {"token": "tout"}]),
                                            "INVALID_ARGUMENT", "tout"))(kw)
            add("token_%s_%s" % (side, nm), "a token %s argument with %s" % (side, kw), [("2.token_arg", "side")], fn)
    # ---- roles (SPEC 4) ----
    add("role_input_token_as_output", "a token allocated only as input 0 used as the output (a device output "
        "of the request all the same: uninitialized by the failure)",
        [("4.role", "side")],
        lambda t: ("p", req([A(), A(pool=1)], [T(2)], [{"memory": "a"}, {"memory": "b"}, {"token": "tin1"}]),
                   "INVALID_ARGUMENT", "tin1"))
    add("role_output_token_as_input", "an initialized token allocated only as the output used as input 0",
        [("4.role", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [A(pool=2)], [{"token": "tout"}, {"memory": "b"}, {"memory": "o"}]),
                   "INVALID_ARGUMENT", None))
    add("role_input_wrong_index", "a token allocated as input 0 used as input 1", [("4.role", "side")],
        lambda t: ("p", req([A(), T(1)], [T(2)], [{"memory": "a"}, {"token": "tin"}, {"token": "tout"}]),
                   "INVALID_ARGUMENT", "tout"))
    add("role_input_other_prepared_model", "a token of (p, input 0) used as input 0 of p_same, prepared from an "
        "identical model", [("4.role", "side")],
        lambda t: ("p_same", req([T(0), A(pool=1)], [A(pool=2)], [{"token": "tin"}, {"memory": "b"}, {"memory": "o"}]),
                   "INVALID_ARGUMENT", None))
    add("role_output_other_prepared_model", "a token of (p, output 0) used as the output of p_same",
        [("4.role", "side")],
        lambda t: ("p_same", req([A(), A(pool=1)], [T(2)], [{"memory": "a"}, {"memory": "b"}, {"token": "tout"}]),
                   "INVALID_ARGUMENT", "tout"))
    # ---- aliasing (SPEC 4) ----
    add("alias_output_as_input_same_pool", "a token (input 0 and output roles) as input 0 and as the output "
        "through one pool", [("4.alias", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [T(0)], [{"token": "tio"}, {"memory": "b"}]), "INVALID_ARGUMENT", "tio"))
    add("alias_output_as_input_two_pools", "the same token as input 0 and as the output through two pool entries",
        [("4.alias", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [T(2)], [{"token": "tio"}, {"memory": "b"}, {"token": "tio"}]),
                   "INVALID_ARGUMENT", "tio"))

    def twice(t):
        t.allocate("u", ["p2o"], output_roles=[role(0, 0), role(0, 1)])
        t.call("copy_from", token="u", src="a")
        return "p2o", req([A(), A(pool=1)], [T(2), T(3)], [{"memory": "a"}, {"memory": "b"}, {"token": "u"},
                                                            {"token": "u"}]), "INVALID_ARGUMENT", "u"
    add("alias_one_token_two_outputs", "one token (roles output 0 and 1) as both outputs", [("4.alias", "side")], twice)
    add("alias_same_token_two_inputs_ok", "the same token as both inputs is fine: out = a + a",
        [("4.alias", "side")], lambda t: same_two_inputs(t))
    # ---- dims on arguments (SPEC 4, 8.6) ----
    add("token_input_dims_mismatch", "dims [3,2] on a [2,3] token input", [("4.token_dims", "side")],
        lambda t: ("p", req([T(0, dims=[3, 2]), A(pool=1)], *tok_in), "INVALID_ARGUMENT", "tout"))
    add("token_output_dims_mismatch", "dims [3,2] on a [2,3] token output", [("4.token_dims", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [T(2, dims=[3, 2])], [{"token": "tin"}, {"memory": "b"}, {"token": "tout"}]),
                   "INVALID_ARGUMENT", "tout"))
    add("token_input_dims_vs_current", "a [0,3] buffer written at [2,3] given input dims [4,3]: inputs combine "
        "with the current dims (8.6)", [("4.token_dims", "side"), ("8.6", "side")], lambda t: dyn_dims(t, "input"))
    add("token_output_dims_vs_initial_ok", "a [0,3] buffer written at [2,3] given output dims [4,3]: outputs "
        "combine with the initial dims, so it is resized (8.6)", [("4.token_dims", "side"), ("8.6", "side")],
        lambda t: dyn_dims(t, "output"))
    add("input_dims_mismatch_model", "input 0 dims [3,2] on a [2,3] model input", [("4.arg_dims", "side")],
        lambda t: ("p", req([A(dims=[3, 2]), A(pool=1)], *std_out), "INVALID_ARGUMENT", "tout"))
    add("output_dims_mismatch_model", "output dims [3,2] on a [2,3] model output", [("4.arg_dims", "side")],
        lambda t: ("p", req([T(0), A(pool=1)], [A(pool=2, dims=[3, 2])], [{"token": "tin"}, {"memory": "b"}, {"memory": "o"}]),
                   "INVALID_ARGUMENT", None))
    add("input_dims_unknown", "input 0 of model dims [0,3] with no dims on the argument (its size is unknown)",
        [("4.arg_dims", "side")],
        lambda t: ("pd", req([A(0, 24), A(pool=1, dims=[2, 3])], [A(pool=2)],
                             [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]), "INVALID_ARGUMENT", None))

    def scalar_dims(t):
        t.mem("act", 4, data={"i32": [0]})
        return "ps", req([A(), A(pool=1), A(0, 4, pool=2, dims=[1])], [A(pool=3)],
                         [{"memory": "a"}, {"memory": "b"}, {"memory": "act"}, {"memory": "o"}]), "INVALID_ARGUMENT", None
    add("scalar_input_with_dims", "dims [1] on the scalar INT32 activation input", [("4.arg_dims", "side")], scalar_dims)
    # ---- initialization (SPEC 4, 8.5) ----
    add("input_uninitialized", "an uninitialized token as input 0: GENERAL_FAILURE", [("4.init", "entry")],
        lambda t: ("p", req([T(0), A(pool=1)], *([T(2)], [{"token": "tu"}, {"memory": "b"}, {"token": "tout"}])),
                   "GENERAL_FAILURE", "tout"))
    add("input_uninitialized_by_failed_execution", "a token (input and output roles) that a failed execution "
        "(input 1 length 20) had as its output is uninitialized: as input 0 next, GENERAL_FAILURE",
        [("4.init", "after_failure"), ("4.failure_results", "after_failure")], lambda t: uninit_by_failure(t))
    for nm, d, fn in (
            ("uninit_input0_then_long_output", "input 0 uninitialized, the output length 28 (INVALID)",
             lambda t: ("p", req([T(0), A(pool=1)], [A(0, 28, pool=2)], [{"token": "tu"}, {"memory": "b"}, {"memory": "o32"}]),
                        "INVALID_ARGUMENT", None)),
            ("invalid_input0_then_uninit_input1", "input 0 length 20 (INVALID), input 1 an uninitialized token",
             lambda t: uninit_second(t)),
            ("uninit_input_then_bad_unused_pool", "input 0 uninitialized, an unused pool with fd -1",
             lambda t: uninit_bad_pool(t)),
            ("uninit_input_then_output_role", "input 0 uninitialized, the output a token without that role",
             lambda t: ("p", req([T(0), A(pool=1)], [T(2)], [{"token": "tu"}, {"memory": "b"}, {"token": "tin1"}]),
                        "INVALID_ARGUMENT", "tin1"))):
        add("order_" + nm, "%s: every INVALID_ARGUMENT comes before any initialization check (8.5)" % d,
            [("8.5", "side")], fn)
    # ---- unused tokens (8.7) ----
    add("unused_token_uninitialized_ok", "an uninitialized token in the pools that no argument uses: checked as "
        "a handle only, the request runs", [("8.7", "entry")], lambda t: unused_ok(t, "tu"))
    add("unused_token_other_role_ok", "an initialized token of another model's role in the pools, unused: the "
        "request runs", [("8.7", "entry")], lambda t: unused_ok(t, "tother"))
    # ---- pools that cannot be read or written (8.14, v1.2: the prot a use needs) ----
    add("input_pool_write_only", "input 0 on a write-only pool: INVALID_ARGUMENT (8.14)",
        [("2.validate", "side"), ("8.14", "side")], lambda t: prot_case(t, "input"))
    add("output_pool_read_only", "the output on a read-only pool: INVALID_ARGUMENT (8.14), the pool not written",
        [("2.validate", "side"), ("8.14", "side")], lambda t: prot_case(t, "output"))
    return S


def same_two_inputs(t):
    t.allocate("tboth", ["p"], input_roles=[role(0, 0), role(0, 1)])
    t.call("copy_from", token="tboth", src="a")
    t.mem("o2", 24)
    return "p", req([T(0), T(0)], [A(pool=1)], [{"token": "tboth"}, {"memory": "o2"}]), "NONE", \
        ("check", "o2", [2 * x for x in F32_ADD_A])


def dyn_dims(t, side):
    t.allocate("td", ["pd"], input_roles=[role(0, 0)], output_roles=[role(0, 0)])
    t.call("execute", prepared="pd", request=req([A(dims=[2, 3]), A(pool=1, dims=[2, 3])], [T(2)],
                                                 [{"memory": "a"}, {"memory": "b"}, {"token": "td"}]),
           expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
    if side == "input":
        t.mem("b48", 48, data=f32(F32_ADD_B * 2))
        return "pd", req([T(0, dims=[4, 3]), A(0, 48, pool=1, dims=[4, 3])], [A(pool=2)],
                         [{"token": "td"}, {"memory": "b48"}, {"memory": "o"}]), "INVALID_ARGUMENT", None
    t.mem("a48", 48, data=f32(F32_ADD_A * 2))
    t.mem("b48", 48, data=f32(F32_ADD_B * 2))
    t.mem("o48", 48)
    return "pd", req([A(0, 48, dims=[4, 3]), A(0, 48, pool=1, dims=[4, 3])], [T(2, dims=[4, 3])],
                     [{"memory": "a48"}, {"memory": "b48"}, {"token": "td"}]), "NONE", ("copy", "td", "o48", SUM * 2)


def uninit_by_failure(t):
    t.call("execute", prepared="p", request=req([A(), A(0, 20, pool=1)], [T(2)],
                                                [{"memory": "a"}, {"memory": "b"}, {"token": "tio"}]),
           expect={"status": "INVALID_ARGUMENT"})
    return "p", req([T(0), A(pool=1)], [T(2)], [{"token": "tio"}, {"memory": "b"}, {"token": "tout"}]), \
        "GENERAL_FAILURE", "tout"


def uninit_second(t):
    t.allocate("tu1", ["p"], input_roles=[role(0, 1)])
    return "p", req([A(0, 20), T(1)], [T(2)], [{"memory": "a"}, {"token": "tu1"}, {"token": "tout"}]), \
        "INVALID_ARGUMENT", "tout"


def uninit_bad_pool(t):
    t.ev("bad_memory", as_="badfd", kind="ashmem", fd=-1, size=24)
    return "p", req([T(0), A(pool=1)], [T(2)], [{"token": "tu"}, {"memory": "b"}, {"token": "tout"},
                                                {"memory": "badfd"}]), "INVALID_ARGUMENT", "tout"


def unused_ok(t, tok):
    if tok == "tother":
        t.allocate("tother", ["pd"], input_roles=[role(0, 0)], dims=[2, 3])
        t.call("copy_from", token="tother", src="a")
    t.mem("o_u", 24)
    return "p", req([A(), A(pool=1)], [A(pool=2)], [{"memory": "a"}, {"memory": "b"}, {"memory": "o_u"},
                                                   {"token": tok}]), "NONE", ("check", "o_u", SUM)


def prot_case(t, side):
    if side == "input":
        t.mem("a_w", 24, data=f32(F32_ADD_A), prot="w")
        return "p", req([A(), A(pool=1)], [T(2)], [{"memory": "a_w"}, {"memory": "b"}, {"token": "tout"}]), \
            "INVALID_ARGUMENT", "tout"
    t.mem("o_r", 24, data=fill(24), prot="r")
    return "p", req([A(), A(pool=1)], [A(pool=2)], [{"memory": "a"}, {"memory": "b"}, {"memory": "o_r"}]), \
        "INVALID_ARGUMENT", ("untouched", "o_r")


WRAP_DIMS = [769546, 742155, 48448661]
DYN3 = {"operands": [tensor((0, 0, 0), "SUBGRAPH_INPUT"), tensor((0, 0, 0), "SUBGRAPH_INPUT"), i32_const(),
                     tensor((0, 0, 0), "SUBGRAPH_OUTPUT")],
        "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
        "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}}


def size_wraps(t, side):
    t.model("add_dyn3", DYN3)
    t.prepare("pd3", "add_dyn3")
    ok = [1, 2, 3]
    if side == "input":
        return "pd3", req([A(dims=WRAP_DIMS), A(pool=1, dims=ok)], [A(pool=2)],
                          [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]), "INVALID_ARGUMENT", ("untouched", "o")
    return "pd3", req([A(dims=ok), A(pool=1, dims=ok)], [A(pool=2, dims=WRAP_DIMS)],
                      [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]), "INVALID_ARGUMENT", ("untouched", "o")


def generate():
    traces = []
    for name, (desc, covers, fn, must_pass) in scenarios().items():
        for call in ("execute", "execute_async"):
            cov = list(covers)
            for rid, _ in covers:
                if "entry" in RULES[rid].axes:
                    cov.append((rid, "entry"))
            if call == "execute_async":
                cov.append(("4.async_validates", "entry"))
            t = Trace("execute", "gen_req_%s__%s" % (name, "sync" if call == "execute" else "async"),
                      "%s, through %s" % (desc, call), sorted(set(cov), key=cov.index),
                      requires=["memory_domains"], must_pass=must_pass)
            fixture(t)
            prepared, request, exp, post = fn(t)
            t.comment("the request under test")
            if isinstance(exp, list):
                if call == "execute":
                    t.call("execute", prepared=prepared, request=request, expect={"status": exp})
                else:
                    t.call("execute_async", prepared=prepared, request=request, as_="ev0", expect={"status": exp})
                    t.call("wait_event", event="ev0", when={"produced": "ev0"}, expect={"status": exp})
            else:
                shapes = [{"dims": [2, 3]}] if exp == "NONE" else None
                if isinstance(post, tuple) and post[0] == "copy":
                    shapes = [{"dims": [4, 3]}]
                run_call(t, call, prepared, request, exp, 0, shapes)
            if isinstance(post, tuple):
                if post[0] == "check":
                    t.check(post[1], f32(post[2]))
                elif post[0] == "copy":
                    t.mem("back48", 48)
                    t.call("copy_to", token=post[1], dst="back48")
                    t.check("back48", f32(post[3]))
                elif post[0] == "untouched":
                    t.check_untouched(post[1], 0, 24)
                post = None
            if exp == "NONE":
                t.call("close_client", client="c", expect={"leaks": {"events": 0}})
            else:
                after_failure(t, post)
            traces.append(t)
    return traces
