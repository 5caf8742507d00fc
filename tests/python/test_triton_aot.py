"""Every symm.triton function compiles into a Triton kernel ahead of time, for
sm_90 and sm_80, with no GPU, and its PTX holds the memory operations the
call promises.

For each device function a kernel calling the symm.triton wrapper is generated
(pointer and scalar parameters become kernel arguments; the ordering, scope,
type and algorithm parameters are the constants named below) and compiled by
triton.compile with a GPUTarget, linking the bitcode through extern_libs, down
to a cubin (so ptxas accepts it for that architecture). Run one architecture
with `-k sm90` or `-k sm80`.
"""
import concurrent.futures as cf
import multiprocessing
import os
import re
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, in_ci  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    if in_ci():
        raise
    HAVE_TRITON = False

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed (pip install triton==3.6.0)")

if HAVE_TRITON:
    from symm.triton._signatures import FUNCTIONS
else:
    FUNCTIONS = ()

ARCHS = (90, 80)

# C type -> Triton signature code of a kernel argument
SIG = {"int": "i32", "int8_t": "i8", "int16_t": "i16", "int32_t": "i32", "int64_t": "i64",
       "uint8_t": "u8", "uint16_t": "u16", "uint32_t": "u32", "uint64_t": "u64", "size_t": "u64",
       "float": "fp32", "double": "fp64", "void": "u8"}

# Parameters given as constants (so the PTX shows the one instruction they
# select) or from the program; the rest are kernel arguments.
FIXED = {"dtype": "st.DTYPE_F32", "op": "st.OP_SUM", "acc": "st.DTYPE_DEFAULT",
         "algo": "st.ALGO_AUTO", "scope": "st.SCOPE_SYS", "block": "tl.program_id(0)",
         "nblocks": "tl.num_programs(0)"}


def _base(ctype):
    return " ".join(w for w in ctype.replace("*", " ").split() if w not in ("const", "volatile", "restrict"))


def call_source(name, ret, params, prefix):
    """The call of st.<name> in a kernel: (statement, kernel args, their signature)."""
    kargs, sig, call = [], {}, []
    for pname, ctype in params:
        if pname == "ctx":
            call.append("ctx")
        elif pname == "sem":
            call.append("st.SEM_ACQUIRE" if name.startswith("ld_") else "st.SEM_RELEASE")
        elif pname in FIXED and "*" not in ctype:
            call.append(FIXED[pname])
        else:
            arg = prefix + pname
            kargs.append(arg)
            sig[arg] = ("*" if "*" in ctype else "") + SIG[_base(ctype)]
            call.append(arg)
    stmt = "st.%s(%s)" % (name, ", ".join(call))
    if ret != "void":
        out = prefix + "out"
        kargs.append(out)
        if "*" in ret:
            sig[out] = "*i64"
            stmt = "tl.store(%s, %s.to(tl.int64))" % (out, stmt)
        else:
            sig[out] = "*" + SIG[_base(ret)]
            stmt = "tl.store(%s, %s)" % (out, stmt)
    return stmt, kargs, sig


def is_collective(name):
    return name.startswith(("all_", "reduce_scatter", "broadcast"))


def plan(arch):
    """Groups of functions compiled into one kernel each: one function per
    kernel for sm_90 (so each PTX shows that call alone); for sm_80, where the
    test is mostly that everything links and assembles, a dozen per kernel
    (the collectives, the slow ones to compile, alone)."""
    if arch == 90:
        return [[f] for f in FUNCTIONS]
    groups, small = [], [f for f in FUNCTIONS if not is_collective(f[0])]
    groups += [[f] for f in FUNCTIONS if is_collective(f[0])]
    groups += [small[i:i + 12] for i in range(0, len(small), 12)]
    return groups


def write_module(path, groups):
    """One kernel k<i> per group; returns {i: (names, signature)}."""
    parts = ["import triton", "import triton.language as tl", "import symm.triton as st", ""]
    kernels = {}
    for i, group in enumerate(groups):
        kargs, sig, stmts = ["ctx"], {"ctx": "i64"}, []
        for j, (name, ret, params, _) in enumerate(group):
            stmt, a, s = call_source(name, ret, params, "a%d_" % j)
            kargs += a
            sig.update(s)
            stmts.append(stmt)
        parts.append("@triton.jit\ndef k%d(%s):\n%s\n" % (i, ", ".join(kargs),
                                                           "\n".join("    " + x for x in stmts)))
        kernels[i] = ([f[0] for f in group], sig)
    with open(path, "w") as f:
        f.write("\n".join(parts))
    return kernels


def _compile_one(args):
    """Worker: compile kernel k<i> of the generated module for arch."""
    module_path, i, sig, arch = args
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget

    import symm.triton as st
    spec = importlib.util.spec_from_file_location("symm_aot_kernels", module_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        src = triton.compiler.ASTSource(fn=getattr(mod, "k%d" % i), signature=sig, constexprs={})
        k = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                           options={"extern_libs": st.extern_libs(arch), "num_warps": 4})
        return i, k.asm["ptx"], bool(k.asm.get("cubin")), None
    except Exception as e:  # noqa: BLE001 - reported by the tests of its functions
        return i, None, False, "%s: %s" % (type(e).__name__, str(e)[-3000:])


_results = {}


def compiled(arch):
    """{name: (ptx, has_cubin, error)} for every function, compiled once per arch."""
    if arch in _results:
        return _results[arch]
    tmp = tempfile.mkdtemp(prefix="symm-aot-")
    module_path = os.path.join(tmp, "symm_aot_kernels.py")
    kernels = write_module(module_path, plan(arch))
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "cache")  # compile for real
    os.environ["PYTHONPATH"] = PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")
    # biggest first, so the slow collectives do not end the run alone
    jobs = sorted(((module_path, i, sig, arch) for i, (names, sig) in kernels.items()),
                  key=lambda j: not is_collective(kernels[j[1]][0][0]))
    workers = max(1, min(4, os.cpu_count() or 1))
    ctx = multiprocessing.get_context("spawn")
    res = {}
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        for i, ptx, cubin, err in pool.map(_compile_one, jobs):
            for name in kernels[i][0]:
                res[name] = (ptx, cubin, err)
    _results[arch] = res
    return res


# ---------------------------------------------------------------------------
# What each call promises, as PTX (same for sm_80 and sm_90)
# ---------------------------------------------------------------------------

WIDTH = {"i8": "u8", "u8": "u8", "i16": "u16", "u16": "u16", "i32": "b32", "u32": "b32",
         "f32": "b32", "i64": "b64", "u64": "b64", "f64": "b64"}
BITS = {"i32": "32", "u32": "32", "i64": "64", "u64": "64"}
REMOTE_LD = r"\bld(\.\w+)*\.global"          # loads from a peer's heap
REMOTE_ST = r"\bst(\.\w+)*\.global"          # stores into it
# local side of a copy: any data load/store, generic or global (not shared/param)
ANY_LD = r"\bld(\.global|\.volatile|\.relaxed\.\w+|\.acquire\.\w+)*(\.v[24])?\.[bu](8|16|32|64)\b"
ANY_ST = r"\bst(\.global|\.volatile|\.relaxed\.\w+|\.release\.\w+)*(\.v[24])?\.[bu](8|16|32|64)\b"
# calls whose contract needs the whole block to have finished a step together
BLOCK_SYNCED = ("get_block", "put_signal_block", "put_signal_block_nbi", "barrier_block",
                "sync_block", "coll_barrier_block")
SIGNAL = [r"\bst\.release\.sys\.global\.(b|u)64", r"\bred\.release\.sys\.global\.add\.u64"]
ACQUIRE = r"\bld\.acquire\.sys\.global"


def expectations(name, mode):
    """Regexes that must all match the PTX of a kernel calling `name`."""
    pats = []
    if mode in ("thread0", "warp") and not name.startswith("trace_"):
        pats += [r"%tid\.x", r"\b(bar|barrier)\.sync\b"]        # gated, between program barriers
    elif mode == "thread0":  # the plain bitcode's regions are empty: only the program barriers stay
        pats += [r"\b(bar|barrier)\.sync\b"]
    if name in BLOCK_SYNCED or is_collective(name):
        pats += [r"\b(bar|barrier)\.sync\b"]
    t = name.rsplit("_", 1)[-1]
    amo = re.match(r"atomic_(\w+?)_(i32|i64|u32|u64)$", name)
    if name.startswith("p_"):
        pats.append(r"\bst(\.\w+)*\.global\.%s\b" % WIDTH[t])
    elif name.startswith("g_"):
        pats.append(r"\bld(\.\w+)*\.global\.%s\b" % WIDTH[t])
    elif name.startswith("ld_"):
        pats.append(r"\bld\.acquire\.sys\.global\.%s\b" % WIDTH[t])
    elif name.startswith("st_"):
        pats.append(r"\bst\.release\.sys\.global\.%s\b" % WIDTH[t])
    elif name.startswith("put_signal"):
        pats += [ANY_LD, REMOTE_ST] + SIGNAL
    elif name.startswith("put"):
        pats += [ANY_LD, REMOTE_ST]
    elif name.startswith("get"):
        pats += [REMOTE_LD, ANY_ST]
    elif name.startswith("pkt_wait"):
        pats += [r"\bld\.volatile\.global\.v4\.\w32", r"%globaltimer"]  # polls 16-byte packets, a deadline
        if "_v64" not in name:
            pats.append(ANY_ST)  # the payload stored out (the v64 forms return it in a register)
    elif name == "signal_op":
        pats += SIGNAL
    elif name == "signal_fetch":
        pats.append(ACQUIRE + r"\.b64")
    elif name == "signal_wait_until" or name.startswith("wait_until_"):
        w = "b64" if name == "signal_wait_until" else "b" + BITS[t]
        pats += [ACQUIRE + r"\." + w, r"%globaltimer"]      # acquire loads, with a deadline
    elif name.startswith("atomic_fetch_") and t in BITS and name.count("_") == 2:
        pats.append(r"\bld\.relaxed\.sys\.global\.b%s" % BITS[t])
    elif amo:
        op, w = amo.group(1), BITS[amo.group(2)]
        table = {"set": r"\bst\.relaxed\.sys\.global\.b%s" % w,
                 "swap": r"\batom\.relaxed\.sys\.global\.exch\.b%s" % w,
                 "compare_swap": r"\batom\.relaxed\.sys\.global\.cas\.b%s" % w,
                 "inc": r"\bred\.relaxed\.sys\.global\.add\.u%s" % w,
                 "add": r"\bred\.relaxed\.sys\.global\.add\.u%s" % w,
                 "fetch_inc": r"\batom\.relaxed\.sys\.global\.add\.u%s" % w,
                 "fetch_add": r"\batom\.relaxed\.sys\.global\.add\.u%s" % w}
        for bop in ("and", "or", "xor"):
            table[bop] = r"\bred\.relaxed\.sys\.global\.%s\.b%s" % (bop, w)
            table["fetch_" + bop] = r"\batom\.relaxed\.sys\.global\.%s\.b%s" % (bop, w)
        pats.append(table[op])
    elif name.startswith("fence"):
        pats.append(r"\bfence\.acq_rel\.sys")
    elif name.startswith("quiet"):
        pats.append(r"\bfence\.sc\.sys")
    elif name.startswith("barrier"):
        pats += [r"\bfence\.sc\.sys", ACQUIRE]            # quiet, then wait for the others
    elif name == "sync_block":
        pats += [r"\bfence\.acq_rel\.sys", ACQUIRE]
    elif name.startswith(("all_", "reduce_scatter", "broadcast", "coll_barrier")):
        pats += [ACQUIRE, r"\bst\.release\.sys\.global"]   # handshakes with the peers
    elif name in ("ctx_my_pe", "ctx_n_pes", "ctx_ptr"):
        pats.append(r"\bld(\.\w+)*\.global")             # reads the context
    elif name.startswith("trace_"):
        pass  # the plain bitcode records nothing (tests/python/test_trace_py.py checks the traced one)
    else:
        raise AssertionError("no PTX expectation for %s: add one" % name)
    return pats


CASES = [pytest.param(arch, f[0], f[3], id="sm%d-%s" % (arch, f[0])) for arch in ARCHS for f in FUNCTIONS]


@pytest.mark.parametrize("arch,name,mode", CASES)
def test_compiles_with_promised_ptx(arch, name, mode):
    ptx, cubin, err = compiled(arch)[name]
    assert err is None, "symm.triton.%s does not compile for sm_%d:\n%s" % (name, arch, err)
    assert cubin, "no cubin for %s" % name
    assert re.search(r"\.target sm_%d" % arch, ptx)
    # the device function was linked and inlined: no call into the library
    # remains but the slow-path reporting helpers
    calls = set(re.findall(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx))
    assert not {c for c in calls if re.match(r"symm_[a-z]", c)}, calls
    for pat in expectations(name, mode):
        assert re.search(pat, ptx), "sm_%d %s: PTX lacks /%s/" % (arch, name, pat)


def test_scalar_only_calls_reject_tensors():
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    import symm.triton as st

    @triton.jit
    def bad(ctx, x, pe):
        offs = tl.arange(0, 128)
        st.p_i32(ctx, x + offs, offs, pe)

    src = triton.compiler.ASTSource(fn=bad, signature={"ctx": "i64", "x": "*i32", "pe": "i32"},
                                    constexprs={})
    with pytest.raises(Exception) as info:
        triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"extern_libs": st.extern_libs(90)})
    chain, e = [], info.value
    while e is not None:
        chain.append(str(e))
        e = e.__cause__ or e.__context__
    assert any("runs in one thread of the program and takes scalars" in m for m in chain), chain


def test_raw_calls_are_elementwise():
    """raw functions take tensors; the wrapper-level each-thread calls too."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    import symm.triton as st

    @triton.jit
    def vec(ctx, x, y, pe, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        v = st.g_f32(ctx, x + offs, pe)                 # each thread, element-wise
        st.raw.p_f32(ctx, y + offs, v * 2, pe)          # raw: every element by its thread
        p = st.peer_ptr(ctx, y, pe)                     # keeps the pointer type
        tl.store(p + offs, v)

    src = triton.compiler.ASTSource(fn=vec, signature={"ctx": "i64", "x": "*fp32", "y": "*fp32",
                                                       "pe": "i32", "BLOCK": "constexpr"},
                                    constexprs={"BLOCK": 256})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"extern_libs": st.extern_libs(90)})
    ptx = k.asm["ptx"]
    assert len(re.findall(r"\bld(\.\w+)*\.global\.b32", ptx)) >= 2     # 256 elements / 128 threads
    assert re.search(r"\bst\.global(\.v\d)?\.b32", ptx)
