#!/usr/bin/env python3
"""Writes the numerics/ traces: one small model per operation, inputs inline, expected values
computed here in float64 (then compared by the replayer with the default f32 tolerances).
Run once from anywhere: python3 conformance/traces/gen/numerics.py"""
import json, math, os, struct

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numerics")
ACTS = {0: lambda v: v, 1: lambda v: max(0.0, v), 2: lambda v: min(1.0, max(-1.0, v)), 3: lambda v: min(6.0, max(0.0, v))}

def f32(v): return struct.unpack("<f", struct.pack("<f", v))[0]
def num(v):
    v = f32(v)
    return int(v) if v == int(v) and abs(v) < 1e7 else float("%.9g" % v)
def count(d): return math.prod(d) if d else 1
def idx(shape):  # all multi-indexes in row-major order
    out = [()]
    for n in shape: out = [i + (k,) for i in out for k in range(n)]
    return out
def at(vals, shape, i):  # numpy broadcasting read
    i = i[len(i) - len(shape):]
    off = 0
    for n, k in zip(shape, i): off = off * n + (0 if n == 1 else k)
    return vals[off]
def bshape(a, b):
    r = max(len(a), len(b)); a = [1] * (r - len(a)) + a; b = [1] * (r - len(b)) + b
    return [max(x, y) for x, y in zip(a, b)]

def write_trace(path, ev):  # only when changed, renamed into place: a reader never sees half a trace
    text = "".join(json.dumps(e) + "\n" for e in ev)
    if os.path.exists(path) and open(path).read() == text: return
    with open(path + ".tmp", "w") as f: f.write(text)
    os.replace(path + ".tmp", path)
def tensor(dims, life): return {"type": "TENSOR_FLOAT32", "dims": dims, "lifetime": life}
def header(name, desc, rules, must_pass=True):
    return {"mdc_trace": "1.0", "name": "numerics/" + name, "description": desc, "rules": rules,
            "requires": [], "must_pass": must_pass, "tags": ["numerics"]}

def run(name, desc, rules, model, inputs, out_dims, expected, must_pass=True, check=None):
    """inputs: list of (dims, values) for the model inputs; one output."""
    ev = [header(name, desc, rules, must_pass), {"op": "open_device", "as": "dev", "config": ""},
          {"op": "open_client", "as": "c"}, dict(model, op="model", **{"as": "m"}),
          {"op": "prepare_model", "model": "m", "as": "p"}]
    pools, ins = [], []
    for k, (d, v) in enumerate(inputs):
        ev.append({"op": "memory", "as": "in%d" % k, "kind": "ashmem", "size": 4 * len(v), "data": {"f32": [num(x) for x in v]}})
        pools.append({"memory": "in%d" % k}); ins.append({"pool": k, "length": 4 * len(v), "dims": d})
    nout = count(out_dims)
    ev.append({"op": "memory", "as": "out", "kind": "ashmem", "size": 4 * nout})
    pools.append({"memory": "out"})
    ev.append({"op": "request", "as": "r", "inputs": ins, "outputs": [{"pool": len(inputs), "length": 4 * nout}], "pools": pools})
    ev.append({"op": "execute", "prepared": "p", "request": "r", "expect": {"status": "NONE", "shapes": [{"dims": out_dims}]}})
    c = {"op": "check", "memory": "out", "offset": 0, "type": "f32", "values": {"f32": [num(x) for x in expected]}}
    if check: c.update(check)
    ev.append(c)
    write_trace(os.path.join(OUT, name + ".jsonl"), ev)

def binary(name, op, da, a, db, b, act, desc):
    fn = {"ADD": lambda x, y: x + y, "SUB": lambda x, y: x - y, "MUL": lambda x, y: x * y}[op]
    do = bshape(da, db)
    exp = [ACTS[act](fn(at(a, da, i), at(b, db, i))) for i in idx(do)]
    model = {"operands": [tensor(da, "SUBGRAPH_INPUT"), tensor(db, "SUBGRAPH_INPUT"),
                          {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4}, tensor([0] * len(do), "SUBGRAPH_OUTPUT")],
             "operations": [{"type": op, "inputs": [0, 1, 2], "outputs": [3]}], "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [act]}}
    run(name, desc, ["SPEC 7: ADD/SUB/MUL (two tensors with numpy-style broadcasting + INT32 fused activation scalar: 0 none, 1 relu, 2 relu1, 3 relu6)"],
        model, [(da, a), (db, b)], do, exp)

X = [-3.5, -1.0, -0.25, 0.5, 2.0, 7.0]
Z = [0, 0, 0, 0, 0.25, 1.0]
binary("add_broadcast_trailing_axis", "ADD", [2, 3], [1, 2, 3, 4, 5, 6], [3], [100, 200, 300], 0, "ADD [2,3] + [3] broadcasts the [3] over rows; output dims [0,0] are found by the execution")
binary("add_broadcast_both_operands", "ADD", [2, 1], [1, 2], [1, 3], [10, 20, 30], 0, "ADD [2,1] + [1,3] broadcasts both operands to [2,3]")
binary("add_fused_relu", "ADD", [2, 3], X, [2, 3], Z, 1, "ADD with fused activation 1 (relu): negatives clipped to 0")
binary("add_fused_relu1", "ADD", [2, 3], X, [2, 3], Z, 2, "ADD with fused activation 2 (relu1): clipped to [-1, 1]")
binary("add_fused_relu6", "ADD", [2, 3], X, [2, 3], Z, 3, "ADD with fused activation 3 (relu6): clipped to [0, 6]")
binary("sub_broadcast_relu6", "SUB", [2, 3], [9, 1, 4, -2, 12, 3.5], [3], [1, 2, -3], 3, "SUB [2,3] - [3] with relu6")
binary("sub_rank_broadcast", "SUB", [3], [1, 2, 3], [2, 1, 1], [10, 20], 0, "SUB [3] - [2,1,1] broadcasts to [2,1,3] (lower rank on the left)")
binary("mul_broadcast_relu1", "MUL", [2, 1, 3], [0.5, -2, 1, 3, 0.25, -0.5], [2, 1], [1, -1], 2, "MUL [2,1,3] * [2,1] broadcasts to [2,2,3] with relu1")
binary("mul_scalar_like_tensor", "MUL", [2, 3], [1, -2, 3, -4, 5, -6], [1], [-1.5], 0, "MUL by a one-element tensor [1]")

# RELU
relu_in = [-2, -0.5, 0, 0.5, 3, -7, 8, 1e-3]
run("relu", "RELU maps negatives to 0 and keeps the rest", ["SPEC 7: RELU"],
    {"operands": [tensor([2, 4], "SUBGRAPH_INPUT"), tensor([2, 4], "SUBGRAPH_OUTPUT")], "operations": [{"type": "RELU", "inputs": [0], "outputs": [1]}], "inputs": [0], "outputs": [1]},
    [([2, 4], relu_in)], [2, 4], [max(0.0, v) for v in relu_in])

# FULLY_CONNECTED
def fc(name, din, xin, units, w, bias, act, desc):
    isz = len(w) // units; batch = len(xin) // isz
    exp = [ACTS[act](sum(xin[b * isz + k] * w[u * isz + k] for k in range(isz)) + bias[u]) for b in range(batch) for u in range(units)]
    vals = struct.pack("<%df" % len(w), *w) + struct.pack("<%df" % units, *bias) + struct.pack("<i", act)
    model = {"operands": [tensor(din, "SUBGRAPH_INPUT"),
                          {"type": "TENSOR_FLOAT32", "dims": [units, isz], "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4 * len(w)},
                          {"type": "TENSOR_FLOAT32", "dims": [units], "lifetime": "CONSTANT_COPY", "offset": 4 * len(w), "length": 4 * units},
                          {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 4 * len(w) + 4 * units, "length": 4},
                          tensor([batch, units], "SUBGRAPH_OUTPUT")],
             "operations": [{"type": "FULLY_CONNECTED", "inputs": [0, 1, 2, 3], "outputs": [4]}], "inputs": [0], "outputs": [4], "operand_values": {"hex": vals.hex()}}
    run(name, desc, ["SPEC 7: FULLY_CONNECTED (input, weights [units,in], bias [units], activation)"], model, [(din, xin)], [batch, units], exp)

fc("fully_connected_bias", [2, 3], [1, 2, 3, -1, 0.5, 2], 4, [1, 0, 0, 0, 1, 0, 0, 0, 1, 0.5, -1, 2], [0.5, -1, 0, 10], 0,
   "FULLY_CONNECTED [2,3] x weights [4,3]^T + bias [4] -> [2,4]")
fc("fully_connected_relu", [2, 3], [1, 2, 3, -1, 0.5, 2], 2, [-1, 1, -1, 2, -2, 0.5], [0.25, -3], 1,
   "FULLY_CONNECTED with fused relu: negative sums clipped")
fc("fully_connected_flattens_input", [2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 2, [1] * 6 + [0.5, -0.5] * 3, [0, 1], 0,
   "FULLY_CONNECTED flattens input [2,2,3] to [batch 2, input_size 6] (input_size = weights dim 1)")

# SOFTMAX
def softmax(name, d, x, beta, axis, desc):
    r = len(d); ax = axis % r if axis is not None else r - 1
    exp = [0.0] * len(x)
    for i in idx(d):
        others = [j for j in idx(d) if all(j[k] == i[k] for k in range(r) if k != ax)]
        off = lambda j: sum(j[k] * count(d[k + 1:]) for k in range(r))
        m = max(x[off(j)] for j in others)
        s = sum(math.exp(beta * (x[off(j)] - m)) for j in others)
        exp[off(i)] = math.exp(beta * (x[off(i)] - m)) / s
    ops = [tensor(d, "SUBGRAPH_INPUT"), {"type": "FLOAT32", "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4}]
    vals = struct.pack("<f", beta); ins = [0, 1]
    if axis is not None:
        ops.append({"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 4, "length": 4}); vals += struct.pack("<i", axis); ins.append(2)
    ops.append(tensor(d, "SUBGRAPH_OUTPUT"))
    model = {"operands": ops, "operations": [{"type": "SOFTMAX", "inputs": ins, "outputs": [len(ops) - 1]}], "inputs": [0], "outputs": [len(ops) - 1], "operand_values": {"hex": vals.hex()}}
    run(name, desc, ["SPEC 7: SOFTMAX (input, FLOAT32 beta, optional INT32 axis)"], model, [(d, x)], d, exp)

softmax("softmax_default_axis", [2, 3], [1, 2, 3, -1, 0, 1000], 1.0, None, "SOFTMAX beta 1, no axis (last axis); a large logit stays finite (numerically stable)")
softmax("softmax_beta_half", [2, 3], [1, 2, 3, 0, 0, 0], 0.5, None, "SOFTMAX with beta 0.5")
softmax("softmax_axis0", [2, 3], [1, 2, 3, 3, 2, 1], 1.0, 0, "SOFTMAX with axis 0 (over rows)")
softmax("softmax_negative_axis", [2, 2, 2], [0, 1, 2, 3, 4, 5, 6, 7], 2.0, -2, "SOFTMAX with beta 2, axis -2 of a rank-3 tensor")

# RESHAPE
def reshape(name, din, x, shape, dout, desc):
    model = {"operands": [tensor(din, "SUBGRAPH_INPUT"), {"type": "TENSOR_INT32", "dims": [len(shape)], "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4 * len(shape)},
                          {"type": "TENSOR_FLOAT32", "lifetime": "SUBGRAPH_OUTPUT"}],
             "operations": [{"type": "RESHAPE", "inputs": [0, 1], "outputs": [2]}], "inputs": [0], "outputs": [2], "operand_values": {"i32": shape}}
    run(name, desc, ["SPEC 7: RESHAPE (input, TENSOR_INT32 shape, one -1 allowed)"], model, [(din, x)], dout, x)
reshape("reshape_minus_one", [2, 3], [1, 2, 3, 4, 5, 6], [3, -1], [3, 2], "RESHAPE [2,3] with shape [3,-1]: -1 inferred as 2; values keep their order; output rank unknown in the model")
reshape("reshape_explicit_rank3", [2, 3], [1, 2, 3, 4, 5, 6], [1, 6, 1], [1, 6, 1], "RESHAPE [2,3] to an explicit [1,6,1]")
reshape("reshape_to_rank1", [2, 2, 2], [8, 7, 6, 5, 4, 3, 2, 1], [-1], [8], "RESHAPE [2,2,2] with shape [-1] flattens to [8]")

# CONCATENATION
def concat(name, parts, axis, desc):
    r = len(parts[0][0]); ax = axis % r
    dout = list(parts[0][0]); dout[ax] = sum(p[0][ax] for p in parts)
    outer = count(dout[:ax]); exp = []
    for o in range(outer):
        for d, v in parts:
            chunk = count(d[ax:]); exp += v[o * chunk:(o + 1) * chunk]
    n = len(parts)
    ops = [tensor(d, "SUBGRAPH_INPUT") for d, _ in parts] + [{"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": 0, "length": 4}, tensor(dout, "SUBGRAPH_OUTPUT")]
    model = {"operands": ops, "operations": [{"type": "CONCATENATION", "inputs": list(range(n + 1)), "outputs": [n + 1]}], "inputs": list(range(n)), "outputs": [n + 1], "operand_values": {"i32": [axis]}}
    run(name, desc, ["SPEC 7: CONCATENATION (n tensors + INT32 axis)"], model, parts, dout, exp)
concat("concatenation_axis0", [([2, 3], [1, 2, 3, 4, 5, 6]), ([1, 3], [7, 8, 9])], 0, "CONCATENATION of [2,3] and [1,3] on axis 0 -> [3,3]")
concat("concatenation_negative_axis", [([2, 3], [1, 2, 3, 4, 5, 6]), ([2, 2], [10, 20, 30, 40])], -1, "CONCATENATION of [2,3] and [2,2] on axis -1 -> [2,5]")
concat("concatenation_three_inputs", [([1, 2, 2], [1, 2, 3, 4]), ([1, 1, 2], [5, 6]), ([1, 3, 2], [7, 8, 9, 10, 11, 12])], 1, "CONCATENATION of three tensors on axis 1 -> [1,6,2]")

# NaN through RELU: the reference keeps NaN visible (NN HAL maps it to 0) - not a SPEC rule.
nan = struct.pack("<f", float("nan")).hex()
ev = [header("relu_nan_passes_through", "RELU of NaN: the reference driver keeps NaN (docs/kernels.md); the NN HAL reference maps it to 0, so this is not must-pass", ["SPEC 7: RELU (NaN handling left open)"], False),
      {"op": "open_device", "as": "dev", "config": ""}, {"op": "open_client", "as": "c"},
      {"op": "model", "as": "m", "operands": [tensor([2], "SUBGRAPH_INPUT"), tensor([2], "SUBGRAPH_OUTPUT")], "operations": [{"type": "RELU", "inputs": [0], "outputs": [1]}], "inputs": [0], "outputs": [1]},
      {"op": "prepare_model", "model": "m", "as": "p"},
      {"op": "memory", "as": "x", "kind": "ashmem", "size": 8, "data": {"hex": nan + struct.pack("<f", -1.0).hex()}},
      {"op": "memory", "as": "o", "kind": "ashmem", "size": 8},
      {"op": "request", "as": "r", "inputs": [{"pool": 0, "length": 8}], "outputs": [{"pool": 1, "length": 8}], "pools": [{"memory": "x"}, {"memory": "o"}]},
      {"op": "execute", "prepared": "p", "request": "r"},
      {"op": "check", "memory": "o", "offset": 0, "type": "f32", "values": {"hex": nan + "00000000"}}]
write_trace(os.path.join(OUT, "relu_nan_passes_through.jsonl"), ev)
