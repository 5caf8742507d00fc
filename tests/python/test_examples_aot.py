"""The Triton kernels of examples/triton and of the GPU tests compile ahead of
time for sm_90 (and the examples for sm_80), with no GPU: catches a broken
example or test kernel in CI, before anyone reaches a GPU.

The example scripts import torch at the top; CI has no torch, so a stand-in
module satisfies those imports (only the @triton.jit kernels are used here).
"""
import concurrent.futures as cf
import multiprocessing
import os
import sys
import tempfile
import types

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, REPO, in_ci  # noqa: E402

try:
    import triton  # noqa: F401
except ImportError:
    if in_ci():
        raise
    pytest.skip("triton not installed", allow_module_level=True)

EXAMPLES = os.path.join(REPO, "examples", "triton")
HERE = os.path.dirname(os.path.abspath(__file__))

B16, I64, I32 = "*bf16", "*i64", "i32"
# (module, kernel, signature, constexprs, options)
GEMM = dict(BM=128, BN=256, BK=64, GROUP_M=8)
GEMM_OPTS = dict(num_warps=8, num_stages=3)
# the GEMMs read A and B through TMA descriptors in [BM, BK] / [BK, BN] blocks (_gemm.operand)
DA, DB = "tensordesc<bf16[128,64]>", "tensordesc<bf16[64,256]>"
SPECS = [
    ("ring_shift", "ring_shift_kernel", dict(ctx="i64", dst=B16, src=B16, n=I32, sig=I64, entry=I64, gen=I64),
     dict(VEC=True, BLOCK=4096), dict(num_warps=8)),
    ("all_gather", "all_gather_kernel", dict(ctx="i64", out=B16, shard=B16, n=I32, entry=I64, arrived=I64,
                                             gen=I64), dict(VEC=True, BLOCK=4096), dict(num_warps=8)),
    ("all_to_all", "all_to_all_kernel", dict(ctx="i64", out=B16, inp=B16, n=I32, entry=I64, arrived=I64,
                                             gen=I64), dict(VEC=False, BLOCK=4096), dict(num_warps=8)),
    ("all_reduce", "all_reduce_kernel", dict(ctx="i64", out=B16, x=B16, n=I32, shard=I32, entry=I64,
                                             done=I64, gen=I64), dict(VEC=True, BLOCK=2048), dict(num_warps=8)),
    ("ag_gemm", "ag_gemm_kernel", dict(ctx="i64", a_local=DA, a_full=DA, b=DB, c=B16, flags=I64,
                                       epoch_ptr=I64, rec=I64, M=I32, N=I32, K=I32, M_LOC=I32, CHUNK_M=I32,
                                       CHUNKS=I32, ME=I32, NPES=I32),
     GEMM, GEMM_OPTS),
    ("ag_gemm", "ag_finish_kernel", dict(ctx="i64", rec=I64, epoch_ptr=I64), {}, dict(num_warps=1)),
    ("gemm_rs", "gemm_rs_kernel", dict(ctx="i64", a=DA, b=DB, recv=B16, counters=I64, out=B16, gen=I64,
                                       rec=I64, M=I32, N=I32, K=I32, M_LOC=I32, CHUNK_M=I32),
     dict(GEMM, VEC=True), GEMM_OPTS),
    ("gemm_rs", "gemm_rs_ce_kernel", dict(ctx="i64", a=DA, b=DB, stage=B16, recv=B16, done=I64, rflag=I64,
                                          out=B16, rec=I64, N=I32, K=I32, M_LOC=I32, SUB_M=I32, ME=I32,
                                          NPES=I32, T0=I32),
     dict(GEMM, VEC=True), GEMM_OPTS),
    ("_waits", "finish_kernel", dict(ctx="i64", rec=I64, flags=I64, NFLAGS=I32), dict(BLOCK=32),
     dict(num_warps=1)),
    ("_waits", "wait_report_kernel", dict(ctx="i64", rec=I64), {}, dict(num_warps=1)),
    ("_gemm", "gemm_kernel", dict(a=DA, b=DB, c=B16, M=I32, N=I32, K=I32, M_LOC=I32), GEMM, GEMM_OPTS),
    ("seq_all_to_all", "seq_all_to_all_kernel", dict(ctx="i64", out=B16, x=B16, counter=I64, gen=I64,
                                                     S_LOC=I32, HD=I32, HD_LOC=I32, NBLK=I32,
                                                     PER_DEST=I32),
     dict(VEC=True, BS=16, BC=256), dict(num_warps=4)),
]

# gpu_kernels.py: one instance per kernel; FN etc. name symm.triton functions
U8, F32 = "*u8", "*fp32"
GPU_SPECS = [
    ("k_ctx", dict(ctx="i64", out="*i32", ptr_in=F32, ptr_out=I64), {}),
    ("k_p", dict(ctx="i64", dest="*i8", vals="*i8", pe=I32), dict(FN="p_i8")),
    ("k_g", dict(ctx="i64", src="*fp64", out="*fp64", pe=I32), dict(FN="g_f64", BLOCK=128)),
    ("k_g_scalar", dict(ctx="i64", src="*i16", out="*i16", pe=I32), dict(FN="g_u16")),
    ("k_copy", dict(ctx="i64", dest=U8, src=U8, nbytes="i64", pe=I32), dict(FN="put_block_nbi", QUIET="quiet_block")),
    ("k_copy", dict(ctx="i64", dest=U8, src=U8, nbytes="i64", pe=I32), dict(FN="get_warp", QUIET=None)),
    ("k_put_signal", dict(ctx="i64", dest=U8, src=U8, nbytes="i64", sig=I64, value="i64", sig_op=I32,
                          wait_for="i64", recv=U8, out=I64, nxt=I32), dict(FN="put_signal_warp_nbi", BLOCK=1024)),
    ("k_signals", dict(ctx="i64", sig_add=I64, sig_set=I64, add_target="i64", set_value="i64", out=I64), {}),
    ("k_wait_until", dict(ctx="i64", ivar=I64, value="i64", out=I64), dict(STORE="st_u64", WAIT="wait_until_u64")),
    ("k_st_all", dict(ctx="i64", dest=F32, vals=F32, pe=I32), dict(FN="st_f32")),
    ("k_ld_all", dict(ctx="i64", src="*fp64", out="*fp64", pe=I32), dict(FN="ld_f64")),
    ("k_fetch_op", dict(ctx="i64", target="*i32", value=I32, pe=I32, outs="*i32"),
     dict(FN="atomic_swap_u32", NT=128, PER_PROGRAM=True)),
    ("k_fetch_inc", dict(ctx="i64", target=I64, pe=I32, outs=I64), dict(FN="atomic_fetch_inc_i64", NT=128)),
    ("k_op", dict(ctx="i64", target=I64, value="i64", pe=I32), dict(FN="atomic_and_u64")),
    ("k_inc", dict(ctx="i64", target="*i32", pe=I32), dict(FN="atomic_inc_i32")),
    ("k_cas", dict(ctx="i64", target=I64, cond="i64", value="i64", pe=I32, outs=I64), dict(FN="atomic_compare_swap_i64")),
    ("k_fetch", dict(ctx="i64", target="*i32", pe=I32, out="*i32"), dict(FN="atomic_fetch_u32")),
    ("k_ordered_p", dict(ctx="i64", data="*i32", flag="*i32", vals="*i32", n=I32, pe=I32), dict(ORDER="fence_warp")),
    ("k_await_flag", dict(ctx="i64", data="*i32", flag="*i32", out="*i32", n=I32), dict(BLOCK=256)),
    ("k_barrier", dict(ctx="i64", slots="*i32", out="*i32", rounds=I32), dict(BARRIER="barrier", NT=128)),
    ("k_barrier_put", dict(ctx="i64", slots="*i32", stage="*i32", out="*i32", rounds=I32),
     dict(BARRIER="barrier_warp", NT=128)),
    ("k_coll_barrier_grid", dict(ctx="i64", slots="*i32", out="*i32", rounds=I32), dict(NT=128)),
    ("k_coll", dict(ctx="i64", dest=F32, src=F32, count="i64"),
     dict(FN="all_reduce_ex_block", DT=0, OP=0, KIND=1, ALGO=3)),
    ("k_coll_grid", dict(ctx="i64", dest="*i32", src="*i32", count="i64"),
     dict(FN="broadcast_grid", DT=4, OP=1, KIND=3, ALGO=0)),
    ("k_all_to_allv", dict(ctx="i64", dest=F32, src=F32, sc=I64, sd=I64, rc=I64, rd=I64),
     dict(FN="all_to_allv_grid", DT=0, GRID=True)),
]


def _fake_torch():
    class Anything(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything(name)

        def __call__(self, *a, **k):
            return Anything("call")
    torch = Anything("torch")
    torch.distributed = Anything("torch.distributed")
    return torch


def _compile(job):
    where, modname, kernel, sig, constexprs, options, arch = job[:7]
    # optional: (arguments specialised as multiples of 16, as Triton does at
    # run time for such values; PTX strings that must appear; that must not)
    divisible, want, banned = job[7] if len(job) > 7 else ((), (), ())
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, where)
    if modname != "gpu_kernels":
        try:
            import torch  # noqa: F401
        except ImportError:
            fake = _fake_torch()
            sys.modules["torch"] = fake
            sys.modules["torch.distributed"] = fake.distributed
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget

    import symm.triton as st
    mod = importlib.import_module(modname)
    cx = {k: (getattr(st, v) if isinstance(v, str) else v) for k, v in constexprs.items()}
    attrs = {(list(sig).index(a),): [["tt.divisibility", 16]] for a in divisible}
    sig = dict(sig)
    sig.update({k: "constexpr" for k in cx})
    try:
        src = triton.compiler.ASTSource(fn=getattr(mod, kernel), signature=sig, constexprs=cx, attrs=attrs)
        opts = dict(options, extern_libs=st.extern_libs(arch))
        k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
        if not k.asm.get("cubin"):
            return "no cubin"
        ptx = k.asm["ptx"]
        missing = [w for w in want if w not in ptx] + ["(banned) " + b for b in banned if b in ptx]
        return "PTX: %s" % missing if missing else None
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, str(e)[-3000:])


def _jobs():
    jobs = []
    for mod, kern, sig, cx, opts in SPECS:
        for arch in (90, 80):
            jobs.append(pytest.param((EXAMPLES, mod, kern, sig, cx, opts, arch),
                                     id="sm%d-%s-%s" % (arch, mod, kern)))
    # The all-reduce example pads its buffers so that every bound is a
    # multiple of 16 elements; specialised that way, its peer loads and
    # stores must be 16-byte vectors, not 2-byte ones.
    mod, kern, sig, cx, opts = [s for s in SPECS if s[0] == "all_reduce"][0]
    jobs.append(pytest.param((EXAMPLES, mod, kern, sig, cx, opts, 90,
                              (("out", "x", "n", "shard"), ("ld.global.v4", "st.global.v4"),
                               ("ld.global.b16", "st.global.b16"))),
                             id="sm90-all_reduce-vectorised"))
    # The fused GEMMs wait inline: a function call anywhere in a kernel makes
    # ptxas serialise every wgmma of it (C7510), and symm's waits make one.
    for mod, kern, sig, cx, opts in SPECS:
        if kern in ("ag_gemm_kernel", "gemm_rs_kernel", "gemm_rs_ce_kernel"):
            jobs.append(pytest.param((EXAMPLES, mod, kern, sig, cx, opts, 90, ((), ("wgmma",), ("\tcall",))),
                                     id="sm90-%s-no-call" % kern))
    for i, (kern, sig, cx) in enumerate(GPU_SPECS):
        jobs.append(pytest.param((HERE, "gpu_kernels", kern, sig, cx, {}, 90),
                                 id="sm90-gpu_kernels-%s-%d" % (kern, i)))
    return jobs


JOBS = _jobs()


def _key(job):
    return (job[1], job[2], repr(sorted(job[4].items())), job[6], repr(job[7:]))
_results = {}


def results():
    if not _results:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="symm-ex-aot-")
        ctx = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(max(1, min(4, os.cpu_count() or 1)), mp_context=ctx) as pool:
            jobs = [j.values[0] for j in JOBS]
            for job, err in zip(jobs, pool.map(_compile, jobs)):
                _results[_key(job)] = err
    return _results


@pytest.mark.parametrize("job", JOBS)
def test_kernel_compiles(job):
    err = results()[_key(job)]
    assert err is None, "%s.%s does not compile for sm_%d:\n%s" % (job[1], job[2], job[6], err)
