"""fam_models.py - models are validated whole (SPEC 8.15, v1.2): each way a model is invalid (an
operand index out of range, an operand read before anything writes it, an operation kind that does
not exist, each operation parameter outside the NN HAL's range, NaN and infinities included) is
INVALID_ARGUMENT from get_supported_operations and from prepare_model, alone and beside a valid
operation the driver has no kernel for (invalid outranks unsupported); the same model made valid
is supported (get_supported_operations 1, prepare NONE), and beside the unsupported operation it is
reported 0 for that operation and refused as unsupported at prepare (GENERAL_FAILURE, SPEC 7)."""
import struct

from tracelib import Trace, tensor

FAMILY = "models"


def values(items):
    """operand_values as bytes: items are ("i32" | "f32", value), little-endian, in order."""
    raw = b"".join(struct.pack("<i" if typ == "i32" else "<f", v) for typ, v in items)
    return {"hex": raw.hex()}


def const(typ, offset, length, dims=None):
    o = {"type": typ}
    if dims is not None:
        o["dims"] = list(dims)
    o.update({"lifetime": "CONSTANT_COPY", "offset": offset, "length": length})
    return o


def binary(op, act):
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), tensor((2, 3), "SUBGRAPH_INPUT"), const("INT32", 0, 4),
                         tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": op, "inputs": [0, 1, 2], "outputs": [3]}],
            "inputs": [0, 1], "outputs": [3], "values": [("i32", act)]}


def fully_connected(act):
    w = [("f32", float(i % 5) - 2) for i in range(12)]
    bias = [("f32", 0.5)] * 4
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), const("TENSOR_FLOAT32", 0, 48, (4, 3)),
                         const("TENSOR_FLOAT32", 48, 16, (4,)), const("INT32", 64, 4),
                         tensor((2, 4), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "FULLY_CONNECTED", "inputs": [0, 1, 2, 3], "outputs": [4]}],
            "inputs": [0], "outputs": [4], "values": w + bias + [("i32", act)]}


def softmax(beta):
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), const("FLOAT32", 0, 4), tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "SOFTMAX", "inputs": [0, 1], "outputs": [2]}],
            "inputs": [0], "outputs": [2], "values": [("f32", beta)]}


def reshape(shape):
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), const("TENSOR_INT32", 0, 8, (2,)),
                         tensor(None, "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "RESHAPE", "inputs": [0, 1], "outputs": [2]}],
            "inputs": [0], "outputs": [2], "values": [("i32", v) for v in shape]}


def concatenation(axis):
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), tensor((2, 3), "SUBGRAPH_INPUT"), const("INT32", 0, 4),
                         tensor(None, "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "CONCATENATION", "inputs": [0, 1, 2], "outputs": [3]}],
            "inputs": [0, 1], "outputs": [3], "values": [("i32", axis)]}


def relu_graph(ops, temps=1):
    """RELU operations over input 0, temporaries 1..temps, output temps+1."""
    n = temps + 1
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT")] + [tensor((2, 3), "TEMPORARY_VARIABLE")] * temps
            + [tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "RELU" if k is None else k, "inputs": [i], "outputs": [o]} for k, i, o in ops],
            "inputs": [0], "outputs": [n], "values": []}


def with_unsupported(m):
    """m plus a valid quant8 ADD the reference has no kernel for, on operands of its own (last operation)."""
    base = len(m["operands"])
    off = 4 * len(m["values"])
    q = lambda life: tensor((2, 3), life, "TENSOR_QUANT8_ASYMM", scale=0.5, zero_point=0)  # noqa: E731
    out = dict(m)
    out["operands"] = m["operands"] + [q("SUBGRAPH_INPUT"), q("SUBGRAPH_INPUT"), const("INT32", off, 4),
                                       q("SUBGRAPH_OUTPUT")]
    out["operations"] = m["operations"] + [{"type": "ADD", "inputs": [base, base + 1, base + 2],
                                            "outputs": [base + 3]}]
    out["inputs"] = m["inputs"] + [base, base + 1]
    out["outputs"] = m["outputs"] + [base + 3]
    out["values"] = m["values"] + [("i32", 0)]
    return out


def render(m):
    out = {k: v for k, v in m.items() if k != "values"}
    if m["values"]:
        out["operand_values"] = values(m["values"])
    return out


NAN, INF = float("nan"), float("inf")

# name -> (what is invalid, the invalid model, the same model made valid, extra covers)
CASES = [
    ("operand_index_out_of_range", "a RELU reading operand 7 of 2",
     relu_graph([(None, 7, 1)], temps=0), relu_graph([(None, 0, 1)], temps=0), []),
    ("operand_read_before_written", "a RELU reading a temporary that a later RELU writes",
     relu_graph([(None, 1, 2), (None, 0, 1)]), relu_graph([(None, 0, 1), (None, 1, 2)]), []),
    ("operand_never_written", "a RELU reading a temporary that no operation writes",
     relu_graph([(None, 1, 2)]), relu_graph([(None, 0, 1), (None, 1, 2)]), []),
    ("operation_kind_unknown", "an operation of kind 77 (no such kind)",
     relu_graph([(77, 0, 1)], temps=0), relu_graph([(None, 0, 1)], temps=0), []),
    ("add_activation_4", "ADD with fused activation 4 (0..3)", binary("ADD", 4), binary("ADD", 3), []),
    ("sub_activation_negative", "SUB with fused activation -1", binary("SUB", -1), binary("SUB", 0), []),
    ("mul_activation_4", "MUL with fused activation 4", binary("MUL", 4), binary("MUL", 2), []),
    ("fully_connected_activation_4", "FULLY_CONNECTED with fused activation 4", fully_connected(4),
     fully_connected(1), []),
    ("softmax_beta_zero", "SOFTMAX with beta 0 (beta is finite and > 0)", softmax(0.0), softmax(1.0), []),
    ("softmax_beta_negative", "SOFTMAX with beta -1", softmax(-1.0), softmax(0.5), []),
    ("softmax_beta_inf", "SOFTMAX with beta +inf", softmax(INF), softmax(2.0), [("8.15", "numerics")]),
    ("softmax_beta_nan", "SOFTMAX with beta NaN", softmax(NAN), softmax(1.0), [("8.15", "numerics")]),
    ("reshape_two_minus_one", "RESHAPE to [-1,-1] (one -1 at most)", reshape([-1, -1]), reshape([3, -1]), []),
    ("concatenation_axis_rank", "CONCATENATION of rank-2 tensors on axis 2 (axis in [-2, 2))", concatenation(2),
     concatenation(1), []),
    ("concatenation_axis_below", "CONCATENATION of rank-2 tensors on axis -3", concatenation(-3), concatenation(-2),
     []),
]


def generate():
    out = []
    for name, what, bad, good, extra in CASES:
        t = Trace("models", "gen_model_invalid_%s" % name, "%s is an invalid model: get_supported_operations and "
                  "prepare_model refuse it with INVALID_ARGUMENT, alone and beside a valid quant8 ADD the driver "
                  "has no kernel for (invalid outranks unsupported); made valid, it is supported, and beside the "
                  "quant8 ADD only that ADD is reported unsupported (prepare: GENERAL_FAILURE)" % (
                      "A model with " + what), [("8.15", "entry")] + extra)
        t.device("dev", "")
        t.client("c")
        n = len(good["operations"])
        for label, m in (("bad", bad), ("bad_unsup", with_unsupported(bad))):
            t.model(label, render(m))
            t.call("get_supported_operations", model=label, expect={"status": "INVALID_ARGUMENT"})
            t.call("prepare_model", model=label, as_="p_" + label, expect={"status": "INVALID_ARGUMENT"})
        t.comment("the same model made valid")
        t.model("good", render(good))
        t.call("get_supported_operations", model="good", expect={"status": "NONE", "supported": [1] * n})
        t.prepare("p_good", "good")
        t.model("good_unsup", render(with_unsupported(good)))
        t.call("get_supported_operations", model="good_unsup", expect={"status": "NONE", "supported": [1] * n + [0]})
        t.call("prepare_model", model="good_unsup", as_="p_good_unsup", expect={"status": "GENERAL_FAILURE"})
        out.append(t)
    return out
