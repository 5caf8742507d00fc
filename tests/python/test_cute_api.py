"""symm.cute covers exactly the device API of the headers, checks its
arguments when a kernel is compiled, and its host side (compile helper,
Kernel, AOT manifest, symm.cubin) works without a GPU.

- The generated declarations are up to date with the headers, and the check
  fails when one of them is stale.
- Every declared function has a raw wrapper with the C parameters in order;
  the constants mirror the C enums.
- Without CuTe DSL, `import symm.cute` raises an ImportError that says what
  to install; symm.cubin imports without it.
- Wrong element types, pointers without a count, non-contiguous views are
  errors at compile time that name the call.
- The JIT path (Kernel.compile, symm.cute.compile on tensors) compiles for
  sm_90a here; the AOT path writes a cubin and a manifest that symm.cubin
  reads and packs arguments for.
- The examples' and GPU check's kernels all compile ahead of time.
"""
import inspect
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import (INCLUDE_DIR, PYTHON_DIR, REPO, check_generator_catches_stale,  # noqa: E402
                           optional_import, run_python)

sys.path.insert(0, PYTHON_DIR)
sys.path.insert(0, os.path.join(REPO, "tests", "bitcode"))
import check_bitcode  # noqa: E402

CC = os.environ.get("CC", "cc")

HAVE_CUTE = optional_import("cutlass.cute") is not None

needs_cute = pytest.mark.skipif(not HAVE_CUTE, reason="CuTe DSL not installed "
                                "(pip install 'nvidia-cutlass-dsl[cu13]==4.8.1')")


def test_generated_files_are_fresh():
    r = subprocess.run([sys.executable, os.path.join(PYTHON_DIR, "tools", "gen_cute_api.py"),
                        "--check", "--cc", CC], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


GENERATED = ('_device_api.py', 'cute/raw.py')


@pytest.mark.parametrize("stale", (None,) + GENERATED)
def test_check_fails_on_a_stale_file(tmp_path, stale):
    check_generator_catches_stale(tmp_path, "gen_cute_api.py", GENERATED, stale, CC)


@needs_cute
def test_every_device_function_is_declared():
    import symm.cute as sc
    decls = check_bitcode.header_declarations(check_bitcode.preprocess_header(CC, INCLUDE_DIR))
    names = {n[len("symm_"):] for n in decls}
    assert set(sc.SCOPES) == names and set(sc.raw.__all__) == names
    for cname, d in decls.items():
        name = cname[len("symm_"):]
        assert list(inspect.signature(getattr(sc.raw, name)).parameters) == d.names, name
        assert callable(getattr(sc, name)), name  # reachable from the top level too
    assert sc.SCOPES["put_signal_block_nbi"] == "block" and sc.SCOPES["put_warp"] == "warp"
    assert sc.SCOPES["all_reduce_grid"] == "grid" and sc.SCOPES["p_f32"] == "thread"


@needs_cute
def test_constants_mirror_the_enums():
    import symm.cute as sc
    src = open(os.path.join(INCLUDE_DIR, "symm", "symm_types.h")).read() + \
        open(os.path.join(INCLUDE_DIR, "symm", "symm_coll_types.h")).read()
    for short, cname in (("CMP_GE", "SYMM_CMP_GE"), ("SIGNAL_ADD", "SYMM_SIGNAL_ADD"),
                         ("SEM_RELEASE", "SYMM_SEM_RELEASE"), ("SCOPE_SYS", "SYMM_SCOPE_SYS"),
                         ("DTYPE_BF16", "SYMM_DTYPE_BF16"), ("OP_BXOR", "SYMM_OP_BXOR"),
                         ("ALGO_TWOSHOT", "SYMM_COLL_ALGO_TWOSHOT"),
                         ("DTYPE_DEFAULT", "SYMM_DTYPE_DEFAULT")):
        value = int(re.search(r"\b%s\s*=\s*(-?\d+)" % cname, src).group(1))
        assert getattr(sc, short) == value, short


def test_import_without_cute_says_what_to_install():
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "cutlass" or name.startswith("cutlass."):
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, Block())
import symm.cubin  # the AOT launcher needs no CuTe DSL
try:
    import symm.cute
except ImportError as e:
    print("IMPORTERROR", e)
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "IMPORTERROR" in r.stdout and "pip install 'symm[cute]'" in r.stdout, r.stdout
    assert "nvidia-cutlass-dsl" in r.stdout


def _compile_kernel(body, params="ctx: cutlass.Int64, buf: cutlass.Int64, n: cutlass.Int32"):
    """Compile a one-kernel launcher whose kernel body is `body` (source)."""
    import symm.cute as sc
    src = ("@cute.kernel\ndef k(%s):\n%s\n\n@cute.jit\ndef launch(%s):\n    k(%s).launch("
           "grid=[1, 1, 1], block=[32, 1, 1])\n") % (
        params, "\n".join("    " + x for x in body), params,
        ", ".join(p.split(":")[0] for p in params.split(",")))
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("import cutlass\nimport cutlass.cute as cute\nimport symm.cute as sc\n\n" + src)
    import importlib.util
    spec = importlib.util.spec_from_file_location("cute_api_k", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return sc.compile(mod.launch, 0, 0, 0, arch=90)


def _error_chain(excinfo):
    out, e = [], excinfo.value
    while e is not None:
        out.append(str(e))
        e = e.__cause__ or e.__context__
    return "\n".join(out)


VIEWS = ["d = cute.make_tensor(cute.make_ptr(cutlass.Float32, buf, cute.AddressSpace.gmem, "
         "assumed_align=16), cute.make_layout(n))",
         "i = cute.make_tensor(cute.make_ptr(cutlass.Int32, buf + 4096, cute.AddressSpace.gmem, "
         "assumed_align=16), cute.make_layout(n))"]


@needs_cute
@pytest.mark.parametrize("stmt,message", [
    ("sc.put_block(ctx, d, i, 0)", "symm.cute.put_block: dst and src element types differ "
                                   "(Float32 and Int32)"),
    ("sc.get_nbi(ctx, d.iterator, d.iterator, 0)", "pass nelems= when dst or src is a pointer"),
    ("sc.atomic_add(ctx, d, cutlass.Float32(1), 0)", "symm.cute.atomic_add: element type Float32"),
    ("sc.put_signal(ctx, d, d, i, 1, sc.SIGNAL_SET, 0)", "the signal word must be 64-bit"),
    ("sc.put(ctx, cute.make_tensor(d.iterator, cute.make_layout(8, stride=2)), d, 0)",
     "which is not contiguous"),
    ("sc.p(ctx, buf, 1, 0)", "with an integer address use symm.cute.raw.p"),
])
def test_view_calls_reject_wrong_arguments_at_compile_time(stmt, message):
    with pytest.raises(Exception) as info:
        _compile_kernel(VIEWS + [stmt])
    assert message in _error_chain(info), _error_chain(info)[-2000:]


@needs_cute
def test_jit_path_compiles_tensor_kernels_for_sm90():
    """What a user with a GPU does, compiled here: a @cute.jit launcher taking
    CuTe tensors (fake ones: no data needed) and the Kernel's JIT form."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    import symm.cute as sc

    @cute.kernel
    def shift(ctx: cutlass.Int64, dst: cute.Tensor, src: cute.Tensor, sig: cute.Tensor):
        me, n = sc.my_pe(ctx), sc.n_pes(ctx)
        sc.put_signal_block(ctx, dst, src, sig, 1, sc.SIGNAL_ADD, (me + 1) % n)
        sc.signal_wait_until(ctx, sig, sc.CMP_GE, 1)

    @cute.jit
    def launch(ctx: cutlass.Int64, dst: cute.Tensor, src: cute.Tensor, sig: cute.Tensor):
        shift(ctx, dst, src, sig).launch(grid=[1, 1, 1], block=[128, 1, 1])

    x = make_fake_compact_tensor(cutlass.Float32, (cute.sym_int(),), assumed_align=16)
    s = make_fake_compact_tensor(cutlass.Uint64, (1,), assumed_align=8)
    fn = sc.compile(launch, cutlass.Int64(0), x, x, s, arch=90,
                    options="--keep-ptx --dump-dir %s" % _tmpdir())
    assert "red.release.sys.global.add.u64" in fn.__ptx__
    assert ".target sm_90a" in fn.__ptx__

    sys.path.insert(0, os.path.join(REPO, "examples", "cute"))
    from symm.cute.aot import _load_source, kernels_of
    mod = _load_source(os.path.join(REPO, "examples", "cute", "kernels.py"))
    k = {k.name: k for k in kernels_of(mod)}["ring_put"]
    run = k.compile(arch=90)
    assert run.kernel is k and callable(run)
    with pytest.raises(TypeError, match="ring_put takes 6 arguments"):
        run(0, 0, grid=1)


def _tmpdir():
    import tempfile
    return tempfile.mkdtemp(prefix="symm-cute-api-")


@needs_cute
def test_aot_manifest_and_cubin_launcher(tmp_path):
    """Kernel.aot writes a cubin and an entry whose parameters match the
    cubin's entry point; symm.cubin reads it and packs arguments (no GPU:
    nothing is launched)."""
    import cutlass
    import cutlass.cute as cute

    import symm.cubin
    import symm.cute as sc
    from symm.cute._kernel import ptx_entry_params

    @cute.kernel
    def fill(ctx: cutlass.Int64, x: cute.Pointer, v: cutlass.Float32, n: cutlass.Int32):
        t = cute.make_tensor(x, cute.make_layout(n))
        tid, _, _ = cute.arch.thread_idx()
        t[tid] = v + cutlass.Float32(sc.my_pe(ctx))

    k = sc.Kernel(fill, [("ctx", cutlass.Int64), ("x", sc.Ptr(cutlass.Float32)),
                         ("v", cutlass.Float32), ("n", cutlass.Int32)], block=64)
    entry = k.aot(str(tmp_path), arch=90, keep_ptx=True)
    symm.cubin.write_manifest(str(tmp_path), {k.name: entry})
    assert (tmp_path / "fill.cubin").stat().st_size > 0
    ptx = (tmp_path / "fill.ptx").read_text()
    assert ptx_entry_params(ptx)[entry["entry"]] == [8, 8, 4, 4]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    # a pointer records its dtype (torch's name) and alignment, which symm.cubin checks
    assert manifest["fill"]["params"] == [["ctx", "i64"], ["x", "ptr", "float32", None, 16], ["v", "f32"],
                                          ["n", "i32"]]
    lib = symm.cubin.load(str(tmp_path))
    vals = lib["fill"].pack([5, 0x1000, 1.5, 7], {})
    assert [v.value for v in vals] == [5, 0x1000, 1.5, 7]
    with pytest.raises(ValueError, match="x \\(0x1004\\) is not 16-byte aligned"):
        lib["fill"].pack([5, 0x1004, 1.5, 7], {})
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="fill: x must be float32, got torch.int32"):
        lib["fill"].pack([5, torch.zeros(4, dtype=torch.int32), 1.5, 7], {})
    with pytest.raises(TypeError, match="missing x, v, n"):
        lib["fill"].pack([1], {})
    with pytest.raises(TypeError, match="cutlass.Int32/Uint32/Int64/Uint64/Float32"):
        sc.Kernel(fill, [("ctx", int)], block=64)
    with pytest.raises(ValueError, match="power of two"):
        sc.Ptr(cutlass.Float32, 12)


@needs_cute
def test_examples_and_gpu_check_kernels_compile(tmp_path):
    """Every kernel examples/cute/build_cubins.py builds (the examples and the
    GPU check) compiles for sm_90a, and the cubins fit in a few MiB."""
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "cute", "build_cubins.py"),
                        "-o", str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {"ring_put", "ring_get", "ag_push", "ag_device", "ar_oneshot", "ar_device", "ar_multimem",
            "rs_oneshot", "rs_device", "hgemm", "ag_hgemm", "rs_hgemm", "t_pg",
            "t_bulk", "t_put_signal", "t_words", "t_amo", "t_sync", "t_coll",
            "t_coll_grid"} <= set(manifest)
    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    assert size < 8 << 20, size
    # the CUDA C twins (c_twins.cu, nvcc with warnings as errors) take the arguments and block
    # of the CuTe kernel they stand beside: the drivers launch both with one argument list
    twins = sorted(n for n in manifest if n.startswith("c_"))
    assert twins == sorted("c_" + n for n in ("ag_push", "ag_device", "ar_oneshot", "ar_twoshot",
                                              "rs_oneshot", "ar_device", "rs_device")), twins
    cubin = (tmp_path / "c_twins.cubin").read_bytes()
    for t in twins:
        cute_entry, c_entry = manifest[t[2:]], manifest[t]
        assert [p[:2] for p in c_entry["params"]] == [p[:2] for p in cute_entry["params"]], t
        assert c_entry["block"] == cute_entry["block"] and c_entry["cubin"] == "c_twins.cubin", t
        assert t.encode() + b"\0" in cubin, "no entry %s in c_twins.cubin" % t


@needs_cute
def test_hopper_gemm_kernels_use_tma_wgmma_and_a_pipeline(tmp_path):
    """examples/cute/hopper_gemm.py: the GEMM alone and its all-gather and
    reduce-scatter forms compile for sm_90a into TMA loads (2-D bulk tensor
    copies completing on mbarriers), m64n256k16 wgmma, warpgroup register
    reallocation and 16-byte epilogue stores; the all-gather form acquires
    each chunk's flag and fences the async proxy before its TMA loads, the
    reduce-scatter form releases each pushed tile's flag and acquires the
    peers'; the copy-engine form counts each locally stored tile with a
    release add, acquires the peers' flags (an inline wait with the
    context's deadline: no function call) and prefetches their partials
    into L2. Their Tma operands reach the manifest with box and swizzle."""
    sys.path.insert(0, os.path.join(REPO, "examples", "cute"))
    from symm.cute.aot import _load_source, kernels_of
    mod = _load_source(os.path.join(REPO, "examples", "cute", "hopper_gemm.py"))
    k = {k.name: k for k in kernels_of(mod)}
    assert set(k) == {"hgemm", "ag_hgemm", "rs_hgemm", "rs_hgemm_ce", "wait_report"}
    report = k.pop("wait_report").aot(str(tmp_path), arch=90, keep_ptx=True)
    assert report["block"] == [32, 1, 1]
    for name in k:
        entry = k[name].aot(str(tmp_path), arch=90, keep_ptx=True)
        ptx = (tmp_path / (name + ".ptx")).read_text()
        for op in ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "cp.async.bulk.tensor.2d",
                   "mbarrier::complete_tx", "mbarrier.try_wait", r"setmaxnreg.dec.sync.aligned.u32\s+40;",
                   r"setmaxnreg.inc.sync.aligned.u32\s+232;", "st.global.v4", r"\.reqntid 384"):
            assert re.search(op, ptx), (name, op)
        tma = [p for p in entry["params"] if p[1] == "tma"]
        assert tma and all(p[4]["swizzle"] == 128 and p[4]["box_cols"] == 64 and p[2] == "bfloat16" for p in tma)
        assert entry["block"] == [384, 1, 1] and entry["smem"] == mod.SMEM and mod.SMEM <= 227 * 1024
        if name == "ag_hgemm":
            assert "ld.acquire.sys" in ptx and "fence.proxy.async.global" in ptx and "globaltimer" in ptx
            assert not re.search(r"\bcall(\.uni)?\b", ptx), "ag_hgemm calls a function"
        if name == "rs_hgemm":
            assert "st.release.sys" in ptx and "ld.acquire.sys" in ptx and "ld.global.v4" in ptx
        if name == "rs_hgemm_ce":
            assert "red.release.sys.global.add.u64" in ptx and "ld.acquire.sys" in ptx and "ld.global.v4" in ptx
            assert "prefetch.global.L2" in ptx and "globaltimer" in ptx
            # no function call: ptxas would serialise every wgmma of the kernel (C7510)
            assert not re.search(r"\bcall(\.uni)?\b", ptx), "rs_hgemm_ce calls a function"
        if name == "hgemm":
            assert [p[4]["box_rows"] for p in tma] == [mod.BM, mod.BN]


@needs_cute
def test_tma_kernel_compiles_just_in_time_and_checks_its_operands():
    """A Kernel with Tma operands compiles through the JIT path too (CuTe
    DSL's launcher encodes the descriptors there); a wrong operand is a
    clear error before anything is launched."""
    import torch

    sys.path.insert(0, os.path.join(REPO, "examples", "cute"))
    from symm.cute.aot import _load_source, kernels_of
    mod = _load_source(os.path.join(REPO, "examples", "cute", "hopper_gemm.py"))
    run = {k.name: k for k in kernels_of(mod)}["hgemm"].compile(arch=90)
    c = torch.empty((256, 256), dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="a must be torch.bfloat16"):
        run(torch.empty((128, 64), dtype=torch.float16), c, c, 128, 256, 64, grid=1)
    with pytest.raises(TypeError, match="a must be a 2-D tensor"):
        run(torch.empty((128,), dtype=torch.bfloat16), c, c, 128, 256, 64, grid=1)
    with pytest.raises(ValueError, match="contiguous rows"):
        run(torch.empty((64, 128), dtype=torch.bfloat16).t(), c, c, 128, 256, 64, grid=1)


class _FakeDriver:
    """Stands in for libcuda in symm.cubin: records calls, returns success."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            return 0
        return call


class _FakeCudaTensor:
    """A CPU tensor that says it lives on a GPU at `ptr` (symm.cubin reads
    data_ptr, shape, strides, dtype and device only)."""

    def __init__(self, t, ptr):
        self.t, self.ptr = t, ptr

    def __getattr__(self, name):
        return getattr(self.t, name)

    def data_ptr(self):
        return self.ptr

    @property
    def device(self):
        import torch
        return torch.device("cuda", 0)


def test_cubin_encodes_tma_descriptors(tmp_path, monkeypatch):
    """A "tma" parameter of a manifest is packed as the 128-byte descriptor
    cuTensorMapEncodeTiled gives for the tensor (dims and box innermost
    first, byte row stride, 128-byte swizzle), then its (rows, cols); the
    descriptor is encoded once per tensor; operands TMA cannot address are
    refused with the parameter's name. No GPU: the driver is a stand-in."""
    import ctypes

    import torch

    import symm.cubin as cubin
    fake = _FakeDriver()
    monkeypatch.setattr(cubin, "_driver", fake)
    extra = {"box_rows": 128, "box_cols": 64, "swizzle": 128, "dtype": "bfloat16"}
    entry = {"cubin": "k.cubin", "entry": "k", "params": [["a", "tma", "bfloat16", None, extra], ["n", "i32"]],
             "block": [384, 1, 1], "smem": 1024}
    cubin.write_manifest(str(tmp_path), {"k": entry})
    k = cubin.load(str(tmp_path))["k"]
    a = _FakeCudaTensor(torch.empty((4096, 1024), dtype=torch.bfloat16), 0x7F0000000000)
    vals = k.pack([a, 7], {})
    assert [ctypes.sizeof(v) for v in vals] == [128, 8, 4] and list(vals[1]) == [4096, 1024] and vals[2].value == 7
    assert ctypes.addressof(vals[0]) % 64 == 0
    (name, args), = fake.calls
    assert name == "cuTensorMapEncodeTiled" and args[0].value == ctypes.addressof(vals[0])
    assert args[1:3] == (9, 2) and args[3].value == 0x7F0000000000       # bf16, rank 2
    assert list(args[4]) == [1024, 4096] and list(args[5]) == [2048]     # dims innermost first, row bytes
    assert list(args[6]) == [64, 128] and list(args[7]) == [1, 1] and args[8:] == (0, 3, 3, 0)
    k.pack([a, 8], {})
    assert len(fake.calls) == 1                                           # encoded once per tensor
    with pytest.raises(ValueError, match="k: a: tma: the tensor must start 16-byte aligned"):
        k.pack([_FakeCudaTensor(torch.empty((64, 64), dtype=torch.bfloat16), 0x7F0000000008), 1], {})
    with pytest.raises(TypeError, match="a must be bfloat16"):
        k.pack([_FakeCudaTensor(torch.empty((64, 64), dtype=torch.float16), 0x7F0000000000), 1], {})
    with pytest.raises(TypeError, match="a must be a 2-D tensor"):
        k.pack([0x7F0000000000, 1], {})
    with pytest.raises(ValueError, match="contiguous rows"):
        k.pack([_FakeCudaTensor(torch.empty((64, 64), dtype=torch.bfloat16).t(), 0x7F0000000000), 1], {})
    bad = dict(entry, params=[["a", "tma", "bfloat16", None, {"box_rows": 128}]])
    with pytest.raises(ValueError, match="tma parameter a needs box_rows, box_cols and dtype"):
        cubin.Kernel("bad", bad, str(tmp_path))


def test_copy_list_issues_one_async_copy_each(monkeypatch):
    """symm.cubin.CopyList: one cuMemcpyAsync per (dst, src, bytes), in order,
    on the given stream; malformed copies are refused when it is made."""
    import symm.cubin as cubin
    fake = _FakeDriver()
    monkeypatch.setattr(cubin, "_driver", fake)
    ce = cubin.CopyList([(0x1000, 0x2000, 64), (0x3000, 0x4000, 8)])
    ce(0x5000)
    assert len(ce) == 2
    got = [(n, a[0].value, a[1].value, a[2].value, a[3].value) for n, a in fake.calls]
    assert got == [("cuMemcpyAsync", 0x1000, 0x2000, 64, 0x5000), ("cuMemcpyAsync", 0x3000, 0x4000, 8, 0x5000)]
    for bad in ([(0x1000, 0x2000, 0)], [(0x1000, 0x2000)], [(0x1000, None, 8)]):
        with pytest.raises((ValueError, TypeError)):
            cubin.CopyList(bad)


def test_copy_list_replay_records_once_and_launches(monkeypatch):
    """CopyList(replay=True): the first call outside capture records the
    copies in order on a private stream into a graph (every driver object
    released), each call launches it; inside a capture the copies are
    issued one by one on the capturing stream."""
    import symm.cubin as cubin

    class Driver(_FakeDriver):
        capturing = 0

        def cuStreamIsCapturing(self, h, status):
            status._obj.value = self.capturing
            return 0

        def cuStreamCreate(self, s, flags):
            s._obj.value = 0x77
            self.calls.append(("cuStreamCreate", flags))
            return 0

        def cuGraphInstantiateWithFlags(self, ex, g, flags):
            ex._obj.value = 0x99
            self.calls.append(("cuGraphInstantiateWithFlags",))
            return 0

    fake = Driver()
    monkeypatch.setattr(cubin, "_driver", fake)
    ce = cubin.CopyList([(0x1000, 0x2000, 64), (0x3000, 0x4000, 8)], replay=True)
    ce(0x5000)
    names = [c[0] for c in fake.calls]
    assert names == ["cuStreamCreate", "cuStreamBeginCapture_v2", "cuMemcpyAsync", "cuMemcpyAsync",
                     "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphDestroy",
                     "cuStreamDestroy_v2", "cuGraphLaunch"]
    copies = [c[1] for c in fake.calls if c[0] == "cuMemcpyAsync"]
    assert [(a[0].value, a[3].value) for a in copies] == [(0x1000, 0x77), (0x3000, 0x77)]
    launch = fake.calls[-1][1]
    assert (launch[0].value, launch[1].value) == (0x99, 0x5000)
    fake.calls.clear()
    ce(0x5000)
    assert [c[0] for c in fake.calls] == ["cuGraphLaunch"]
    fake.calls.clear()
    fake.capturing = 1
    ce(0x6000)
    assert [(c[0], c[1][3].value) for c in fake.calls] == [("cuMemcpyAsync", 0x6000)] * 2
    fake.calls.clear()
    ce.close()
    ce.close()
    assert [c[0] for c in fake.calls] == ["cuGraphExecDestroy"]


@needs_cute
def test_example_collectives_move_16_byte_vectors(tmp_path):
    """The CuTe collectives of examples/cute/kernels.py load and store
    16-byte vectors (ld/st.global.v4, UNITS loads of a peer issued back to
    back), and their handshakes and waits acquire."""
    sys.path.insert(0, os.path.join(REPO, "examples", "cute"))
    from symm.cute.aot import _load_source, kernels_of
    mod = _load_source(os.path.join(REPO, "examples", "cute", "kernels.py"))
    k = {k.name: k for k in kernels_of(mod)}
    for name in ("ar_oneshot", "ar_twoshot", "rs_oneshot", "ag_push"):
        k[name].aot(str(tmp_path), arch=90, keep_ptx=True)
        ptx = (tmp_path / (name + ".ptx")).read_text()
        assert "st.global.v4" in ptx, name
        assert "ld.acquire.sys.global" in ptx, name
        if name != "ag_push":  # ag_push's loads are put_signal_block's (generic local side)
            lines = [ln.split()[0] for ln in ptx.splitlines() if ln.strip()]
            runs = "".join("v" if op.startswith("ld.global.v4") else "." for op in lines)
            assert "v" * mod.UNITS in runs, name


# ---- scale-out backends ------------------------------------------------------

def _backend_kernel():
    """A Kernel calling put_block, put_signal, signal_wait_until and barrier:
    the calls whose remote paths differ per backend."""
    import cutlass
    import cutlass.cute as cute

    import symm.cute as sc

    @cute.kernel
    def be_calls(ctx: cutlass.Int64, dst: cute.Pointer, src: cute.Pointer, sig: cute.Pointer,
                 pe: cutlass.Int32):
        sc.raw.put_block(ctx, dst, src, 1024, pe)
        sc.raw.put_signal(ctx, dst, src, 8, sig, 1, sc.SIGNAL_ADD, pe)
        sc.raw.signal_wait_until(ctx, sig, sc.CMP_GE, 1)
        sc.raw.barrier(ctx)

    return sc.Kernel(be_calls, [("ctx", cutlass.Int64), ("dst", sc.Ptr(cutlass.Uint8)),
                                ("src", sc.Ptr(cutlass.Uint8)), ("sig", sc.Ptr(cutlass.Uint64, 8)),
                                ("pe", cutlass.Int32)], block=128)


def _unresolved_symm_calls(ptx):
    """Calls to symm_* functions that the PTX does not define."""
    defined = set(re.findall(r"^(?:\.visible\s+|\.weak\s+)?\.func\s+(?:\([^)]*\)\s*)?(\w+)\s*\([^)]*\)\s*\{",
                             ptx, re.M | re.S))
    called = set(re.findall(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx))
    return {c for c in called if c.startswith("symm_") and c not in defined}


@needs_cute
def test_nccl_backend_aot_links_nccls_device_code(tmp_path):
    """backend="nccl" links libsymm_device_nccl_sm90.bc (NCCL's device API
    inside it): every symm call resolves, the PTX has GIN's write-through
    proxy-queue store, and the manifest entry records the backend."""
    entry = _backend_kernel().aot(str(tmp_path), arch=90, keep_ptx=True, backend="nccl")
    ptx = (tmp_path / "be_calls.ptx").read_text()
    assert entry["backend"] == "nccl"
    assert (tmp_path / "be_calls.cubin").stat().st_size > 0
    assert not _unresolved_symm_calls(ptx), _unresolved_symm_calls(ptx)
    assert "st.global.wt.v4.u32" in ptx            # GIN's proxy queue (only in the nccl file)
    assert "nvshmemi_device_state" not in ptx


@needs_cute
def test_nvshmem_backend_links_nvshmems_bitcode_or_says_why_not(tmp_path):
    """backend="nvshmem" links NVSHMEM's per-architecture device bitcode next
    to symm's: the PTX holds NVSHMEM's device state. Where NVSHMEM has only
    the generic libnvshmem_device.bc (3.4), which libNVVM rejects, the
    compile stops first with an error that says so."""
    from symm.cute import _bitcode
    try:
        nvbc = _bitcode.nvshmem_device_bitcode(90)
    except Exception as e:  # noqa: BLE001 - checked just below
        nvbc = None
        with pytest.raises(type(e), match="libnvshmem_device|NVSHMEM"):
            _backend_kernel().aot(str(tmp_path), arch=90, backend="nvshmem")
        if "generic libnvshmem_device.bc" in str(e):
            assert "section markers" in str(e) and "libnvshmem_device_sm_90.bc" in str(e), str(e)
    if nvbc is not None:
        entry = _backend_kernel().aot(str(tmp_path), arch=90, keep_ptx=True, backend="nvshmem")
        ptx = (tmp_path / "be_calls.ptx").read_text()
        assert entry["backend"] == "nvshmem"
        assert not _unresolved_symm_calls(ptx), _unresolved_symm_calls(ptx)
        assert "nvshmemi_device_state" in ptx


@needs_cute
def test_backend_names_are_checked_before_compiling():
    import symm.cute as sc
    from symm.cute import aot

    from symm import _backends

    k = _backend_kernel()
    known = ", ".join(_backends.COMPILE_TARGETS)
    with pytest.raises(ValueError, match="backend 'mpi': expected one of %s" % known):
        k.compile(arch=90, backend="mpi")
    with pytest.raises(ValueError, match="backend 'gin'"):
        with sc.target(90, backend="gin"):
            pass
    with pytest.raises(SystemExit):
        aot.main(["--backend", "mpi", "-o", _tmpdir(), os.path.join(REPO, "examples", "cute", "kernels.py")])


def test_cubin_refuses_a_manifest_of_another_backend():
    """symm.cubin checks an entry's backend against the running one before
    loading it (no GPU: the check itself); no field means native."""
    import symm.cubin as cubin
    cubin.check_backend("k", {"backend": "nccl"}, "nccl")
    cubin.check_backend("k", {}, "native")
    cubin.check_backend("k", {}, None)                  # before init: native
    with pytest.raises(RuntimeError, match="k was built for the nccl backend, but symm runs nvshmem: "
                                           "rebuild it with --backend nvshmem"):
        cubin.check_backend("k", {"backend": "nccl"}, "nvshmem")
    with pytest.raises(RuntimeError, match="built for the native backend, but symm runs nccl"):
        cubin.check_backend("k", {}, "nccl")             # a TileLang manifest without the field
    with pytest.raises(ValueError, match="backend 'mpi' is not one of"):
        cubin.check_backend("k", {"backend": "mpi"}, "native")


def test_gemm_rows_carry_the_bars():
    """The GEMM examples' rows: fused, GEMM alone, torch + NCCL per mode,
    with the ratios and the bars' verdict; no torch + NCCL says why (PEs
    sharing a GPU get the reason without a process group being made)."""
    sys.path.insert(0, os.path.join(REPO, "examples", "cute"))
    import _common as C

    class Shared:
        shared, _nccl = True, None
    assert C.nccl_group(Shared()) == (None, "PEs share a GPU")
    fused, alone = {"graph": 100.0, "stream": 120.0}, {"graph": 95.0, "stream": 100.0}
    rows = C.overlap_rows("ag_gemm square", (256, 128, 64), True, fused, alone, {"graph": 130.0, "stream": 130.0})
    assert [r[3] for r in rows] == ["graph", "stream"] and rows[0][:3] == ("ag_gemm square", "256x128x64", "ok")
    assert rows[0][4:9] == ("100.0", "95.0", "1.05", "130.0", "1.30") and rows[0][9] == "pass"
    assert rows[1][6] == "1.20" and rows[1][9] == "miss: fused/GEMM 1.20 > 1.10; speedup 1.08 < 1.25"
    rows = C.overlap_rows("gemm_rs small", (256, 128, 64), False, fused, alone, "n/a: PEs share a GPU")
    assert rows[0][7] == "n/a: PEs share a GPU" and rows[0][8] == "-" and rows[0][9] == "WRONG"
    assert len(rows[0]) == len(C.OVERLAP_HEADER)
