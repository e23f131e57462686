"""fam_shapes.py - outputs on normal pools (SPEC 4, 8.1): OUTPUT_INSUFFICIENT_SIZE with a shape for
every output and is_sufficient exactly on the short ones, for each output position, with dims known
before the execution or produced by it, through execute and execute_async, a length of 0 included
(v1.2); nothing copied into any pool output and the request's device outputs uninitialized, dims
kept (8.16); and shared pools: several outputs (and inputs) in one pool, outputs shorter than their
pool, MMAP_FD windows, each with the bytes outside every output's [offset, offset + length) checked
untouched, whatever the execution returned."""
from tracelib import Trace, two_output_model, binary_model, f32, fill, tensor, i32_const, F32_ADD_A, F32_ADD_B

FAMILY = "shapes"
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]
PROD = [a * b for a, b in zip(F32_ADD_A, F32_ADD_B)]


def base(t, dims=(2, 3)):
    t.device("dev", "")
    t.client("c")
    t.model("two", two_output_model(dims))
    t.prepare("p2", "two")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))


def run(t, call, req, expect):
    if call == "execute":
        t.call("execute", prepared="p2", request=req, expect=expect)
    else:
        t.call("execute_async", prepared="p2", request=req, as_="ev")
        t.call("wait_event", event="ev", expect=expect)


def insufficient():
    out = []
    for dyn in (False, True):
        for short in ((0,), (1,), (0, 1)):
            for call in ("execute", "execute_async"):
                name = "gen_insufficient_%s_output%s%s__%s" % (
                    "dynamic" if dyn else "known", "s" if len(short) > 1 else "", "_".join(map(str, short)),
                    "sync" if call == "execute" else "async")
                t = Trace("shapes", name, "Two outputs of [2,3] floats (%s), output%s %s one element short (20 bytes) "
                          "through %s: OUTPUT_INSUFFICIENT_SIZE, a [2,3] shape for each output, is_sufficient 0 "
                          "exactly on the short one%s; no byte of either output pool written (8.16)" % (
                              "model dims [0,3], produced by the execution" if dyn else "model dims [2,3]",
                              "s" if len(short) > 1 else "", " and ".join(map(str, short)), call,
                              "s" if len(short) > 1 else ""),
                          [("4.insufficient", "side"), ("8.1", "side"), ("4.insufficient", "entry"), ("8.1", "entry"),
                           ("8.16", "entry")])
                base(t, (0, 3) if dyn else (2, 3))
                pools, outs = [{"memory": "a"}, {"memory": "b"}], []
                for i in range(2):
                    t.mem("o%d" % i, 32, data=fill(32))
                    pools.append({"memory": "o%d" % i})
                    outs.append({"pool": 2 + i, "length": 20 if i in short else 24})
                ins = [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}]
                if dyn:
                    ins = [dict(x, dims=[2, 3]) for x in ins]
                run(t, call, {"inputs": ins, "outputs": outs, "pools": pools},
                    {"status": "OUTPUT_INSUFFICIENT_SIZE",
                     "shapes": [{"dims": [2, 3], "sufficient": i not in short} for i in range(2)]})
                t.comment("SPEC 8.16: nothing is copied into any pool output, the sufficient one included")
                for i in range(2):
                    t.check_untouched("o%d" % i, 0, 32)
                out.append(t)
    return out


def zero_length():
    """SPEC 8.1 (v1.2): a length of 0 on a normal pool output means no bytes: short for any output that
    produces bytes."""
    out = []
    for dyn in (False, True):
        for call in ("execute", "execute_async"):
            t = Trace("shapes", "gen_zero_length_output_%s__%s" % ("dynamic" if dyn else "known",
                                                                   "sync" if call == "execute" else "async"),
                      "Two outputs of [2,3] floats (%s) through %s, output 1 given length 0 (no bytes) in a 32-byte "
                      "pool: OUTPUT_INSUFFICIENT_SIZE, a [2,3] shape for each output, is_sufficient 0 on output 1 "
                      "only, and neither pool written (8.16)" % (
                          "model dims [0,3], produced by the execution" if dyn else "model dims [2,3]", call),
                      [("8.1", "side"), ("8.1", "entry"), ("4.insufficient", "side"), ("4.insufficient", "entry"),
                       ("8.16", "entry")])
            base(t, (0, 3) if dyn else (2, 3))
            t.mem("o0", 32, data=fill(32))
            t.mem("o1", 32, data=fill(32))
            ins = [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}]
            if dyn:
                ins = [dict(x, dims=[2, 3]) for x in ins]
            run(t, call, {"inputs": ins, "outputs": [{"pool": 2, "length": 24}, {"pool": 3}],
                          "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o0"}, {"memory": "o1"}]},
                {"status": "OUTPUT_INSUFFICIENT_SIZE", "shapes": [{"dims": [2, 3], "sufficient": True},
                                                                  {"dims": [2, 3], "sufficient": False}]})
            t.check_untouched("o0", 0, 32)
            t.check_untouched("o1", 0, 32)
            out.append(t)

    for call in ("execute", "execute_async"):
        sfx = "sync" if call == "execute" else "async"
        t = Trace("shapes", "gen_zero_length_output_shared_pool__%s" % sfx, "Both outputs in one 80-byte pool "
                  "(through %s): output 0 at offset 8 with length 24, output 1 at offset 40 with length 0: "
                  "OUTPUT_INSUFFICIENT_SIZE with output 1 short, and no byte of the pool written (8.16)" % call,
                  [("8.1", "shared_pool"), ("4.insufficient", "shared_pool"), ("8.16", "shared_pool")])
        base(t)
        t.mem("o", 80, data=fill(80))
        run(t, call, {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                      "outputs": [{"pool": 2, "offset": 8, "length": 24}, {"pool": 2, "offset": 40}],
                      "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]},
            {"status": "OUTPUT_INSUFFICIENT_SIZE", "shapes": [{"dims": [2, 3], "sufficient": True},
                                                              {"dims": [2, 3], "sufficient": False}]})
        t.check_untouched("o", 0, 80)
        out.append(t)
    return out


def token_outputs():
    """SPEC 8.16 (v1.2): OUTPUT_INSUFFICIENT_SIZE uninitializes the request's device outputs, their dims
    kept (8.8); a later execution that succeeds writes them again."""
    out = []
    for dyn in (False, True):
        for call in ("execute", "execute_async"):
            sfx = "sync" if call == "execute" else "async"
            t = Trace("shapes", "gen_insufficient_token_output_%s__%s" % ("dynamic" if dyn else "known", sfx),
                      "Output 0 on a pool one element short, output 1 an initialized token (%s) through %s: "
                      "OUTPUT_INSUFFICIENT_SIZE, the token is uninitialized with its dims [2,3] kept (copy_to of 24 "
                      "bytes: GENERAL_FAILURE, of 48: INVALID_ARGUMENT), nothing is written to the pool; a later "
                      "execution that fits writes the token again" % (
                          "model dims [0,3], written at [2,3] by copy_from" if dyn else "model dims [2,3]", call),
                      [("8.16", "entry"), ("8.8", "entry"), ("4.insufficient", "entry")], requires=["memory_domains"])
            base(t, (0, 3) if dyn else (2, 3))
            t.mem("o0", 32, data=fill(32))
            t.mem("m24", 24)
            t.mem("m48", 48)
            t.allocate("t1", ["p2"], output_roles=[{"model": 0, "io": 1, "p": 1}])
            t.call("copy_from", token="t1", src="b", **({"dims": [2, 3]} if dyn else {}))
            ins = [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}]
            if dyn:
                ins = [dict(x, dims=[2, 3]) for x in ins]
            pools = [{"memory": "a"}, {"memory": "b"}, {"memory": "o0"}, {"token": "t1"}]
            run(t, call, {"inputs": ins, "outputs": [{"pool": 2, "length": 20}, {"pool": 3}], "pools": pools},
                {"status": "OUTPUT_INSUFFICIENT_SIZE", "shapes": [{"dims": [2, 3], "sufficient": False},
                                                                  {"dims": [2, 3], "sufficient": True}]})
            t.check_untouched("o0", 0, 32)
            t.comment("the token output is uninitialized, its current dims [2,3] kept (8.16, 8.8)")
            t.call("copy_to", token="t1", dst="m24", expect={"status": "GENERAL_FAILURE"})
            t.call("copy_to", token="t1", dst="m48", expect={"status": "INVALID_ARGUMENT"})
            t.comment("an execution that fits writes it again")
            req = {"inputs": ins, "outputs": [{"pool": 2, "length": 24}, {"pool": 3}], "pools": pools}
            if call == "execute":
                t.call("execute", prepared="p2", request=req,
                       expect={"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
            else:
                t.call("execute_async", prepared="p2", request=req, as_="ev_ok")
                t.call("wait_event", event="ev_ok",
                       expect={"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
            t.check("o0", f32(SUM))
            t.call("copy_to", token="t1", dst="m24")
            t.check("m24", f32(PROD))
            out.append(t)
    return out


def shared():
    out = []
    for call in ("execute", "execute_async"):
        sfx = "sync" if call == "execute" else "async"
        t = Trace("shapes", "gen_shared_pool_two_outputs__%s" % sfx, "Both outputs in one 96-byte pool (output 0 at "
                  "8, output 1 at 48) through %s: each holds its result; the bytes before, between and after them are "
                  "untouched" % call, [("4.success", "shared_pool"), ("8.1", "shared_pool"), ("4.success", "entry")])
        base(t)
        t.mem("o", 96, data=fill(96))
        run(t, call, {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                      "outputs": [{"pool": 2, "offset": 8, "length": 24}, {"pool": 2, "offset": 48, "length": 24}],
                      "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]},
            {"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
        t.check("o", f32(SUM), offset=8)
        t.check("o", f32(PROD), offset=48)
        for off, n in ((0, 8), (32, 16), (72, 24)):
            t.check_untouched("o", off, n)
        out.append(t)

        t = Trace("shapes", "gen_shared_pool_short_output_neighbour__%s" % sfx, "Output 0 one element short at "
                  "offset 8 of a shared pool, output 1 at offset 40 (through %s): OUTPUT_INSUFFICIENT_SIZE, and no byte "
                  "past output 0's length (28..40) nor outside both outputs is written (8.1), nor output 1's own "
                  "(8.16: nothing is copied into any pool output)" % call,
                  [("4.insufficient", "shared_pool"), ("8.1", "shared_pool"), ("8.1", "entry"),
                   ("8.16", "shared_pool")])
        base(t)
        t.mem("o", 80, data=fill(80))
        run(t, call, {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                      "outputs": [{"pool": 2, "offset": 8, "length": 20}, {"pool": 2, "offset": 40, "length": 24}],
                      "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]},
            {"status": "OUTPUT_INSUFFICIENT_SIZE", "shapes": [{"dims": [2, 3], "sufficient": False},
                                                              {"dims": [2, 3], "sufficient": True}]})
        for off, n in ((0, 8), (28, 12), (64, 16), (40, 24)):
            t.check_untouched("o", off, n)
        out.append(t)

        t = Trace("shapes", "gen_shared_pool_output_shorter_than_pool__%s" % sfx, "An output of 24 bytes at offset 16 "
                  "of a 64-byte pool, and a dynamic output (model [0,3], produced [2,3]) of length 48 at offset 0 of "
                  "another (through %s): the results land at their offsets, nothing outside the arguments is written" % call,
                  [("4.success", "shared_pool"), ("8.1", "shared_pool")])
        t.device("dev", "")
        t.client("c")
        t.model("add", binary_model())
        t.prepare("p2", "add")
        t.mem("a", 24, data=f32(F32_ADD_A))
        t.mem("b", 24, data=f32(F32_ADD_B))
        t.mem("o", 64, data=fill(64))
        run(t, call, {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}],
                      "outputs": [{"pool": 2, "offset": 16, "length": 24}],
                      "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]},
            {"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.check("o", f32(SUM), offset=16)
        t.check_untouched("o", 0, 16)
        t.check_untouched("o", 40, 24)
        dyn = {"operands": [tensor((0, 3), "SUBGRAPH_INPUT"), tensor((0, 3), "SUBGRAPH_INPUT"), i32_const(),
                            tensor((0, 3), "SUBGRAPH_OUTPUT")],
               "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
               "inputs": [0, 1], "outputs": [3], "operand_values": {"i32": [0]}}
        t.model("dyn", dyn)
        t.prepare("pd", "dyn")
        t.mem("od", 64, data=fill(64))
        req = {"inputs": [{"pool": 0, "length": 24, "dims": [2, 3]}, {"pool": 1, "length": 24, "dims": [2, 3]}],
               "outputs": [{"pool": 2, "offset": 8, "length": 48}],
               "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "od"}]}
        if call == "execute":
            t.call("execute", prepared="pd", request=req, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        else:
            t.call("execute_async", prepared="pd", request=req, as_="evd")
            t.call("wait_event", event="evd", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.check("od", f32(SUM), offset=8)
        t.check_untouched("od", 0, 8)
        t.check_untouched("od", 56, 8)
        out.append(t)

        t = Trace("shapes", "gen_shared_pool_inputs_and_outputs__%s" % sfx, "Both inputs and both outputs in one "
                  "MMAP_FD window at unaligned file offset 4196 (inputs at 0 and 24, outputs at 56 and 88; through %s): "
                  "the results are right, the inputs unchanged, the gaps and the bytes after the window untouched" % call,
                  [("4.success", "shared_pool"), ("8.1", "shared_pool"), ("2.kinds", "geometry")])
        base(t)
        t.mem("w", 120, kind="mmap_fd", offset=4196, file_size=8192, data=f32(F32_ADD_A + F32_ADD_B))
        t.ev("fill", memory="w", offset=48, data=fill(72 + 64))
        run(t, call, {"inputs": [{"pool": 0, "offset": 0, "length": 24}, {"pool": 0, "offset": 24, "length": 24}],
                      "outputs": [{"pool": 0, "offset": 56, "length": 24}, {"pool": 0, "offset": 88, "length": 24}],
                      "pools": [{"memory": "w"}]},
            {"status": "NONE", "shapes": [{"dims": [2, 3]}, {"dims": [2, 3]}]})
        t.check("w", f32(F32_ADD_A + F32_ADD_B))
        t.check("w", f32(SUM), offset=56)
        t.check("w", f32(PROD), offset=88)
        for off, n in ((48, 8), (80, 8), (112, 8 + 64)):
            t.check_untouched("w", off, n)
        out.append(t)
    return out


def generate():
    return insufficient() + zero_length() + token_outputs() + shared()
