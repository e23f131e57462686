"""fam_pools.py - pool descriptors (SPEC 2, 8.2): each defect of SPEC 2's validation at every entry
point that takes a descriptor (a model pool referenced or not, an execution input, output and
unused pool through execute and execute_async, copy_from, copy_to); each pool kind's own negative
cases (BLOB and non-BLOB hardware buffer geometry, 8.13; non-BLOB hardware buffers outside execution
I/O; MMAP_FD windows inside larger files at unaligned offsets); constant storage with offsets that
wrap (8.17); access rights of every kind at every use (8.14)."""
from tracelib import Trace, binary_model, role, f32, fill, tensor, i32_const, F32_ADD_A, F32_ADD_B

FAMILY = "pools"
SUM = [a + b for a, b in zip(F32_ADD_A, F32_ADD_B)]
ENTRIES = ["prepare_model", "prepare_model_unreferenced", "execute_input", "execute_output", "execute_unused",
           "execute_async_input", "execute_async_output", "execute_async_unused", "copy_from", "copy_to"]


def const_model():
    """a + b where b is a CONSTANT_REFERENCE of pool 0 (offset 0, 24 bytes)."""
    return {"operands": [tensor((2, 3), "SUBGRAPH_INPUT"),
                         tensor((2, 3), "CONSTANT_REFERENCE", pool=0, offset=0, length=24),
                         i32_const(), tensor((2, 3), "SUBGRAPH_OUTPUT")],
            "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
            "inputs": [0], "outputs": [3], "operand_values": {"i32": [0]}}


# defect -> (description, events making pool "bad", rules beyond 2.validate)
DEFECTS = {
    "fd_negative": ("fd -1", [("bad_memory", {"kind": "ashmem", "fd": -1, "offset": 0, "size": 24, "prot": 3})]),
    "fd_closed": ("an fd that is not open", [("bad_memory", {"kind": "ashmem", "fd": "closed", "offset": 0,
                                                             "size": 24, "prot": 3})]),
    "size_zero": ("size 0", [("bad_memory", {"kind": "mmap_fd", "fd": "pipe", "offset": 0, "size": 0, "prot": 3})]),
    "past_end": ("offset 8 + size 24 past a 24-byte MMAP_FD file",
                 [("memory", {"kind": "mmap_fd", "offset": 8, "size": 24, "file_size": 24})]),
    "window_past_end": ("an MMAP_FD window at file offset 8180 + 24 bytes past an 8192-byte file",
                        [("memory", {"kind": "mmap_fd", "offset": 8180, "size": 24, "file_size": 8192})]),
    "pipe": ("a pipe (no file size to hold offset + size)",
             [("bad_memory", {"kind": "mmap_fd", "fd": "pipe", "offset": 0, "size": 24, "prot": 3})]),
    "offset_wraps": ("offset 2^64-8 (offset + size wraps)",
                     [("bad_memory", {"kind": "mmap_fd", "fd": "pipe", "offset": "0xfffffffffffffff8", "size": 24,
                                      "prot": 3})]),
    "prot_exec": ("prot READ|WRITE|EXEC", [("memory", {"kind": "ashmem", "size": 24, "prot": 7})]),
    "prot_high_bit": ("prot READ|WRITE|0x10", [("memory", {"kind": "ashmem", "size": 24, "prot": 19})]),
    "kind_unknown": ("kind 7", [("bad_memory", {"kind": 7, "fd": "pipe", "offset": 0, "size": 24, "prot": 3})]),
    "kind_negative": ("kind -1", [("bad_memory", {"kind": -1, "fd": "pipe", "offset": 0, "size": 24, "prot": 3})]),
}


def fixture(t):
    t.device("dev", "")
    t.client("c")
    t.model("add", binary_model())
    t.prepare("p", "add")
    t.mem("a", 24, data=f32(F32_ADD_A))
    t.mem("b", 24, data=f32(F32_ADD_B))
    t.mem("o", 24, data=fill(24))
    t.mem("back", 24)
    t.allocate("tin", ["p"], input_roles=[role(0, 0)])
    t.call("copy_from", token="tin", src="a")


def make_bad(t, defect):
    for op, fields in DEFECTS[defect][1]:
        t.ev(op, as_="bad", **fields)


def use(t, entry, expect_status, bad="bad", whole=False):
    """The descriptor `bad` at `entry`, the call expected to return expect_status."""
    ex = {"status": expect_status}
    if entry.startswith("prepare_model"):
        m = const_model() if entry == "prepare_model" else binary_model()
        t.model("m_bad", dict(m, pools=[bad]))
        t.call("prepare_model", model="m_bad", as_="p_bad", expect=ex)
        return
    if entry == "copy_from":
        t.call("copy_from", token="tin", src=bad, expect=ex)
        return
    if entry == "copy_to":
        t.call("copy_to", token="tin", dst=bad, expect=ex)
        return
    call = "execute_async" if entry.startswith("execute_async") else "execute"
    where = entry.rsplit("_", 1)[1]
    ins = [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}]
    outs = [{"pool": 2, "length": 24}]
    pools = [{"memory": "a"}, {"memory": "b"}, {"memory": "o"}]
    if where == "input":
        pools[0] = {"memory": bad}
        if whole:
            ins[0] = {"pool": 0}
    elif where == "output":
        pools[2] = {"memory": bad}
        if whole:
            outs[0] = {"pool": 2}
    else:
        pools.append({"memory": bad})
    req = {"inputs": ins, "outputs": outs, "pools": pools}
    if call == "execute":
        t.call("execute", prepared="p", request=req, expect=ex)
    else:
        t.call("execute_async", prepared="p", request=req, as_="ev", expect=ex)
        if expect_status == "NONE":
            t.call("wait_event", event="ev", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})


def still_works(t, entry):
    if entry == "copy_from":
        t.comment("SPEC 3: any copy_from failure leaves the buffer uninitialized")
        t.call("copy_to", token="tin", dst="back", expect={"status": "GENERAL_FAILURE"})
        t.call("copy_from", token="tin", src="a")
    if entry.startswith("execute") and not entry.endswith("output"):
        t.check_untouched("o", 0, 24)
    t.mem("ok", 24)
    t.call("execute", prepared="p", request={"inputs": [{"pool": 0}, {"pool": 1, "length": 24}],
                                             "outputs": [{"pool": 2, "length": 24}],
                                             "pools": [{"token": "tin"}, {"memory": "b"}, {"memory": "ok"}]},
           expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
    t.check("ok", f32(SUM))


def entry_covers(entry):
    cov = [("2.validate", "entry"), ("8.2", "entry")]
    if entry.endswith("output"):
        cov.append(("2.validate", "side"))
    if entry.endswith("unused"):
        cov += [("4.pools_valid", "entry"), ("4.pools_valid", "geometry")]
    if entry == "copy_from":
        cov.append(("3.copy_from_failure", "entry"))
    return cov


def descriptor_traces():
    out = []
    for defect, (ddesc, _) in DEFECTS.items():
        for entry in ENTRIES:
            cov = entry_covers(entry) + [("2.validate", "geometry"), ("8.2", "geometry")]
            if defect == "offset_wraps":
                cov += [("8.17", "geometry"), ("8.17", "entry")]
                if entry.endswith("output"):
                    cov.append(("8.17", "side"))
            t = Trace("pools", "gen_pool_%s__%s" % (defect, entry),
                      "A pool descriptor with %s is INVALID_ARGUMENT at %s; the client goes on working" % (
                          ddesc, entry.replace("_", " ")), cov, requires=["memory_domains"])
            fixture(t)
            make_bad(t, defect)
            use(t, entry, "INVALID_ARGUMENT")
            still_works(t, entry)
            out.append(t)
    return out


# Kind-specific cases: (name, description, memory fields, entries, status, must_pass, covers). Every
# geometry case of SPEC 8.13 (v1.2) is must-pass: a BLOB at each entry point that takes one, a non-BLOB
# hardware buffer at both execution sides (the only uses it has).
BLOB_ENTRIES = ["prepare_model", "execute_input", "execute_async_output", "copy_from", "copy_to"]
HWB_ENTRIES = ["execute_input", "execute_async_output"]


def kind_cases():
    blob = lambda **kw: dict({"kind": "blob", "size": 24}, **kw)  # noqa: E731
    hwb = lambda **kw: dict({"kind": "hardware_buffer", "size": 24, "width": 6, "height": 1, "layers": 1,  # noqa: E731
                             "format": 1}, **kw)
    geo = [("2.validate", "geometry"), ("8.13", "geometry")]
    return [
        ("blob_width_past_file", "a BLOB whose width (48) runs past its 24-byte file",
         blob(size=48, width=48, file_size=24), ["prepare_model", "execute_input", "execute_async_input",
                                                 "copy_from", "copy_to"], "INVALID_ARGUMENT", True,
         [("2.validate", "geometry")]),
        ("blob_height_2", "a BLOB of height 2 (a BLOB is height = layers = 1)", blob(height=2),
         BLOB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("blob_layers_2", "a BLOB of 2 layers", blob(layers=2), BLOB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("blob_format_rgba", "a BLOB with format RGBA_8888 (not BLOB)", blob(format=1),
         BLOB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("blob_size_not_width", "a BLOB of size 24 and width 16", blob(width=16),
         BLOB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("blob_width_zero", "a BLOB of width 0", blob(width=0), BLOB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_in_model", "a non-BLOB hardware buffer as a model pool",
         hwb(), ["prepare_model", "prepare_model_unreferenced"], "INVALID_ARGUMENT", True,
         [("2.hwb_io_only", "entry"), ("8.2", "entry")]),
        ("hardware_buffer_in_copies", "a non-BLOB hardware buffer given to copy_from and copy_to",
         hwb(), ["copy_from", "copy_to"], "INVALID_ARGUMENT", True, [("2.hwb_io_only", "entry"), ("8.2", "entry")]),
        ("hardware_buffer_as_io", "a non-BLOB hardware buffer (6x1 RGBA_8888) as an execution input and output",
         hwb(), ["execute_input", "execute_async_input", "execute_output", "execute_async_output"], "NONE", True,
         [("2.hwb_io_only", "side"), ("2.kinds", "side"), ("8.13", "side")]),
        ("hardware_buffer_rgb888_as_io", "a non-BLOB hardware buffer of 8x1 RGB_888 (3 bytes a pixel: 24 bytes) as "
         "an execution input and output", hwb(width=8, format=3), HWB_ENTRIES, "NONE", True,
         [("8.13", "side"), ("8.13", "geometry")]),
        ("hardware_buffer_r8_layers_as_io", "a non-BLOB hardware buffer of 4x3 R_8 in 2 layers (24 bytes) as an "
         "execution input and output", hwb(width=4, height=3, layers=2, format=0x38), HWB_ENTRIES, "NONE", True,
         [("8.13", "side"), ("8.13", "geometry")]),
        ("hardware_buffer_offset", "a non-BLOB hardware buffer with offset 4 (its bytes come from its geometry)",
         hwb(offset=4, file_size=28), HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_format_unknown", "a non-BLOB hardware buffer of format 0x99", hwb(format=0x99),
         HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_width_zero", "a non-BLOB hardware buffer of width 0", hwb(width=0),
         HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_height_zero", "a non-BLOB hardware buffer of height 0", hwb(height=0),
         HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_layers_zero", "a non-BLOB hardware buffer of 0 layers", hwb(layers=0),
         HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_past_file", "a non-BLOB hardware buffer of 100x1 RGBA_8888 on a 24-byte file",
         hwb(width=100), HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
        ("hardware_buffer_arg_length", "a valid non-BLOB hardware buffer (6x1 RGBA_8888) whose request argument "
         "has length 24 (arguments on it have offset = length = 0)", hwb(), HWB_ENTRIES, "INVALID_ARGUMENT", True, geo),
    ]


def kind_traces():
    out = []
    for name, desc, fields, entries, status, must_pass, covers in kind_cases():
        for entry in entries:
            cov = list(covers)
            if status != "NONE":
                cov += [("2.validate", "entry")] if name.startswith("blob_width") else []
                if ("8.13", "geometry") in covers:
                    cov.append(("8.13", "entry"))
                    if entry.endswith("output"):
                        cov.append(("8.13", "side"))
            t = Trace("pools", "gen_kind_%s__%s" % (name, entry), "%s at %s: %s" % (
                desc, entry.replace("_", " "), "accepted" if status == "NONE" else status), cov,
                requires=["memory_domains"], must_pass=must_pass)
            fixture(t)
            f = dict(fields)
            data = None
            if status == "NONE":
                data = f32(F32_ADD_A) if entry.endswith("input") else fill(24)
            elif entry.endswith("output"):
                data = fill(24)
            kind = f.pop("kind")
            whole = kind == "hardware_buffer" and not name.endswith("_arg_length")
            t.mem("bad", f.pop("size"), kind=kind, data=data, **f)
            if status == "NONE" and entry.endswith("input"):
                use(t, entry, "NONE", whole=whole)
                t.check("o", f32(SUM))
            elif status == "NONE":
                use(t, entry, "NONE", whole=whole)
                t.check("bad", f32(SUM))
            else:
                use(t, entry, status, whole=whole)
                if entry.endswith("output"):
                    t.comment("a refused output pool is never written")
                    t.check_untouched("bad", 0, 24)
                still_works(t, entry)
            out.append(t)
    return out


def window_traces():
    """MMAP_FD windows inside larger files, at unaligned offsets (SPEC 2)."""
    out = []
    W = 4196    # one page and 100 bytes into the file

    t = Trace("pools", "gen_window_constant_past_window", "A CONSTANT_REFERENCE at offset 24 (+24) of a 24-byte "
              "MMAP_FD window that starts at file offset %d of an 8192-byte file: past the window, inside the file: "
              "INVALID_ARGUMENT at prepare" % W, [("2.const_range", "geometry")], requires=["memory_domains"])
    fixture(t)
    t.mem("win", 24, kind="mmap_fd", offset=W, file_size=8192, data=f32(F32_ADD_B))
    m = const_model()
    m["operands"][1] = tensor((2, 3), "CONSTANT_REFERENCE", pool=0, offset=24, length=24)
    t.model("m_past", dict(m, pools=["win"]))
    t.call("prepare_model", model="m_past", as_="p_past", expect={"status": "INVALID_ARGUMENT"})
    m["operands"][1] = tensor((2, 3), "CONSTANT_REFERENCE", pool=0, offset=0, length=24)
    t.model("m_in", dict(m, pools=["win"]))
    t.prepare("p_in", "m_in")
    t.call("execute", prepared="p_in", request={"inputs": [{"pool": 0, "length": 24}], "outputs": [{"pool": 1, "length": 24}],
                                                "pools": [{"memory": "a"}, {"memory": "o"}]})
    t.check("o", f32(SUM))
    out.append(t)

    t = Trace("pools", "gen_window_constant_wrapping_offsets", "CONSTANT_REFERENCE and CONSTANT_COPY offsets that "
              "wrap 64 bits with their length (2^64-4 + 24) are INVALID_ARGUMENT at prepare",
              [("2.const_range", "geometry"), ("8.17", "geometry"), ("8.17", "entry")], requires=["memory_domains"])
    fixture(t)
    t.mem("cp", 24, data=f32(F32_ADD_B))
    m = const_model()
    m["operands"][1] = tensor((2, 3), "CONSTANT_REFERENCE", pool=0, offset="0xfffffffffffffffc", length=24)
    t.model("m_ref", dict(m, pools=["cp"]))
    t.call("prepare_model", model="m_ref", as_="p_ref", expect={"status": "INVALID_ARGUMENT"})
    m2 = binary_model()
    m2["operands"][2] = {"type": "INT32", "lifetime": "CONSTANT_COPY", "offset": "0xfffffffffffffffe", "length": 4}
    t.model("m_copy", m2)
    t.call("prepare_model", model="m_copy", as_="p_copy", expect={"status": "INVALID_ARGUMENT"})
    out.append(t)

    for call in ("execute", "execute_async"):
        t = Trace("pools", "gen_window_request_io__%s" % ("sync" if call == "execute" else "async"),
                  "Inputs and output on MMAP_FD windows at unaligned file offsets (%d, %d, %d) inside larger files "
                  "(through %s): the results are right and the bytes after the output window are untouched" % (
                      W, W + 8, W + 60, call),
                  [("2.kinds", "geometry"), ("2.kinds", "entry")], requires=["memory_domains"])
        fixture(t)
        t.mem("wa", 24, kind="mmap_fd", offset=W, file_size=8192, data=f32(F32_ADD_A))
        t.mem("wb", 24, kind="mmap_fd", offset=W + 8, file_size=8192, data=f32(F32_ADD_B))
        t.mem("wo", 24, kind="mmap_fd", offset=W + 60, file_size=8192, data=fill(24))
        t.ev("fill", memory="wo", offset=24, data=fill(64))
        req = {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}], "outputs": [{"pool": 2, "length": 24}],
               "pools": [{"memory": "wa"}, {"memory": "wb"}, {"memory": "wo"}]}
        if call == "execute":
            t.call("execute", prepared="p", request=req, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        else:
            t.call("execute_async", prepared="p", request=req, as_="ev")
            t.call("wait_event", event="ev", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
        t.check("wo", f32(SUM))
        t.check_untouched("wo", 24, 64)
        out.append(t)

    t = Trace("pools", "gen_window_copies", "copy_from reads exactly a 24-byte MMAP_FD window at unaligned file "
              "offset %d; copy_to writes exactly another (offset %d), the bytes after it untouched; a window "
              "larger than the buffer is refused both ways" % (W, W + 33),
              [("2.kinds", "geometry"), ("2.kinds", "entry"), ("3.copy_from", "geometry"), ("3.copy_to", "geometry")],
              requires=["memory_domains"])
    fixture(t)
    t.mem("wsrc", 24, kind="mmap_fd", offset=W, file_size=8192, data=f32(F32_ADD_B))
    t.ev("fill", memory="wsrc", offset=24, data=f32([99, 99]))
    t.call("copy_from", token="tin", src="wsrc")
    t.mem("wdst", 24, kind="mmap_fd", offset=W + 33, file_size=8192, data=fill(24))
    t.ev("fill", memory="wdst", offset=24, data=fill(40))
    t.call("copy_to", token="tin", dst="wdst")
    t.check("wdst", f32(F32_ADD_B))
    t.check_untouched("wdst", 24, 40)
    t.mem("wbig", 32, kind="mmap_fd", offset=W + 1, file_size=8192, data=f32(F32_ADD_B + [1, 2]))
    t.call("copy_from", token="tin", src="wbig", expect={"status": "INVALID_ARGUMENT"})
    t.call("copy_from", token="tin", src="wsrc")
    t.call("copy_to", token="tin", dst="wbig", expect={"status": "INVALID_ARGUMENT"})
    t.check("wbig", f32(F32_ADD_B + [1, 2]))
    out.append(t)

    for kind, extra in (("ashmem", {}), ("mmap_fd", {"offset": W, "file_size": 8192}), ("blob", {})):
        t = Trace("pools", "gen_kind_%s_constant_pool" % kind, "A CONSTANT_REFERENCE read from a %s pool%s "
                  "(prepare_model) gives the right sums through execute and execute_async" % (
                      kind.upper(), " window at unaligned offset %d" % W if extra else ""),
                  [("2.kinds", "entry")] + ([("2.kinds", "geometry")] if extra else []), requires=["memory_domains"])
        fixture(t)
        t.mem("cpool", 24, kind=kind, data=f32(F32_ADD_B), **extra)
        t.model("m_c", dict(const_model(), pools=["cpool"]))
        t.prepare("p_c", "m_c")
        req = {"inputs": [{"pool": 0, "length": 24}], "outputs": [{"pool": 1, "length": 24}],
               "pools": [{"memory": "a"}, {"memory": "o"}]}
        t.call("execute", prepared="p_c", request=req)
        t.check("o", f32(SUM))
        t.mem("o2", 24)
        t.call("execute_async", prepared="p_c", request=dict(req, pools=[{"memory": "a"}, {"memory": "o2"}]), as_="ev")
        t.call("wait_event", event="ev")
        t.check("o2", f32(SUM))
        out.append(t)
    return out


# SPEC 8.14 (v1.2): what each use needs. entry -> (the prot that lacks it, the prot that suffices, written?)
ACCESS = {"prepare_model": ("w", "r", False), "copy_from": ("w", "r", False), "copy_to": ("r", "w", True),
          "execute_input": ("w", "r", False), "execute_async_output": ("r", "w", True)}
ACCESS_KINDS = [("ashmem", {}), ("mmap_fd", {"offset": 4196, "file_size": 8192}), ("blob", {}),
                ("hardware_buffer", {"width": 6, "format": 1})]


def access_traces():
    """Each use of a pool with a prot that lacks the right it needs (SPEC 8.14): INVALID_ARGUMENT, a pool to
    be written is not, and the same use with the one right it needs (a read-only pool read, a write-only
    pool written) succeeds."""
    out = []
    for kind, extra in ACCESS_KINDS:
        for entry, (lacks, enough, written) in ACCESS.items():
            if kind == "hardware_buffer" and not entry.startswith("execute"):
                continue   # SPEC 2: execution input and output only
            whole = kind == "hardware_buffer"
            need = "WRITE" if written else "READ"
            cov = [("8.14", "entry")]
            if entry.startswith("execute"):
                cov.append(("8.14", "side"))
            if kind != "ashmem":
                cov.append(("8.14", "geometry"))
            t = Trace("pools", "gen_access_%s__%s" % (kind, entry), "A %s pool with prot %s (no PROT_%s) at %s: "
                      "INVALID_ARGUMENT%s; with prot %s (PROT_%s alone) the same use succeeds" % (
                          kind.upper(), lacks, need, entry.replace("_", " "),
                          ", and the pool is not written" if written else "", enough, need),
                      cov, requires=["memory_domains"])
            fixture(t)
            t.mem("bad", 24, kind=kind, prot=lacks, data=fill(24) if written else f32(F32_ADD_B), **extra)
            use(t, entry, "INVALID_ARGUMENT", whole=whole)
            if written:
                t.check_untouched("bad", 0, 24)
            still_works(t, entry)
            t.comment("the right the use needs is enough")
            t.mem("good", 24, kind=kind, prot=enough, data=fill(24) if written else f32(F32_ADD_B), **extra)
            if entry == "prepare_model":
                t.model("m_good", dict(const_model(), pools=["good"]))
                t.prepare("p_good", "m_good")
                t.mem("o_good", 24)
                t.call("execute", prepared="p_good", request={
                    "inputs": [{"pool": 0, "length": 24}], "outputs": [{"pool": 1, "length": 24}],
                    "pools": [{"memory": "a"}, {"memory": "o_good"}]},
                    expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
                t.check("o_good", f32(SUM))
            elif entry == "copy_from":
                t.call("copy_from", token="tin", src="good")
                t.call("copy_to", token="tin", dst="back")
                t.check("back", f32(F32_ADD_B))
            elif entry == "copy_to":
                t.call("copy_to", token="tin", dst="good")
                t.check("good", f32(F32_ADD_A))
            else:
                arg = {} if whole else {"length": 24}
                if entry == "execute_input":
                    arg = {"pool": 0, **arg}
                    req = {"inputs": [arg, {"pool": 1, "length": 24}], "outputs": [{"pool": 2, "length": 24}],
                           "pools": [{"memory": "good"}, {"memory": "a"}, {"memory": "o_good"}]}
                    t.mem("o_good", 24)
                    t.call("execute", prepared="p", request=req, expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
                    t.check("o_good", f32(SUM))
                else:
                    arg = {"pool": 2, **arg}
                    req = {"inputs": [{"pool": 0, "length": 24}, {"pool": 1, "length": 24}], "outputs": [arg],
                           "pools": [{"memory": "a"}, {"memory": "b"}, {"memory": "good"}]}
                    t.call("execute_async", prepared="p", request=req, as_="ev_good")
                    t.call("wait_event", event="ev_good", expect={"status": "NONE", "shapes": [{"dims": [2, 3]}]})
                    t.check("good", f32(SUM))
            out.append(t)
    return out


def generate():
    return descriptor_traces() + kind_traces() + window_traces() + access_traces()
