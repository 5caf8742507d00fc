"""symm.moe without a GPU: the ctypes structures against the C header, the
argument checks on CPU tensors, the torch custom ops (traced by torch.compile
with no graph break), and AllToAll / HighThroughput construction over the
host backend (SYMM_BACKEND=host: its checks run, then it says it needs GPUs).
Tests that need torch skip without it (CI installs no torch)."""
import ctypes
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import INCLUDE_DIR, PYTHON_DIR, child_env, have_library, run_pes, run_python  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (symm.moe needs it)")


needs_lib = pytest.mark.skipif(not have_library(), reason="libsymm.so not built (set SYMM_LIBRARY)")


def test_import_without_torch_says_so():
    r = run_python("import sys\nsys.modules['torch'] = None\n"
                   "try:\n    import symm.moe\nexcept ImportError as e:\n    print('ERR', e)\n")
    assert r.returncode == 0, r.stderr
    assert "ERR symm.moe needs torch (pip install torch)" in r.stdout, r.stdout + r.stderr


def _c_layout(structs):
    """sizeof and offsetof of every field, from the C compiler."""
    cc = os.environ.get("CC", "cc")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "symm/symm_moe.h"', "int main(void) {"]
    for cname, fields in structs.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in fields:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (cname, f, cname, f))
    lines.append("return 0; }")
    src = "\n".join(lines)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "l.c"), os.path.join(d, "l")
        open(c, "w").write(src)
        r = subprocess.run([cc, "-std=c11", "-I", INCLUDE_DIR, c, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip("no C compiler to read the header's layout: %s" % r.stderr[-300:])
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.split("\n") if line)


def _structs_module():
    """symm.moe's structures; without torch, read them from the source (they
    are plain ctypes)."""
    if torch is not None:
        import symm.moe as m
        return m.STRUCTS
    src = open(os.path.join(PYTHON_DIR, "symm", "moe", "__init__.py")).read()
    start, end = src.index("class Config(ctypes.Structure)"), src.index("STRUCTS = ")
    ns = {"ctypes": ctypes, "_c_int": ctypes.c_int, "_c_size_t": ctypes.c_size_t,
          "_c_void_p": ctypes.c_void_p, "_c_int64": ctypes.c_int64}
    exec(src[start:src.index("\n\n\n", end)], ns)
    return ns["STRUCTS"]


def test_structures_match_the_header():
    structs = _structs_module()
    layout = _c_layout({c: [f for f, _ in s._fields_] for c, s in structs.items()})
    for cname, s in structs.items():
        assert int(layout[cname]) == ctypes.sizeof(s), cname
        for f, _ in s._fields_:
            assert int(layout["%s.%s" % (cname, f)]) == getattr(s, f).offset, "%s.%s" % (cname, f)


# ---------------------------------------------------------------------------
# the checks, on CPU tensors
# ---------------------------------------------------------------------------

SPEC = {"local_experts": 2, "hidden_dim": 512, "experts_per_token": 3, "has_scales": True, "scale_cols": 4,
        "rows": 20}


def _dispatch_args(**over):
    a = dict(out_expert_num_tokens=torch.zeros(2, dtype=torch.int32),
             out_expert_x=torch.zeros((2, 20, 512), dtype=torch.float8_e4m3fn),
             out_expert_x_scale=torch.zeros((2, 20, 4)),
             dp_x=torch.zeros((7, 512), dtype=torch.float8_e4m3fn), dp_x_scale=torch.zeros((7, 4)),
             indices=torch.zeros((7, 3), dtype=torch.uint32), bound_m=torch.zeros(1, dtype=torch.uint32))
    a.update(over)
    return a


@needs_torch
def test_dispatch_checks():
    import symm.moe as m
    m.check_dispatch(SPEC, **_dispatch_args())
    # column-major scales are fine (as DeepGEMM wants them)
    m.check_dispatch(SPEC, **_dispatch_args(out_expert_x_scale=torch.zeros((2, 4, 20)).transpose(1, 2)))
    # int64 indices are taken (converted)
    assert m.check_dispatch(SPEC, **_dispatch_args(indices=torch.zeros((7, 3), dtype=torch.int64))).dtype \
        == torch.int32
    bad = [
        (dict(out_expert_x=torch.zeros((2, 20, 512), dtype=torch.bfloat16)), TypeError, "out_expert_x is torch.bf"),
        (dict(out_expert_num_tokens=torch.zeros(3, dtype=torch.int32)), ValueError, "expected \\(2\\)"),
        (dict(out_expert_num_tokens=torch.zeros(2, dtype=torch.int64)), TypeError, "out_expert_num_tokens is"),
        (dict(dp_x=torch.zeros((7, 256), dtype=torch.float8_e4m3fn)), ValueError, "dp_x has shape"),
        (dict(dp_x=torch.zeros((7, 512), dtype=torch.float64)), TypeError, "dp_x is torch.float64"),
        (dict(dp_x_scale=None), ValueError, "must be given"),
        (dict(dp_x_scale=torch.zeros((6, 4))), ValueError, "dp_x_scale has shape"),
        (dict(indices=torch.zeros((7, 4), dtype=torch.uint32)), ValueError, "indices has shape"),
        (dict(indices=torch.zeros((7, 3), dtype=torch.float32)), TypeError, "indices is torch.float32"),
        (dict(indices=torch.zeros((3, 7), dtype=torch.uint32).t()), ValueError, "indices must be contiguous"),
        (dict(bound_m=torch.zeros(2, dtype=torch.uint32)), ValueError, "bound_m must hold one element"),
        (dict(bound_m=torch.zeros(1, dtype=torch.float32)), TypeError, "bound_m is"),
        (dict(out_expert_x=torch.zeros((2, 512, 20), dtype=torch.float8_e4m3fn).transpose(1, 2)), ValueError,
         "out_expert_x must be contiguous in its last dimension"),
        (dict(dp_x=torch.zeros((512, 7), dtype=torch.float8_e4m3fn).t()), ValueError, "last dimension"),
        (dict(dp_x=[1, 2]), TypeError, "must be a torch.Tensor"),
    ]
    for over, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            m.check_dispatch(SPEC, **_dispatch_args(**over))
    nospec = dict(SPEC, has_scales=False)
    with pytest.raises(ValueError, match="must be None"):
        m.check_dispatch(nospec, **_dispatch_args())


@needs_torch
def test_combine_checks():
    import symm.moe as m
    good = dict(out_tokens=torch.zeros((10, 512), dtype=torch.bfloat16),
                indices=torch.zeros((7, 3), dtype=torch.uint32), weights=torch.zeros((7, 3)),
                expert_y=torch.zeros((2, 20, 512), dtype=torch.float16), bound_m=None)
    m.check_combine(SPEC, **good)
    bad = [
        (dict(out_tokens=torch.zeros((10, 512), dtype=torch.float32)), TypeError, "out_tokens is torch.float32"),
        (dict(out_tokens=torch.zeros((6, 512), dtype=torch.bfloat16)), ValueError, "6 rows, below the 7 tokens"),
        (dict(weights=torch.zeros((7, 3), dtype=torch.float16)), TypeError, "weights is torch.float16"),
        (dict(weights=torch.zeros((6, 3))), ValueError, "weights has shape"),
        (dict(expert_y=torch.zeros((2, 20, 512), dtype=torch.float8_e4m3fn)), TypeError, "expert_y is"),
        (dict(expert_y=torch.zeros((3, 20, 512), dtype=torch.bfloat16)), ValueError, "expert_y has shape"),
    ]
    for over, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            m.check_combine(SPEC, **dict(good, **over))


@needs_torch
def test_custom_ops_trace_without_graph_breaks():
    """torch.compile (fullgraph) traces dispatch and combine as custom ops
    that mutate their outputs (meta tensors: nothing runs)."""
    import symm.moe as m  # noqa: F401
    ops = torch.ops.symm
    schema = str(ops.moe_dispatch.default._schema)
    assert "Tensor(a" in schema and "!" in schema, schema

    def step(num, ex, exs, x, xs, idx, bound, out, w, y):
        ops.moe_dispatch(1, num, ex, exs, x, xs, idx, bound, True, True)
        ops.moe_combine(1, out, idx, w, y, bound, True, True)
        return out

    meta = dict(device="meta")
    args = (torch.empty(2, dtype=torch.int32, **meta), torch.empty((2, 20, 512), dtype=torch.float8_e4m3fn, **meta),
            torch.empty((2, 20, 4), **meta), torch.empty((7, 512), dtype=torch.float8_e4m3fn, **meta),
            torch.empty((7, 4), **meta), torch.empty((7, 3), dtype=torch.uint32, **meta),
            torch.empty(1, dtype=torch.uint32, **meta), torch.empty((10, 512), dtype=torch.bfloat16, **meta),
            torch.empty((7, 3), **meta), torch.empty((2, 20, 512), dtype=torch.bfloat16, **meta))
    compiled = torch.compile(step, backend="eager", fullgraph=True)
    assert compiled(*args).shape == (10, 512)


# ---------------------------------------------------------------------------
# construction over the host backend
# ---------------------------------------------------------------------------

HOST_ONE_PE = r"""
import symm, symm.moe as m
try:
    m.AllToAll.intranode(10, 8, 3, 0, 2, 3, 512, 512, 16)
except ValueError as e:
    print("DP", e)
try:
    m.AllToAll.intranode(10, 8, 3, 1, 2, 1, 512, 512, 16)
except ValueError as e:
    print("RANK", e)
try:
    m.AllToAll.intranode(10, 8, 3, 0, 1, 1, 512, 1000, 16)
except symm.InvalidArgumentError as e:
    print("BYTES", e)
try:
    m.AllToAll.intranode(10, 8, 3, 0, 1, 1, 512, 512, 16)
except symm.UnsupportedError as e:
    print("UNSUPPORTED", e)
try:
    m.HighThroughput(256, 8, 7168, 4096, x_dtype=m.torch.float8_e4m3fn, scales=True)
except symm.UnsupportedError as e:
    print("HT", e)
symm.finalize()
print("DONE")
"""


@needs_lib
@needs_torch
def test_construction_on_the_host_backend():
    r = run_pes(HOST_ONE_PE, 1)[0]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "DP AllToAll.intranode: world_size 2 is not a multiple of dp_size 3" in r.stdout, r.stdout
    assert "RANK AllToAll.intranode: rank 1 of world_size 2, but symm runs this process as PE 0 of 1" in r.stdout
    assert "BYTES" in r.stdout and "hidden_dim_bytes 1000 is not hidden_dim 512 times" in r.stdout, r.stdout
    assert "UNSUPPORTED" in r.stdout and "needs the native backend" in r.stdout, r.stdout
    assert "HT" in r.stdout and r.stdout.strip().endswith("DONE"), r.stdout


# ---------------------------------------------------------------------------
# the eager call: cached checks, one C call (CPU tensors, a stand-in C call)
# ---------------------------------------------------------------------------

def _mock_ata(spec, calls):
    """An AllToAll whose C library is a recorder: the Python side's checks,
    caching and argument structures run as they do on a GPU."""
    import symm.moe as m
    ata = object.__new__(m.AllToAll)
    ata._c = ctypes.c_void_p(1)
    ata._call_name = "AllToAll"
    ata.device, ata._dev, ata._key = torch.device("cpu"), None, -1
    ata._spec, ata._has_scales = spec, spec["has_scales"]
    ata._dargs, ata._cargs = m.DispatchArgs(), m.CombineArgs()
    ata._daddr, ata._caddr = ctypes.addressof(ata._dargs), ctypes.addressof(ata._cargs)
    ata._dmeta = ata._cmeta = None

    def record(kind):
        def fn(c, addr, flags, stream):
            st = m.DispatchArgs if kind == "dispatch" else m.CombineArgs
            calls.append((kind, flags, st.from_buffer_copy((ctypes.c_char * ctypes.sizeof(st)).from_address(addr))))
            return 0
        return fn
    ata._cdispatch, ata._ccombine = record("dispatch"), record("combine")
    return ata


@needs_torch
def test_eager_call_checks_once_per_argument_shape(monkeypatch):
    import symm.moe as m
    monkeypatch.setattr(m, "_stream", lambda dev=None: 0)
    calls = []
    ata = _mock_ata(SPEC, calls)
    args = _dispatch_args()
    ata.dispatch(**args)
    kind, flags, a = calls[-1]
    assert (kind, flags) == ("dispatch", m.SEND | m.RECV)
    assert a.dp_x == args["dp_x"].data_ptr() and a.indices == args["indices"].data_ptr()
    assert a.num_tokens == 7 and a.out_expert_rows == 20 and tuple(a.out_expert_x_stride) == (20 * 512, 512)
    assert a.x_dtype == m._dtype_code(args["dp_x"]) and a.bound_m == args["bound_m"].data_ptr()
    # same shapes, fresh tensors: the pointers follow, nothing else is redone
    fresh = _dispatch_args()
    ata.dispatch(**fresh, do_send=True, do_recv=False)
    kind, flags, a = calls[-1]
    assert flags == m.SEND and a.dp_x == fresh["dp_x"].data_ptr() and a.out_expert_x == fresh["out_expert_x"].data_ptr()
    # anything the checks depend on changed: checked again, and refused before the C call
    n = len(calls)
    for over, exc, msg in [
            (dict(dp_x=torch.zeros((7, 256), dtype=torch.float8_e4m3fn)), ValueError, "dp_x has shape"),
            (dict(out_expert_x=torch.zeros((2, 20, 512), dtype=torch.bfloat16)), TypeError, "out_expert_x is"),
            (dict(indices=torch.zeros((3, 7), dtype=torch.uint32).t()), ValueError, "must be contiguous"),
            (dict(bound_m=None, dp_x_scale=None), ValueError, "must be given"),
            (dict(dp_x=[1]), TypeError, "must be a torch.Tensor")]:
        with pytest.raises(exc, match=msg):
            ata.dispatch(**_dispatch_args(**over))
    with pytest.raises(ValueError, match="cannot both be False"):
        ata.dispatch(**fresh, do_send=False, do_recv=False)
    assert len(calls) == n, "a refused call reached the C library"
    # int64 indices are converted on every call, cached or not
    for _ in range(2):
        i64 = torch.zeros((7, 3), dtype=torch.int64)
        ata.dispatch(**_dispatch_args(indices=i64))
        assert calls[-1][2].indices != i64.data_ptr()
    # combine: the same
    good = dict(out_tokens=torch.zeros((10, 512), dtype=torch.bfloat16),
                indices=torch.zeros((7, 3), dtype=torch.uint32), weights=torch.zeros((7, 3)),
                expert_y=torch.zeros((2, 20, 512), dtype=torch.float16), bound_m=None)
    ata.combine(**good)
    ata.combine(**dict(good, weights=torch.ones((7, 3))))
    kind, flags, a = calls[-1]
    assert kind == "combine" and a.num_tokens == 7 and a.out_rows == 10 and a.bound_m is None
    with pytest.raises(ValueError, match="weights has shape"):
        ata.combine(**dict(good, weights=torch.zeros((6, 3))))
    with pytest.raises(TypeError, match="num_sms must be an int"):
        ata.set_num_sms("8")
    ata._c = None
    with pytest.raises(ValueError, match="destroyed"):
        ata.dispatch(**fresh)


# ---------------------------------------------------------------------------
# pplx's nvshmem_init: over torch.distributed, without launcher variables
# ---------------------------------------------------------------------------

@needs_lib
@needs_torch
def test_nvshmem_init_in_spawned_processes():
    """moe_spawn.py cpu: two processes from torch.multiprocessing.spawn, a gloo
    group on a FileStore, no RANK/WORLD_SIZE: both of pplx's init forms over the
    host backend, and the argument checks."""
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "moe_spawn.py"),
                        "cpu", "2"], env=child_env({"SYMM_BACKEND": "host", "SYMM_BOOTSTRAP_TIMEOUT": "30"}),
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "moe_spawn cpu: passed on 2 processes" in r.stdout


NVSHMEM_ALONE = r"""
import symm, symm.moe as m
try:
    m.nvshmem_init(0, 0, 2)
except RuntimeError as e:
    print("ALONE", e)
print("AFTER", symm.initialized())
m.nvshmem_init(0, 0, 1)
print("ONE", symm.my_pe(), symm.n_pes())
m.nvshmem_finalize()
m.nvshmem_finalize()
try:
    m.nvshmem_init(b"x" * 3, 0, 1)
except TypeError as e:
    print("UID", e)
print("DONE")
"""


@needs_lib
@needs_torch
def test_nvshmem_init_without_a_group():
    r = run_python(NVSHMEM_ALONE, env={"SYMM_BACKEND": "host"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ALONE nvshmem_init: world_size 2, but without torch.distributed" in r.stdout, r.stdout
    assert "AFTER False" in r.stdout and "ONE 0 1" in r.stdout, r.stdout
    assert "UID nvshmem_init: uid must be" in r.stdout and r.stdout.strip().endswith("DONE"), r.stdout
