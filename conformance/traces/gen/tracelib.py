"""tracelib.py - the building blocks of the generated corpus (gen/corpus.py): a Trace (its header
from the rule table, its events in order), payloads, and the small models and fixtures the
families share. Python 3 standard library only."""
import copy
import json
import math
import struct

from rules import RULES, AXES

F32_ADD_A = [1, 2, 3, 4, 5, 6]
F32_ADD_B = [10, 20, 30, 40, 50, 60]
SENTINEL = 0xA5          # bytes a call must not write are pre-filled with this


def f32(vals):
    return {"f32": [num(v) for v in vals]}


def num(v):
    """A float as the trace writes it: ints stay ints, NaN/inf become the strings the reader takes."""
    if isinstance(v, str):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    v = struct.unpack("<f", struct.pack("<f", v))[0]
    if v == int(v) and abs(v) < 1e7:
        return int(v)
    return float("%.9g" % v)


def fill(nbytes, byte=SENTINEL):
    return {"fill": byte, "bytes": nbytes}


def tensor(dims, life, typ="TENSOR_FLOAT32", **kw):
    o = {"type": typ}
    if dims is not None:
        o["dims"] = list(dims)
    o["lifetime"] = life
    o.update(kw)
    return o


def i32_const(offset=0):
    return {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": offset, "length": 4}


def binary_model(op="ADD", da=(2, 3), db=(2, 3), dout=(2, 3), act=0):
    """op(a, b) with a constant fused activation: inputs a, b; one output."""
    return {"operands": [tensor(da, "SUBGRAPH_INPUT"), tensor(db, "SUBGRAPH_INPUT"), i32_const(),
                         tensor(dout, "SUBGRAPH_OUTPUT")],
            "operations": [{"type": op, "inputs": [0, 1, 2], "outputs": [3]}],
            "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [act]}}


def two_output_model(dims=(2, 3)):
    """out0 = a + b, out1 = a * b."""
    return {"operands": [tensor(dims, "SUBGRAPH_INPUT"), tensor(dims, "SUBGRAPH_INPUT"), i32_const(),
                         tensor(dims, "SUBGRAPH_OUTPUT"), tensor(dims, "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]},
                           {"type": "MUL", "inputs": [0, 1, 2], "outputs": [4]}],
            "inputs": [0, 1], "outputs": [3, 4], "operand_values": {"i32": [0]}}


def relu_model(dims=(0,)):
    return {"operands": [tensor(dims, "SUBGRAPH_INPUT"), tensor(dims, "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "RELU", "inputs": [0], "outputs": [1]}],
            "inputs": [0], "outputs": [1]}


def act_input_model():
    """ADD whose fused activation is a model input (a scalar INT32 input, index 2)."""
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"), tensor((2, 3), "SUBGRAPH_INPUT"),
                         {"type": "INT32", "lifetime": "SUBGRAPH_INPUT"}, tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
            "inputs": [0, 1, 2], "outputs": [3]}


def role(model=0, io=0, p=1.0):
    return {"model": model, "io": io, "p": num(p) if isinstance(p, float) else p}


class Trace:
    """One generated trace. `covers` is a list of (rule id, axis) pairs: the header's `rules`
    cite those rules (contract sections), and the corpus report lists the trace under them."""

    def __init__(self, area, what, desc, covers, requires=(), must_pass=True, version="1.1"):
        assert what.startswith("gen_"), what
        self.area, self.what, self.desc = area, what, desc
        self.covers = list(covers)
        for rid, axis in self.covers:
            assert rid in RULES, "unknown rule %r in %s" % (rid, what)
            assert axis in AXES, "unknown axis %r in %s" % (axis, what)
        self.requires = list(requires)
        self.must_pass = must_pass
        self.version = version
        self.events = []
        self.family = None
        self._names = set()
        self.devices = 0

    @property
    def name(self):
        return self.area + "/" + self.what

    def comment(self, text):
        self.events.append("# " + text)

    def ev(self, op, **kw):
        e = {"op": op}
        for k, v in kw.items():
            if k == "as_":
                k = "as"
            e[k] = copy.deepcopy(v)   # events render at the end: never alias a caller's dict
        a = e.get("as")
        if isinstance(a, str) and op != "concurrent":
            assert a not in self._names, "name %r reused in %s" % (a, self.name)
            self._names.add(a)
        self.events.append(e)
        return e

    # ---- the calls and objects, with the trace format's field names ----
    def device(self, as_="dev", config=""):
        self.devices += 1
        return self.ev("open_device", as_=as_, config=config)

    def client(self, as_="c", device=None, **kw):
        e = {"as_": as_}
        if device:
            e["device"] = device
        e.update(kw)
        return self.ev("open_client", **e)

    def model(self, as_, m):
        return self.ev("model", as_=as_, **m)

    def prepare(self, as_, model, client=None, **kw):
        e = {"model": model, "as_": as_}
        if client:
            e = {"client": client, **e}
        e.update(kw)
        return self.ev("prepare_model", **e)

    def mem(self, as_, size, kind="ashmem", data=None, **kw):
        e = {"as_": as_, "kind": kind, "size": size}
        e.update(kw)
        if data is not None:
            e["data"] = data
        return self.ev("memory", **e)

    def check(self, memory, values=None, offset=0, type="f32", data=None, **kw):
        e = {"memory": memory, "offset": offset, "type": type}
        if values is not None:
            e["values"] = values
        if data is not None:
            e["data"] = data
        e.update(kw)
        return self.ev("check", **e)

    def check_untouched(self, memory, offset, nbytes, **kw):
        return self.check(memory, offset=offset, type="u8", data=fill(nbytes), **kw)

    def allocate(self, as_, prepared, input_roles=(), output_roles=(), dims=None, client=None, expect=None, **kw):
        e = {}
        if client:
            e["client"] = client
        if dims is not None:
            e["desc"] = {"dims": list(dims)}
        e["prepared"] = list(prepared)
        if input_roles:
            e["input_roles"] = list(input_roles)
        if output_roles:
            e["output_roles"] = list(output_roles)
        e["as_"] = as_
        if expect:
            e["expect"] = expect
        e.update(kw)
        return self.ev("allocate", **e)

    def call(self, op, expect=None, **kw):
        if expect is not None:
            kw["expect"] = expect
        return self.ev(op, **kw)

    def render(self):
        rules, seen = [], set()
        for rid, _ in self.covers:
            if rid in seen:
                continue
            seen.add(rid)
            rules.append(RULES[rid].cite())
        header = {"mdc_trace": self.version, "name": self.name, "description": self.desc, "rules": rules,
                  "requires": self.requires, "must_pass": self.must_pass, "tags": [self.area, "generated", self.family]}
        out = ["# Generated by conformance/traces/gen/corpus.py (family %s): do not edit by hand; change the"
               % self.family, "# generator, rerun it and review the diff.", json.dumps(header)]
        for e in self.events:
            out.append(e if isinstance(e, str) else json.dumps(e))
        return "\n".join(out) + "\n"


def expect(status="NONE", **kw):
    e = {"status": status}
    e.update(kw)
    return e


INVALID = expect("INVALID_ARGUMENT")
GENERAL = expect("GENERAL_FAILURE")
