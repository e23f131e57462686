"""fam_allocate.py - allocate's validation (SPEC 3, 8.4) on input roles and on output roles: index
ranges, probabilities (NaN and infinities included), duplicates (the same prepared handle twice),
agreement of type, scale and zero point within and across directions, dims combination. Each
refused allocate must leave nothing behind: the client's leak report at close counts only the
buffers that were accepted."""
import math

from tracelib import Trace, binary_model, act_input_model, role, tensor

FAMILY = "allocate"
NAN, INF = float("nan"), float("inf")


def prob(p):
    if isinstance(p, float) and p == 0 and math.copysign(1, p) < 0:
        return -0.0
    if isinstance(p, float) and math.isnan(p):
        return "nan"
    if isinstance(p, float) and math.isinf(p):
        return "inf" if p > 0 else "-inf"
    return p


def r(model=0, io=0, p=1.0):
    return {"model": model, "io": io, "p": prob(p)}


INT_MODEL = {"operands": [tensor((2,), "SUBGRAPH_INPUT", "TENSOR_INT32"), tensor((2,), "SUBGRAPH_OUTPUT", "TENSOR_INT32"),
                          {"type": "TENSOR_INT32", "dims": [1], "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4}],
             "operations": [{"type": "RESHAPE", "inputs": [0, 2], "outputs": [1]}],
             "inputs": [0], "outputs": [1], "operand_values": {"i32": [2]}}


def quant_model(scale, zp):
    """A float RELU with an unused TENSOR_QUANT8_ASYMM input (index 1) of this scale and zero point."""
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"),
                         tensor((2, 3), "SUBGRAPH_INPUT", "TENSOR_QUANT8_ASYMM", scale=scale, zero_point=zp),
                         tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "RELU", "inputs": [0], "outputs": [2]}], "inputs": [0, 1], "outputs": [2]}


def fixture(t):
    t.device("dev", "")
    t.client("c")
    t.model("add", binary_model())
    t.prepare("p", "add")
    t.prepare("p_b", "add")
    t.model("add24", binary_model(da=(2, 4), db=(2, 4), dout=(2, 4)))
    t.prepare("p24", "add24")


def finish(t, accepted):
    t.comment("a refused allocate leaves nothing: the client still allocates, and its leak report counts only "
              "what was accepted")
    t.allocate("t_ok", ["p"], input_roles=[r(0, 0)])
    t.call("close_client", client="c", expect={"leaks": {"buffers": accepted + 1}})


def one(name, desc, covers, fn, must_pass=True):
    t = Trace("allocate", "gen_alloc_" + name, desc, covers, requires=["memory_domains"], must_pass=must_pass)
    fixture(t)
    accepted = fn(t) or 0
    finish(t, accepted)
    return t


def refuse(t, prepared, ins=(), outs=(), dims=None, n=0):
    t.allocate("tx%d" % n, prepared, input_roles=list(ins), output_roles=list(outs), dims=dims,
               expect={"status": "INVALID_ARGUMENT"})


def generate():
    out = []
    bad_p = [("nan", NAN), ("inf", INF), ("minus_inf", -INF), ("zero", 0.0), ("minus_zero", -0.0),
             ("minus_one", -1.0), ("just_above_one", 1.0000001), ("two", 2.0)]
    for side in ("input", "output"):
        for nm, p in bad_p:
            cov = [("3.alloc_probability", "side")]
            if nm in ("nan", "inf", "minus_inf", "minus_zero"):
                cov.append(("3.alloc_probability", "numerics"))
            if side == "input":
                fn = (lambda p: lambda t: refuse(t, ["p"], ins=[r(0, 0, p)], outs=[r(0, 0)]))(p)
            else:
                fn = (lambda p: lambda t: refuse(t, ["p"], ins=[r(0, 0)], outs=[r(0, 0, p)]))(p)
            out.append(one("probability_%s_%s" % (nm, side), "An %s role with probability %s (a valid role on the "
                           "other side): INVALID_ARGUMENT (0 < p <= 1, NaN invalid)" % (side, prob(p)), cov, fn))

        def ok_probs(t, side=side):
            for n, p in enumerate((1.0, 0.5, 1.401298464324817e-45)):
                roles = {"ins": [r(0, 0, p)]} if side == "input" else {"outs": [r(0, 0, p)]}
                t.allocate("ok%d" % n, ["p"], input_roles=roles.get("ins", ()), output_roles=roles.get("outs", ()))
            return 3
        out.append(one("probability_valid_%s" % side, "%s roles with probability 1, 0.5 and the smallest positive "
                       "float (a denormal) are accepted" % side.capitalize(),
                       [("3.alloc_probability", "side"), ("3.alloc_probability", "numerics")], ok_probs))
        # indexes
        for nm, kw in (("model_index_past_end", {"model": 1}), ("model_index_huge", {"model": 0xffffffff}),
                       ("io_index_past_end", {"io": 2 if side == "input" else 1}), ("io_index_huge", {"io": 0xffffffff})):
            rr = dict(r(0, 0), **kw)
            fn = (lambda rr, side: lambda t: refuse(t, ["p"], ins=[rr] if side == "input" else [],
                                                   outs=[rr] if side == "output" else [r(0, 0)]))(rr, side)
            out.append(one("%s_%s" % (nm, side), "An %s role with %s (one prepared model, a 2-input 1-output "
                           "model): INVALID_ARGUMENT" % (side, kw), [("3.alloc_index", "side")], fn))
        # duplicates
        key = "ins" if side == "input" else "outs"

        def dup(t, key=key):
            refuse(t, ["p"], **{key: [r(0, 0), r(0, 0, 0.5)]}, n=0)
            refuse(t, ["p", "p"], **{key: [r(0, 0), r(1, 0)]}, n=1)
            refuse(t, ["p", "p_b", "p"], **{key: [r(2, 0), r(1, 0), r(0, 0)]}, n=2)
        out.append(one("duplicate_%s_roles" % side, "The same %s role twice: directly, through the same prepared "
                       "handle listed twice, and listed twice among three: INVALID_ARGUMENT" % side,
                       [("3.alloc_duplicate", "side")], dup))
        # dims
        def dims_bad(t, side=side):
            roles = {"ins": [r(0, 0)]} if side == "input" else {"outs": [r(0, 0)]}
            refuse(t, ["p"], dims=[3, 2], n=0, **roles)
            refuse(t, ["p"], dims=[6], n=1, **roles)
            refuse(t, ["p"], dims=[2, 3, 1], n=2, **roles)
        out.append(one("dims_desc_vs_%s_role" % side, "desc dims [3,2], [6] and [2,3,1] against a [2,3] %s role: "
                       "INVALID_ARGUMENT" % side, [("3.alloc_dims", "side")], dims_bad))

    def dup_across(t):
        t.allocate("ok_io", ["p"], input_roles=[r(0, 0)], output_roles=[r(0, 0)])
        t.allocate("ok_two", ["p", "p_b"], input_roles=[r(0, 0), r(1, 0)])
        return 2
    out.append(one("same_index_both_directions_ok", "(p, input 0) with (p, output 0), and (p, input 0) with (p_b, "
                   "input 0) of an identical model, are no duplicates", [("3.alloc_duplicate", "side")], dup_across))

    def dims_cross(t):
        refuse(t, ["p", "p24"], ins=[r(0, 0)], outs=[r(1, 0)], n=0)
        refuse(t, ["p24", "p"], ins=[r(1, 1)], outs=[r(0, 0)], n=1)
        refuse(t, ["p", "p24"], outs=[r(0, 0), r(1, 0)], n=2)
    out.append(one("dims_input_vs_output_role", "A [2,3] role against a [2,4] role, input with output and output "
                   "with output: INVALID_ARGUMENT", [("3.alloc_dims", "side")], dims_cross))

    def agree_type(t):
        t.model("actin", act_input_model())
        t.prepare("ps", "actin")
        refuse(t, ["p", "ps"], ins=[r(0, 0), r(1, 2)], n=0)
        refuse(t, ["ps", "p"], ins=[r(0, 2)], outs=[r(1, 0)], n=1)
    out.append(one("agree_type_float_vs_int32_scalar", "A TENSOR_FLOAT32 role with an INT32 role, input with input "
                   "and the INT32 input with a float output: INVALID_ARGUMENT", [("3.alloc_agree", "side")], agree_type))

    def agree_int(t):
        t.model("ints", INT_MODEL)
        t.prepare("pi", "ints", expect={"status": ["NONE", "GENERAL_FAILURE"]})
        t.allocate("tx0", ["p", "pi"], input_roles=[r(0, 0)], output_roles=[r(1, 0)], when={"produced": "pi"},
                   expect={"status": "INVALID_ARGUMENT"})
        t.allocate("tx1", ["pi", "p"], output_roles=[r(0, 0), r(1, 0)], when={"produced": "pi"},
                   expect={"status": "INVALID_ARGUMENT"})
        t.allocate("tx2", ["pi", "p24"], input_roles=[r(0, 0)], output_roles=[r(1, 0)], when={"produced": "pi"},
                   expect={"status": "INVALID_ARGUMENT"})
    out.append(one("agree_type_across_directions", "TENSOR_INT32 roles (a RESHAPE model, when the driver prepares "
                   "it, SPEC 8.4) against TENSOR_FLOAT32 roles: float input with int output, int output with float "
                   "output, int input with float output: INVALID_ARGUMENT", [("3.alloc_agree", "side"), ("8.4", "side")],
                   agree_int))

    def agree_quant(t):
        t.comment("a driver may refuse a model with a quantized operand (SPEC 7): each is prepared only when the "
                  "one before was, and what follows needs the last")
        prev = None
        for nm, sc, zp in (("qa", 0.5, 10), ("qs", 0.25, 10), ("qz", 0.5, 11)):
            t.model(nm, quant_model(sc, zp))
            e = t.prepare("p_" + nm, nm, expect={"status": ["NONE", "GENERAL_FAILURE"]})
            if prev:
                e["when"] = {"produced": prev}
            prev = "p_" + nm
        for n, (pm, roles) in enumerate(((["p_qa", "p_qs"], {"ins": [r(0, 1), r(1, 1)]}),
                                         (["p_qa", "p_qz"], {"ins": [r(0, 1), r(1, 1)]}),
                                         (["p_qa", "p"], {"ins": [r(0, 1), r(1, 0)]}),
                                         (["p_qa", "p"], {"ins": [r(0, 1)], "outs": [r(1, 0)]}))):
            t.allocate("tx%d" % n, pm, input_roles=roles.get("ins", ()), output_roles=roles.get("outs", ()),
                       when={"produced": "p_qz"}, expect={"status": "INVALID_ARGUMENT"})
        t.allocate("same", ["p_qa", "p_qa"], input_roles=[r(0, 1)], when={"produced": "p_qz"},
                   expect={"status": ["NONE", "GENERAL_FAILURE"]})
        t.call("free_buffer", token="same", when={"produced": "same"})
    out.append(one("agree_scale_zero_point", "TENSOR_QUANT8_ASYMM roles (unused inputs of float models) of scale "
                   "0.5 against 0.25, zero point 10 against 11, and a quant8 input against a float input and a float "
                   "output: INVALID_ARGUMENT; a lone quant8 role may be refused (8.4)",
                   [("3.alloc_agree", "side"), ("8.4", "side")], agree_quant))

    def scalar(t):
        t.model("actin", act_input_model())
        t.prepare("ps", "actin")
        refuse(t, ["ps"], ins=[r(0, 2)], dims=[1], n=0)
        refuse(t, ["ps"], ins=[r(0, 2)], dims=[0], n=1)
        t.allocate("ts", ["ps"], input_roles=[r(0, 2)], expect={"status": ["NONE", "GENERAL_FAILURE"]})
        t.call("free_buffer", token="ts", when={"produced": "ts"})
    out.append(one("scalar_role_with_dims", "The scalar INT32 activation input as a role with desc dims [1] or "
                   "[0]: INVALID_ARGUMENT; without dims it may be allocated (8.4: a non-float32 buffer)",
                   [("3.alloc_scalar", "side"), ("8.4", "side")], scalar))
    return out
