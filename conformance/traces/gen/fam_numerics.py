"""fam_numerics.py - operation semantics (SPEC 7) along the numerics axis: ADD, SUB and MUL with
broadcasting of the first operand, of the second and of both, under every fused activation;
SOFTMAX and CONCATENATION on every axis of ranks 1-4, negative axes too; NaN and infinities
through every operation where IEEE arithmetic fixes the result (a NaN through a clamping activation
is the reference's choice: not must-pass). Expected values are computed here in float64 and rounded
to float32; the replayer compares with its default tolerances."""
import math
import struct

from tracelib import Trace, tensor, i32_const, f32, num

FAMILY = "numerics"
NAN, INF = float("nan"), float("inf")
ACT_NAMES = {0: "none", 1: "relu", 2: "relu1", 3: "relu6"}


def act(a, v):
    if a == 0 or math.isnan(v):
        return v
    if a == 1:
        return max(0.0, v)
    if a == 2:
        return min(1.0, max(-1.0, v))
    return min(6.0, max(0.0, v))


def count(d):
    return math.prod(d) if d else 1


def idx(shape):
    out = [()]
    for n in shape:
        out = [i + (k,) for i in out for k in range(n)]
    return out


def at(vals, shape, i):
    i = i[len(i) - len(shape):]
    off = 0
    for n, k in zip(shape, i):
        off = off * n + (0 if n == 1 else k)
    return vals[off]


def bshape(a, b):
    r = max(len(a), len(b))
    a = [1] * (r - len(a)) + list(a)
    b = [1] * (r - len(b)) + list(b)
    return [max(x, y) for x, y in zip(a, b)]


def f32r(v):
    if math.isnan(v) or math.isinf(v):
        return v
    return struct.unpack("<f", struct.pack("<f", v))[0]


def vals(n, seed):
    """n distinct, varied values of both signs (some beyond relu1's and relu6's clamps)."""
    out = []
    for i in range(n):
        v = ((i * 7 + seed * 13) % 23 - 11) * 0.75
        out.append(v if v != 0 else 0.5)
    return out


def run_trace(name, desc, covers, model, inputs, out_dims, expected, must_pass=True):
    t = Trace("numerics", name, desc, covers, must_pass=must_pass)
    t.device("dev", "")
    t.client("c")
    t.model("m", model)
    t.prepare("p", "m")
    pools, ins = [], []
    for k, (d, v) in enumerate(inputs):
        t.mem("in%d" % k, 4 * len(v), data=f32(v))
        pools.append({"memory": "in%d" % k})
        ins.append({"pool": k, "length": 4 * len(v), "dims": list(d)})
    n = count(out_dims)
    t.mem("out", 4 * n + 8, data={"fill": 0xA5, "bytes": 4 * n + 8})
    pools.append({"memory": "out"})
    req = {"inputs": ins, "outputs": [{"pool": len(inputs), "length": 4 * n}], "pools": pools}
    t.call("execute", prepared="p", request=req, expect={"status": "NONE", "shapes": [{"dims": list(out_dims)}]})
    t.check("out", f32([f32r(x) for x in expected]))
    t.check("out", offset=4 * n, type="u8", data={"fill": 0xA5, "bytes": 8})
    return t


def binary():
    out = []
    ops = {"ADD": lambda x, y: x + y, "SUB": lambda x, y: x - y, "MUL": lambda x, y: x * y}
    shapes = [("none", (2, 3), (2, 3)),
              ("first_scalar_like", (1,), (2, 3)), ("first_row", (3,), (2, 3)), ("first_column", (2, 1), (2, 3)),
              ("second_scalar_like", (2, 3), (1,)), ("second_row", (2, 3), (3,)), ("second_column", (2, 3), (2, 1)),
              ("both", (2, 1, 3), (4, 1)), ("both_rank_differs", (3,), (2, 1, 1))]
    for op, fn in ops.items():
        for bname, da, db in shapes:
            for a in range(4):
                if bname not in ("none", "first_row", "second_column", "both") and a != 0:
                    continue
                xa, xb = vals(count(da), 1), vals(count(db), 2)
                do = bshape(da, db)
                exp = [act(a, fn(at(xa, da, i), at(xb, db, i))) for i in idx(do)]
                model = {"operands": [tensor(da, "SUBGRAPH_INPUT"), tensor(db, "SUBGRAPH_INPUT"), i32_const(),
                                      tensor([0] * len(do), "SUBGRAPH_OUTPUT")],
                         "operations": [{"type": op, "inputs": [0, 1, 2], "outputs": [3]}],
                         "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [a]}}
                out.append(run_trace("gen_%s_broadcast_%s_%s" % (op.lower(), bname, ACT_NAMES[a]),
                                     "%s %s %s %s with fused activation %d (%s) -> %s" % (
                                         op, list(da), {"ADD": "+", "SUB": "-", "MUL": "*"}[op], list(db), a,
                                         ACT_NAMES[a], do),
                                     [("7.binary", "numerics")], model, [(da, xa), (db, xb)], do, exp))
    return out


def softmax_exp(d, x, beta, ax):
    r = len(d)
    res = [0.0] * len(x)

    def off(j):
        return sum(j[k] * count(d[k + 1:]) for k in range(r))
    for i in idx(d):
        others = [j for j in idx(d) if all(j[k] == i[k] for k in range(r) if k != ax)]
        m = max(x[off(j)] for j in others)
        s = sum(math.exp(beta * (x[off(j)] - m)) for j in others)
        res[off(i)] = math.exp(beta * (x[off(i)] - m)) / s
    return res


def softmax():
    out = []
    dims = {1: (5,), 2: (2, 3), 3: (2, 3, 2), 4: (2, 1, 3, 2)}
    for r, d in dims.items():
        for axis in range(-r, r):
            x = [((i * 5) % 11 - 5) * 0.4 for i in range(count(d))]
            beta = 0.75
            exp = softmax_exp(d, x, beta, axis % r)
            vals_ = struct.pack("<f", beta) + struct.pack("<i", axis)
            model = {"operands": [tensor(d, "SUBGRAPH_INPUT"),
                                  {"type": "FLOAT32", "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4},
                                  {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 4, "length": 4},
                                  tensor(d, "SUBGRAPH_OUTPUT")],
                     "operations": [{"type": "SOFTMAX", "inputs": [0, 1, 2], "outputs": [3]}],
                     "inputs": [0], "outputs": [3], "operand_values": {"hex": vals_.hex()}}
            out.append(run_trace("gen_softmax_rank%d_axis%s" % (r, ("m%d" % -axis) if axis < 0 else axis),
                                 "SOFTMAX of a rank-%d %s tensor, beta 0.75, axis %d" % (r, list(d), axis),
                                 [("7.softmax", "numerics")], model, [(d, x)], d, exp))
    return out


def concatenation():
    out = []
    dims = {1: (3,), 2: (2, 3), 3: (2, 2, 3), 4: (1, 2, 2, 2)}
    for r, d in dims.items():
        for axis in range(-r, r):
            ax = axis % r
            d2 = list(d)
            d2[ax] = d[ax] + 1
            xa = [float(i + 1) for i in range(count(d))]
            xb = [-float(i + 1) * 0.5 for i in range(count(d2))]
            do = list(d)
            do[ax] = d[ax] + d2[ax]
            outer = count(d[:ax])
            ia, ib = count(d[ax:]), count(d2[ax:])
            exp = []
            for o in range(outer):
                exp += xa[o * ia:(o + 1) * ia] + xb[o * ib:(o + 1) * ib]
            model = {"operands": [tensor(d, "SUBGRAPH_INPUT"), tensor(d2, "SUBGRAPH_INPUT"), i32_const(),
                                  tensor(do, "SUBGRAPH_OUTPUT")],
                     "operations": [{"type": "CONCATENATION", "inputs": [0, 1, 2], "outputs": [3]}],
                     "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [axis]}}
            out.append(run_trace("gen_concatenation_rank%d_axis%s" % (r, ("m%d" % -axis) if axis < 0 else axis),
                                 "CONCATENATION of %s and %s on axis %d -> %s" % (list(d), d2, axis, do),
                                 [("7.concatenation", "numerics")], model, [(d, xa), (d2, xb)], do, exp))
    return out


def nonfinite():
    """NaN and infinities: IEEE results for every operation; NaN under a clamping activation is the
    reference's decision (docs/kernels.md: NaN passes through), so not must-pass."""
    out = []
    X = [INF, -INF, NAN, 1.5, -2.0, 0.0, INF, 0.0]
    Y = [1.0, 2.0, 3.0, INF, -INF, NAN, INF, INF]
    for op, fn in (("ADD", lambda x, y: x + y), ("SUB", lambda x, y: x - y), ("MUL", lambda x, y: x * y)):
        for a in range(4):
            raw = [fn(x, y) for x, y in zip(X, Y)]
            has_nan_clamped = a != 0 and any(math.isnan(v) for v in raw)
            exp = [act(a, v) for v in raw]
            model = {"operands": [tensor((8,), "SUBGRAPH_INPUT"), tensor((8,), "SUBGRAPH_INPUT"), i32_const(),
                                  tensor((8,), "SUBGRAPH_OUTPUT")],
                     "operations": [{"type": op, "inputs": [0, 1, 2], "outputs": [3]}],
                     "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [a]}}
            if has_nan_clamped:
                # the finite and infinite lanes are must-pass; one more trace pins the NaN lanes
                keep = [i for i, v in enumerate(raw) if not math.isnan(v)]
                xs, ys = [X[i] for i in keep], [Y[i] for i in keep]
                m2 = dict(model, operands=[tensor((len(keep),), "SUBGRAPH_INPUT"), tensor((len(keep),), "SUBGRAPH_INPUT"),
                                           i32_const(), tensor((len(keep),), "SUBGRAPH_OUTPUT")])
                out.append(run_trace("gen_%s_infinities_%s" % (op.lower(), ACT_NAMES[a]),
                                     "%s of infinities and finite values with activation %s: IEEE results, clamped"
                                     % (op, ACT_NAMES[a]), [("7.binary", "numerics")], m2,
                                     [((len(keep),), xs), ((len(keep),), ys)], (len(keep),), [act(a, fn(x, y)) for x, y in zip(xs, ys)]))
                out.append(run_trace("gen_%s_nan_%s" % (op.lower(), ACT_NAMES[a]),
                                     "%s with NaN lanes under activation %s: NaN passes through the clamp (the "
                                     "reference's choice, docs/kernels.md; not must-pass)" % (op, ACT_NAMES[a]),
                                     [("7.binary", "numerics")], model, [((8,), X), ((8,), Y)], (8,), exp,
                                     must_pass=False))
            else:
                out.append(run_trace("gen_%s_nonfinite_%s" % (op.lower(), ACT_NAMES[a]),
                                     "%s of NaN, infinities and finite values with activation %s: IEEE results "
                                     "(inf - inf, 0 * inf: NaN)" % (op, ACT_NAMES[a]),
                                     [("7.binary", "numerics")], model, [((8,), X), ((8,), Y)], (8,), exp))
    relu_x = [INF, -INF, 3.0, -3.0]
    out.append(run_trace("gen_relu_infinities", "RELU of +inf, -inf and finite values: inf, 0, 3, 0",
                         [("7.relu", "numerics")],
                         {"operands": [tensor((4,), "SUBGRAPH_INPUT"), tensor((4,), "SUBGRAPH_OUTPUT")],
                          "operations": [{"type": "RELU", "inputs": [0], "outputs": [1]}], "inputs": [0], "outputs": [1]},
                         [((4,), relu_x)], (4,), [max(0.0, v) for v in relu_x]))
    # data movement keeps NaN and infinities exactly
    xa, xb = [NAN, INF, -INF, 1.0], [-0.5, NAN]
    out.append(run_trace("gen_concatenation_nonfinite", "CONCATENATION moves NaN and infinities unchanged",
                         [("7.concatenation", "numerics")],
                         {"operands": [tensor((4,), "SUBGRAPH_INPUT"), tensor((2,), "SUBGRAPH_INPUT"), i32_const(),
                                       tensor((6,), "SUBGRAPH_OUTPUT")],
                          "operations": [{"type": "CONCATENATION", "inputs": [0, 1, 2], "outputs": [3]}],
                          "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}},
                         [((4,), xa), ((2,), xb)], (6,), xa + xb))
    shape = struct.pack("<2i", 2, -1)
    out.append(run_trace("gen_reshape_nonfinite", "RESHAPE [4] to [2,-1] moves NaN and infinities unchanged",
                         [("7.reshape", "numerics")],
                         {"operands": [tensor((4,), "SUBGRAPH_INPUT"),
                                       {"type": "TENSOR_INT32", "dims": [2], "lifetime": "CONSTANT_COPY", "offset": 0, "length": 8},
                                       tensor((2, 2), "SUBGRAPH_OUTPUT")],
                          "operations": [{"type": "RESHAPE", "inputs": [0, 1], "outputs": [2]}],
                          "inputs": [0], "outputs": [2], "operand_values": {"hex": shape.hex()}},
                         [((4,), xa)], (2, 2), xa))
    # FULLY_CONNECTED: an infinite input gives infinite (or NaN) sums by IEEE rules
    w = [1.0, 0.0, 2.0, -1.0, 1.0, 0.5]   # [2 units, 3 inputs]
    bias = [0.5, -1.0]
    xin = [INF, 1.0, 2.0, 1.0, NAN, 3.0]
    fcv = struct.pack("<6f", *w) + struct.pack("<2f", *bias) + struct.pack("<i", 0)
    exp = []
    for b in range(2):
        for u in range(2):
            s = 0.0
            for k in range(3):
                x, wk = xin[b * 3 + k], w[u * 3 + k]
                term = NAN if (math.isinf(x) and wk == 0) else x * wk
                s = s + term
            exp.append(s + bias[u])
    out.append(run_trace("gen_fully_connected_nonfinite", "FULLY_CONNECTED of rows holding +inf and NaN: IEEE sums "
                         "(inf * 0 is NaN, inf * w is +-inf, a NaN makes its row NaN)",
                         [("7.fully_connected", "numerics")],
                         {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"),
                                       {"type": "TENSOR_FLOAT32", "dims": [2, 3], "lifetime": "CONSTANT_COPY", "offset": 0, "length": 24},
                                       {"type": "TENSOR_FLOAT32", "dims": [2], "lifetime": "CONSTANT_COPY", "offset": 24, "length": 8},
                                       {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 32, "length": 4},
                                       tensor((2, 2), "SUBGRAPH_OUTPUT")],
                          "operations": [{"type": "FULLY_CONNECTED", "inputs": [0, 1, 2, 3], "outputs": [4]}],
                          "inputs": [0], "outputs": [4], "operand_values": {"hex": fcv.hex()}},
                         [((2, 3), xin)], (2, 2), exp))
    return out


def generate():
    return binary() + softmax() + concatenation() + nonfinite()
