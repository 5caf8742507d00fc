"""Every symm.cute function compiles into a CuTe DSL kernel ahead of time, for
sm_90a and sm_80, with no GPU, and its PTX holds the memory operations the
call promises (the same expectations as symm.triton's test).

For each device function a @cute.kernel calling symm.cute.raw.<name> is
generated; every kernel takes (ctx, buf, x, pe): pointer parameters are
addresses inside buf, numbers come from x, and the ordering, scope, type and
algorithm parameters are constants, so the PTX shows the instruction they
select. Sixteen kernels are launched by one @cute.jit function and compiled
together (one cute.compile), and the PTX is split per entry point (with the
slow-path helpers each calls). The view layer (symm.cute.<name> on tensor
views and typed pointers) is compiled too, one kernel per family.
"""
import os
import re
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, optional_import  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

HAVE_CUTE = optional_import("cutlass.cute") is not None

pytestmark = pytest.mark.skipif(not HAVE_CUTE, reason="CuTe DSL not installed "
                                "(pip install 'nvidia-cutlass-dsl[cu13]==4.8.1')")

if HAVE_CUTE:
    from symm.cute._signatures import FUNCTIONS
else:
    FUNCTIONS = ()

ARCHS = (90, 80)

# parameter -> expression in the kernel (the rest: pointers from buf, numbers from x)
FIXED = {"dtype": "sc.DTYPE_F32", "op": "sc.OP_SUM", "acc": "sc.DTYPE_DEFAULT",
         "algo": "sc.ALGO_AUTO", "scope": "sc.SCOPE_SYS", "block": "bidx", "nblocks": "nblk", "pe": "pe",
         "root": "pe"}
NUMBER = {"float": "cutlass.Float32(x)", "double": "cutlass.Float64(x)"}


def call_source(name, ret, params):
    """The body of the kernel calling raw.<name>."""
    call = []
    for i, (pname, ctype) in enumerate(params):
        if pname == "ctx":
            call.append("ctx")
        elif pname == "sem":
            call.append("sc.SEM_ACQUIRE" if name.startswith("ld_") else "sc.SEM_RELEASE")
        elif "*" in ctype:
            call.append("buf + %d" % (256 * i))
        elif pname in FIXED:
            call.append(FIXED[pname])
        else:
            call.append(NUMBER.get(ctype, "x"))
    stmt = "sc.raw.%s(%s)" % (name, ", ".join(call))
    if ret == "void":
        return [stmt]
    return ["r = %s" % stmt, "out = cute.make_ptr(type(r), buf + 8192, cute.AddressSpace.gmem)",
            "cute.make_tensor(out, cute.make_layout(1))[0] = r"]


HEAD = """import cutlass
import cutlass.cute as cute
import symm.cute as sc

"""


def kernel_source(kname, body):
    lines = ["@cute.kernel",
             "def %s(ctx: cutlass.Int64, buf: cutlass.Int64, x: cutlass.Int64, pe: cutlass.Int32):"
             % kname,
             "    bidx, _, _ = cute.arch.block_idx()",
             "    nblk, _, _ = cute.arch.grid_dim()"]
    return "\n".join(lines + ["    " + s for s in body]) + "\n\n"


def launcher_source(knames):
    lines = ["@cute.jit",
             "def launch_all(ctx: cutlass.Int64, buf: cutlass.Int64, x: cutlass.Int64, "
             "pe: cutlass.Int32):"]
    lines += ["    %s(ctx, buf, x, pe).launch(grid=[1, 1, 1], block=[128, 1, 1])" % k for k in knames]
    return "\n".join(lines) + "\n"


# The view layer: one kernel per family, on tensor views over buf (f32 data,
# u64 signal words, i32 words), compiled into the second module.
VIEW_CALLS = {
    "my_pe": ["r = sc.my_pe(ctx) + sc.n_pes(ctx)"],
    "peer": ["pt = sc.peer_tensor(ctx, d, pe)", "pt[0] = cutlass.Float32(1)",
             "sc.peer_ptr(ctx, w.iterator, pe)", "sc.get_peer_tensor(ctx, w, pe)"],
    "pg": ["sc.p(ctx, d, cutlass.Float32(2), pe)", "r = sc.g(ctx, w, pe)"],
    "ldst": ["r = sc.ld(ctx, sig, pe, sc.SEM_ACQUIRE, sc.SCOPE_SYS)",
             "sc.st(ctx, d.iterator, cutlass.Float32(3), pe, sc.SEM_RELEASE, sc.SCOPE_SYS)"],
    "wait": ["r = sc.wait_until(ctx, w, sc.CMP_GE, 1)"],
    "amo": ["sc.atomic_%s(ctx, w, %spe)" % (op, args) for op, args in (
        ("set", "1, "), ("inc", ""), ("add", "2, "), ("and", "3, "), ("or", "4, "),
        ("xor", "5, "))] + ["r = sc.atomic_%s(ctx, sig, %spe)" % (op, args) for op, args in (
            ("fetch", ""), ("swap", "cutlass.Uint64(1), "),
            ("compare_swap", "cutlass.Uint64(1), cutlass.Uint64(2), "), ("fetch_inc", ""),
            ("fetch_add", "cutlass.Uint64(1), "), ("fetch_and", "cutlass.Uint64(1), "),
            ("fetch_or", "cutlass.Uint64(1), "), ("fetch_xor", "cutlass.Uint64(1), "))],
    "signal": ["sc.signal_op(ctx, sig, 1, sc.SIGNAL_SET, pe)", "r = sc.signal_fetch(ctx, sig)",
               "r = sc.signal_wait_until(ctx, sig, sc.CMP_EQ, 1)"],
    "bulk": ["sc.%s%s%s(ctx, d, s, pe)" % (op, scope, nb) for op in ("put", "get")
             for scope in ("", "_warp", "_block") for nb in ("", "_nbi")]
    + ["sc.put_nbi(ctx, d.iterator, s.iterator, pe, nelems=n)"],
    "put_signal": ["sc.put_signal%s%s(ctx, d, s, sig, 1, sc.SIGNAL_ADD, pe)" % (scope, nb)
                   for scope in ("", "_warp", "_block") for nb in ("", "_nbi")],
    "sync": ["sc.fence(ctx)", "sc.quiet_warp(ctx)", "sc.barrier_block(ctx)", "sc.sync_block(ctx)"],
    "all_reduce": ["sc.all_reduce_block(ctx, d, s, sc.OP_SUM)",
                   "sc.all_reduce_grid(ctx, d, s, sc.OP_MAX, bidx, nblk)",
                   "sc.all_reduce_ex_block(ctx, d, s, sc.OP_SUM, sc.DTYPE_DEFAULT, sc.ALGO_AUTO)",
                   "sc.all_reduce_ex_grid(ctx, d, s, sc.OP_SUM, sc.DTYPE_DEFAULT, sc.ALGO_AUTO, "
                   "bidx, nblk)"],
    "reduce_scatter": ["sc.reduce_scatter_block(ctx, d, s, sc.OP_SUM)",
                       "sc.reduce_scatter_grid(ctx, d, s, sc.OP_SUM, bidx, nblk)",
                       "sc.reduce_scatter_ex_block(ctx, d, s, sc.OP_SUM, sc.DTYPE_DEFAULT, "
                       "sc.ALGO_AUTO)",
                       "sc.reduce_scatter_ex_grid(ctx, d, s, sc.OP_SUM, sc.DTYPE_DEFAULT, "
                       "sc.ALGO_AUTO, bidx, nblk)"],
    "gather_a2a": ["sc.all_gather_block(ctx, d, s)", "sc.all_gather_grid(ctx, d, s, bidx, nblk)",
                   "sc.all_to_all_block(ctx, d, s)", "sc.all_to_all_grid(ctx, d, s, bidx, nblk)",
                   "sc.all_to_allv_block(ctx, d, s, sig, sig, sig, sig)",
                   "sc.all_to_allv_grid(ctx, d, s, sig, sig, sig, sig, bidx, nblk)",
                   "sc.broadcast_block(ctx, d, s, 0)", "sc.broadcast_grid(ctx, d, s, 0, bidx, nblk)",
                   "sc.coll_barrier_block(ctx)", "sc.coll_barrier_grid(ctx, bidx, nblk)"],
}
VIEW_PRELUDE = [
    "n = cutlass.Int32(x)",
    "d = cute.make_tensor(cute.make_ptr(cutlass.Float32, buf, cute.AddressSpace.gmem, "
    "assumed_align=16), cute.make_layout(n))",
    "s = cute.make_tensor(cute.make_ptr(cutlass.Float32, buf + 4096, cute.AddressSpace.gmem, "
    "assumed_align=16), cute.make_layout(n))",
    "sig = cute.make_ptr(cutlass.Uint64, buf + 8192, cute.AddressSpace.gmem, assumed_align=8)",
    "w = cute.make_tensor(cute.make_ptr(cutlass.Int32, buf + 8448, cute.AddressSpace.gmem, "
    "assumed_align=4), cute.make_layout(1))",
]
VIEW_RESULT = ["o = cute.make_ptr(type(r), buf + 12288, cute.AddressSpace.gmem)",
               "cute.make_tensor(o, cute.make_layout(1))[0] = r"]


def write_module(path, kernels):
    with open(path, "w") as f:
        f.write(HEAD)
        for kname, body in kernels:
            f.write(kernel_source(kname, body))
        f.write(launcher_source([k for k, _ in kernels]))


def _compile(path, arch):
    import importlib.util

    import symm.cute as sc
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dump = path[:-3] + ".d"  # one per module: the PTX is read back from it
    os.makedirs(dump, exist_ok=True)
    fn = sc.compile(mod.launch_all, 0, 0, 0, 0, arch=arch,
                    options="--keep-ptx --keep-cubin --dump-dir %s" % dump)
    return fn.__ptx__, bool(fn.__cubin__)


def _job(args):
    """Worker: compile one module; (arch, {kernel: PTX with its helpers}, error)."""
    path, arch = args
    try:
        ptx, cubin = _compile(path, arch)
        if not cubin or not re.search(r"\.target sm_%da?\b" % arch, ptx):
            return arch, {}, "no sm_%d cubin" % arch
        return arch, kernels_ptx(ptx), None
    except Exception as e:  # noqa: BLE001 - reported by the tests of its kernels
        return arch, {}, "%s: %s" % (type(e).__name__, str(e)[-3000:])


_BLOCK = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\w+)",
                    re.M)
_CALL = re.compile(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)")


def kernels_ptx(ptx):
    """{kernel name: the PTX of its entry point followed by the .func bodies
    it calls, transitively} (the slow-path helpers are not inlined)."""
    heads = [(m.start(), m.group(1), m.group(2)) for m in _BLOCK.finditer(ptx)]
    funcs, entries = {}, {}
    for i, (pos, kind, name) in enumerate(heads):
        text = ptx[pos:heads[i + 1][0] if i + 1 < len(heads) else len(ptx)]
        if kind == "entry":
            entries[re.sub(r"^kernel_cutlass_|_+\d*$", "", name)] = text
        elif "{" in text:
            funcs[name] = text
    out = {}
    for kname, text in entries.items():
        seen, todo, parts = set(), _CALL.findall(text), [text]
        while todo:
            f = todo.pop()
            if f in funcs and f not in seen:
                seen.add(f)
                parts.append(funcs[f])
                todo += _CALL.findall(funcs[f])
        out[kname] = "\n".join(parts)
    return out


def is_collective(name):
    return name.startswith(("all_", "reduce_scatter", "broadcast", "coll_"))


def plan():
    """Modules to compile: (path, arch, kernel names). One module grows slower
    than its parts (a 144-kernel module takes 2.5 times its 9 chunks), so the
    raw kernels go in chunks of 16 and each view family alone; the view layer
    is compiled for sm_90 only (its calls are the raw ones, compiled for both)."""
    tmp = tempfile.mkdtemp(prefix="symm-cute-aot-")
    jobs = []
    raw = sorted(FUNCTIONS, key=lambda f: not is_collective(f[0]))
    for arch in ARCHS:
        for i in range(0, len(raw), 16):
            kernels = [("k_" + f[0], call_source(f[0], f[1], f[2])) for f in raw[i:i + 16]]
            jobs.append((os.path.join(tmp, "raw_%d_%d.py" % (arch, i)), arch, kernels))
    for family, body in VIEW_CALLS.items():
        result = VIEW_RESULT if any(x.startswith("r = ") for x in body) else []
        jobs.append((os.path.join(tmp, "view_%s.py" % family), 90,
                     [("v_" + family, VIEW_PRELUDE + body + result)]))
    for path, _, kernels in jobs:
        write_module(path, kernels)
    return jobs


_results = {}


def compiled():
    """{(arch, kernel name): (PTX, error)} for every module, compiled once, in
    parallel (two workers: the CI machine's cores)."""
    if not _results:
        import concurrent.futures as cf
        import multiprocessing
        jobs = plan()
        os.environ["PYTHONPATH"] = PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")
        t0 = time.time()
        ctx = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(max(1, min(2, os.cpu_count() or 1)), mp_context=ctx) as pool:
            for (path, arch, kernels), (_, ptxs, err) in zip(
                    jobs, pool.map(_job, [(p, a) for p, a, _ in jobs])):
                for kname, _ in kernels:
                    _results[(arch, kname)] = (ptxs.get(kname), err)
        print("\nsymm.cute AOT: %d modules compiled in %.1f s" % (len(jobs), time.time() - t0))
    return _results


CASES = [pytest.param(arch, f[0], id="sm%d-%s" % (arch, f[0])) for arch in ARCHS for f in FUNCTIONS]


@pytest.mark.parametrize("arch,name", CASES)
def test_raw_function_compiles_with_promised_ptx(arch, name):
    from test_triton_aot import expectations
    body, err = compiled()[(arch, "k_" + name)]
    assert err is None, "symm.cute.raw.%s does not compile for sm_%d:\n%s" % (name, arch, err)
    assert body is not None, "no entry point for %s" % name
    # the bitcode was linked and inlined: no call into the library is left
    # but the slow-path reporting helpers
    calls = set(_CALL.findall(body))
    assert not {c for c in calls if re.match(r"symm_[a-z]", c)}, calls
    for pat in expectations(name, "each"):
        assert re.search(pat, body), "sm_%d %s: PTX lacks /%s/" % (arch, name, pat)


VIEW_EXPECT = {  # family kernel -> PTX it must hold
    "pg": [r"\bst\.relaxed\.sys\.global\.b32", r"\bld(\.\w+)*\.global\.b32"],
    "ldst": [r"\bld\.acquire\.sys\.global\.b64", r"\bst\.release\.sys\.global\.b32"],
    "wait": [r"\bld\.acquire\.sys\.global\.b32", r"%globaltimer"],
    "amo": [r"\bred\.relaxed\.sys\.global\.(add|and|or|xor)", r"\batom\.relaxed\.sys\.global\.cas\.b64"],
    "signal": [r"\bst\.release\.sys\.global\.[bu]64", r"\bld\.acquire\.sys\.global\.b64"],
    "put_signal": [r"\bred\.release\.sys\.global\.add\.u64"],
    "sync": [r"\bfence\.sc\.sys", r"\bfence\.acq_rel\.sys"],
    "all_reduce": [r"\bld\.acquire\.sys\.global", r"\bst\.release\.sys\.global"],
}


@pytest.mark.parametrize("family", [pytest.param(k, id="sm90-view-%s" % k) for k in VIEW_CALLS])
def test_view_calls_compile(family):
    body, err = compiled()[(90, "v_" + family)]
    assert err is None, "the view calls of %s do not compile:\n%s" % (family, err)
    assert body is not None
    for pat in VIEW_EXPECT.get(family, []):
        assert re.search(pat, body), "view %s: PTX lacks /%s/" % (family, pat)
