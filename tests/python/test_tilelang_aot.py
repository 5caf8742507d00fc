"""symm.tilelang without a GPU: every primitive in a kernel lowered for sm_90
(examples/tilelang/primitives.py), the generated CUDA compiled by nvcc with
warnings as errors, the memory operations each primitive promises present in
the PTX, every device function of the headers reached, no module-scope state;
the just-in-time path (tilelang.compile, which runs nvcc without a GPU); the
ImportError without TileLang; symm.cubin's argument packing; a kernel
compiled for the nccl backend (NCCL's device headers inlined) and device-linked
for the nvshmem backend (NVSHMEM's device state in the cubin)."""
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, REPO, in_ci  # noqa: E402

EXAMPLES = os.path.join(REPO, "examples", "tilelang")


def _need_tilelang():
    try:
        import tilelang  # noqa: F401
    except ImportError:
        if in_ci():
            raise
        pytest.skip("tilelang not installed (pip install 'tilelang==0.1.15')")


# kernel -> PTX that must appear (what the primitive promises)
PTX_WANT = {
    "prim_put_block_nbi": ["st.global", "fence.sc.sys"],          # stores to the peer, quiet
    "prim_get_warp": ["ld.global"],
    "prim_peer_copy": ["st.v4.u32"],                                # T.copy into a peer view
    "prim_sync": ["st.release.sys.global", "ld.acquire.sys.global"],
    "prim_signals": ["st.release.sys.global.u64",                   # signal SET after the data
                     "red.release.sys.global.add.u64",              # signal ADD after the data
                     "ld.acquire.sys.global.b64"],                  # signal waits and fetches
    "prim_packets": ["st.volatile.global.v4.u32", "ld.volatile.global.v4.u32"],  # data and flags in one store
    "prim_remote_st": ["st.relaxed.cta.global", "st.relaxed.gpu.global", "st.relaxed.sys.global",
                       "st.release.cta.global", "st.release.gpu.global", "st.release.sys.global",
                       "st.volatile.global", "ld.relaxed.sys.global", "ld.acquire.cta.global",
                       "ld.acquire.gpu.global", "ld.acquire.sys.global", "ld.volatile.global"],
    "prim_waits": ["ld.acquire.sys.global.b32", "ld.acquire.sys.global.b64"],
    "prim_atomics": ["atom.relaxed.sys.global.add", "atom.relaxed.sys.global.cas",
                     "atom.relaxed.sys.global.exch", "atom.relaxed.sys.global.and",
                     "atom.relaxed.sys.global.or", "atom.relaxed.sys.global.xor",
                     "red.relaxed.sys.global.add", "red.relaxed.sys.global.and",
                     "red.relaxed.sys.global.or", "red.relaxed.sys.global.xor"],
    "prim_fences": ["fence.acq_rel.sys", "fence.sc.sys", "membar.cta", "membar.gl", "membar.sys"],
    "prim_barriers": ["fence.sc.sys", "st.relaxed.sys.global", "ld.acquire.sys.global"],
    "prim_grid_barriers": ["atom.acq_rel.gpu.global.add", "st.release.sys.global", "ld.acquire.sys.global"],
    "prim_coll_all_reduce_block": ["st.release.sys.global", "ld.acquire.sys.global"],
}


def _signature_names():
    spec = importlib.util.spec_from_file_location(
        "sigs", os.path.join(PYTHON_DIR, "symm", "_device_api.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"symm_" + f[0] for f in mod.FUNCTIONS}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """All primitive kernels lowered, in one translation unit, compiled once."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import primitives
    import symm.tilelang as sT
    d = tmp_path_factory.mktemp("tilelang")
    srcs = {name: sT.lower(b(), 90, name=name).source for name, b in primitives.kernels(1, {}).items()}
    cu = os.path.join(d, "all.cu")
    with open(cu, "w") as f:
        f.write("\n".join(srcs.values()))
    cmd = sT.nvcc_command(cu, os.path.join(d, "all.cubin"), 90, "cubin") + ["-keep", "-keep-dir", str(d)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, "nvcc (warnings as errors) failed:\n" + (r.stdout + r.stderr)[-8000:]
    with open(os.path.join(d, "all.ptx")) as f:
        ptx = f.read()
    return srcs, ptx


def _entries(ptx):
    out = {}
    for part in re.split(r"(?=\.visible \.entry )", ptx):
        m = re.match(r"\.visible \.entry (\w+)_kernel\(", part)
        if m:
            out[m.group(1)] = part
    return out


def test_every_primitive_compiles_with_warnings_as_errors(built):
    srcs, ptx = built
    entries = _entries(ptx)
    assert sorted(entries) == sorted(srcs), "kernels missing from the PTX"


@pytest.mark.parametrize("kernel", sorted(PTX_WANT))
def test_ptx_has_the_promised_memory_operations(built, kernel):
    body = _entries(built[1])[kernel]
    missing = [w for w in PTX_WANT[kernel] if w not in body]
    assert not missing, "%s: PTX lacks %s" % (kernel, missing)


def test_every_device_function_is_reached(built):
    called = set()
    for src in built[0].values():
        called |= set(re.findall(r"\b(symm_\w+)\s*\(", src))
    missing = sorted(_signature_names() - called)
    assert not missing, "no symm.tilelang kernel calls " + ", ".join(missing)


def test_local_view_needs_no_lookup(built):
    """peer_tensor(ctx, x, -1, ...) is x itself (no symm_ctx_ptr: valid on every
    backend, SYMM_DEBUG_FORCE_REMOTE included); a view of another PE looks it up."""
    srcs = built[0]
    for name in ("prim_waits", "prim_atomics", "prim_remote_st", "prim_p_g"):
        assert "symm_ctx_ptr(" not in srcs[name], name
    assert "symm_ctx_ptr(" in srcs["prim_peer_copy"]


def test_no_module_state(built):
    """The context is a kernel argument: no __constant__ table, no global
    variable a loader would have to fill (only printf format strings)."""
    ptx = built[1]
    assert not re.search(r"^\s*\.const\s", ptx, re.M)
    for line in re.findall(r"^\s*\.global\s.*$", ptx, re.M):
        assert re.search(r"\$str", line), "module-scope variable: " + line


def test_aot_manifest_and_jit_compile(tmp_path):
    """build(): cubin + manifest.json entry; compile(): TileLang's own nvcc run
    (no GPU needed) with the same header hook and include folders."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import primitives
    import symm.cubin
    import symm.tilelang as sT
    entry = sT.build(primitives.k_sync(), str(tmp_path), "sync")
    assert entry["entry"] == "sync_kernel" and entry["block"] == [128, 1, 1] and entry["backend"] == "native"
    assert [p[1] for p in entry["params"]].count("ptr") == 4
    assert entry["call"] == ["ctx", "data", "recv", "out", "flag", "epoch"]
    assert os.path.getsize(os.path.join(tmp_path, "sync.cubin")) > 0
    # build() wrote manifest.json: the folder loads at once
    assert symm.cubin.read_manifest(str(tmp_path)) == {"sync": entry}
    k = symm.cubin.load(str(tmp_path))["sync"]
    # a folder holds one backend's kernels: refused before anything is compiled
    with pytest.raises(ValueError, match="holds kernels built for native: build nccl kernels into another"):
        sT.build(primitives.k_sync(), str(tmp_path), "sync_nccl", backend="nccl")
    assert sorted(os.listdir(tmp_path)) == ["manifest.json", "sync.cu", "sync.cubin"]
    packed = k.pack((123, 1 << 20, 2 << 20, 3 << 20, 4 << 20, 7), {})
    by_name = {p[0]: v.value for p, v in zip(k.params, packed)}
    assert by_name == {"ctx": 123, "data": 1 << 20, "recv": 2 << 20, "out": 3 << 20, "flag": 4 << 20, "epoch": 7}
    with pytest.raises(TypeError, match="missing"):
        k.pack((1, 2), {})
    with pytest.raises(TypeError, match="no parameter"):
        k.pack((), {"bogus": 1})
    jit = sT.compile(primitives.k_sync(), target=90, execution_backend="tvm_ffi")
    src = jit.get_kernel_source()
    assert '#include "symm_tilelang.h"' in src and "symm_wait_until_i32" in src


def test_wrong_arguments_fail_early():
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    import tilelang.language as T
    import symm.tilelang as sT

    def lower(body):
        @T.prim_func
        def k(ctx: T.uint64, a: T.Tensor((64,), "float16"), s: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                body(ctx, a, s)
        return sT.lower(k)

    with pytest.raises(TypeError, match="signal words are uint64"):
        lower(lambda ctx, a, s: sT.signal_op(ctx, s[0], 1, "add", 0))
    with pytest.raises(ValueError, match="sem must be one of"):
        lower(lambda ctx, a, s: sT.st(ctx, s[0], 1, sem="strong"))
    with pytest.raises(ValueError, match="cannot acquire"):
        lower(lambda ctx, a, s: sT.st(ctx, s[0], 1, sem="acquire"))
    with pytest.raises(TypeError, match="element type float16 is not supported"):
        lower(lambda ctx, a, s: sT.wait_ge(ctx, a[0], 1))
    with pytest.raises(TypeError, match="exactly one of size"):
        lower(lambda ctx, a, s: sT.put_block(ctx, a, a, 8, 0, nbytes=16))
    with pytest.raises(TypeError, match="dst_pe is required"):
        lower(lambda ctx, a, s: sT.put_block(ctx, a, a, 8))


def test_import_error_names_the_extra():
    code = ("import sys; sys.modules['tilelang'] = None\n"
            "import symm.cubin\n"
            "try:\n    import symm.tilelang\nexcept ImportError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "pip install 'symm[tilelang]'" in r.stdout and "symm.cubin" in r.stdout


def test_examples_lower():
    """Every example kernel lowers (the build's first half; build.py
    compiles them)."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import build
    import symm.tilelang as sT
    jobs = build.jobs(pes=(4,), only_examples=True)
    assert jobs
    plain = re.compile(r"gemm_\d")   # the GEMMs alone: the only kernels that call no symm function
    for name, builder in jobs:
        low = sT.lower(builder(), 90, name=name)
        uses = bool(re.search(r"\bsymm_\w+\(", low.source))
        assert uses == ('#include "symm_tilelang.h"' in low.source), name
        assert uses != bool(plain.match(name)), name
        if low.uses_tma:   # the GEMMs: every kernel wait is the call-free one (see wgmma below)
            assert not re.search(r"\bsymm_(wait_until|signal_wait|signal_op|barrier)\w*\(", low.source), name


@pytest.mark.parametrize("kind", ["gather", "a2a"])
def test_packet_exchange_has_no_handshake(kind):
    """The small-size exchange sends each 4-byte word as one relaxed
    system-scope 8-byte store (flag = call number in the high half), waits
    for the call number per word, and has no handshake: no signal, no
    barrier, no quiet."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import _tiles
    import symm.tilelang as sT
    src = sT.lower(_tiles.packet_kernel(kind, 32768, 4), 90, name="pkt_" + kind).source
    st = re.findall(r"symm_st_u64\(.*\);", src)
    assert len(st) == 1 and st[0].endswith(", 1, 2);"), st            # SEM_RELAXED, SCOPE_SYS
    assert "call << (uint64_t)32" in st[0]
    assert re.search(r"symm_wait_until_u64\(.*, 3, \(call << \(uint64_t\)32\)\)", src)  # CMP_GE
    assert not re.search(r"symm_(signal|barrier|quiet|fence)\w*\(", src)
    assert "(((int)call) & 1)" in src                                 # staging half by parity


# -- scale-out backends (docs/tilelang.md, "Backends") ---------------------------------

def _comm_kernel():
    """put_block, put_signal and its wait, barrier: the calls a backend carries."""
    import tilelang.language as T
    import symm.tilelang as sT
    n = 256

    @T.prim_func
    def comm(ctx: T.uint64, x: T.Tensor((n,), "float16"), y: T.Tensor((n,), "float16"),
             sig: T.Tensor((1,), "uint64")):
        with T.Kernel(1, threads=128):
            peer = (sT.get_rank(ctx) + 1) % sT.get_num_ranks(ctx)
            sT.put_block(ctx, x, y, n, peer)
            sT.put_signal_block(ctx, x, y, n, sig[0], 1, "add", peer)
            sT.wait_ge(ctx, sig[0], 1)
            sT.barrier_block(ctx)
    return comm


def _need_backend(backend):
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    import symm.tilelang as sT
    try:
        sT.backend_flags(backend)
        if backend == "nvshmem":
            sT.nvshmem_device_library()
    except ImportError as e:
        if in_ci():
            raise
        pytest.skip(str(e))
    return sT


def _ptx_files(ptx, needle):
    """Indices of the PTX's .file entries whose path contains needle."""
    return {m.group(1) for m in re.finditer(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.M) if needle in m.group(2)}


def test_nccl_backend_compiles(tmp_path):
    """nvcc with warnings as errors, SYMM_DEVICE_BACKEND=nccl: instructions
    come from NCCL's device headers (its LSA team and peer pointers), and
    every call left in the PTX is to a function the PTX defines (or printf):
    no symm_ call waits for a link. The native build has none of NCCL's code."""
    sT = _need_backend("nccl")
    src = os.path.join(tmp_path, "comm.cu")
    with open(src, "w") as f:
        f.write(sT.lower(_comm_kernel(), 90, name="comm").source)
    ptx = {}
    for backend in ("nccl", "native"):
        out = os.path.join(tmp_path, "comm_%s.ptx" % backend)
        cmd = sT.nvcc_command(src, out, 90, "ptx", backend=backend)
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, "nvcc (%s, warnings as errors) failed:\n%s" % (backend, (r.stdout + r.stderr)[-8000:])
        with open(out) as f:
            ptx[backend] = f.read()
    assert "-DSYMM_DEVICE_BACKEND=nccl" in cmd or "-DSYMM_DEVICE_BACKEND=nccl" in sT.backend_flags("nccl")
    nccl_files = _ptx_files(ptx["nccl"], "nccl_device")
    used = set(re.findall(r"^\s*\.loc\s+(\d+)\s", ptx["nccl"], re.M))
    assert nccl_files & used, "no instruction of the nccl build comes from NCCL's device headers"
    assert not _ptx_files(ptx["native"], "nccl_device")
    defined = set(re.findall(r"^(?:\.visible |\.weak )?\.func\s+(?:\([^)]*\)\s*)?(\w+)\(", ptx["nccl"], re.M))
    called = set(re.findall(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx["nccl"]))
    # the driver provides printf and assert; anything else must be in the PTX itself
    unresolved = called - defined - {"vprintf", "__assertfail"}
    assert called & defined and not unresolved, "calls to functions the PTX does not define: %s" % sorted(unresolved)
    externs = set(re.findall(r"^\.extern\s+\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx["nccl"], re.M))
    assert externs <= {"vprintf", "__assertfail"}, "extern functions: %s" % sorted(externs)


def _elf_symbols(path):
    """(ELF type, {name: (kind, defined)}) of a cubin, from its symbol table
    (cuobjdump is not part of every CUDA install)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "%s is not a 64-bit ELF" % path
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    assert e_machine == 190, "%s is not a CUDA ELF (machine %d)" % (path, e_machine)
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    syms = {}
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        for off in range(sh[4], sh[4] + sh[5], 24):
            name, info, _, shndx = struct.unpack_from("<IBBH", data, off)
            end = data.index(b"\0", strtab[4] + name)
            syms[data[strtab[4] + name:end].decode()] = (info & 0xf, shndx != 0)
    return e_type, syms


def test_nvshmem_backend_device_links(tmp_path):
    """build(..., backend="nvshmem"): relocatable code device-linked with
    libnvshmem_device.a into a loadable cubin (an ELF executable, not
    relocatable) that defines the kernel and NVSHMEM's device state, which
    symm_backend_module_init fills; nothing left undefined; the manifest
    entry says nvshmem."""
    sT = _need_backend("nvshmem")
    import symm.cubin
    entry = sT.build(_comm_kernel(), str(tmp_path), "comm", 90, backend="nvshmem")
    assert entry["backend"] == "nvshmem" and entry["entry"] == "comm_kernel"
    cubin = os.path.join(tmp_path, entry["cubin"])
    assert not os.path.exists(os.path.join(tmp_path, "comm.rdc.cubin"))
    e_type, syms = _elf_symbols(cubin)
    assert e_type == 2, "the cubin is not device-linked (ELF type %d)" % e_type
    assert syms.get("comm_kernel") == (2, True), "kernel missing: %s" % syms.get("comm_kernel")
    assert syms.get("nvshmemi_device_state_d") == (1, True), "NVSHMEM's device state is not in the cubin"
    # the driver resolves printf and assert, and places the reserved shared memory
    undefined = sorted(n for n, (_, d) in syms.items() if n and not d and n not in ("vprintf", "__assertfail")
                       and not n.startswith(".nv.reservedSmem"))
    assert not undefined, "undefined symbols: %s" % undefined
    if shutil.which("cuobjdump"):
        r = subprocess.run(["cuobjdump", "-symbols", cubin], capture_output=True, text=True)
        assert r.returncode == 0 and "nvshmemi_device_state_d" in r.stdout, r.stdout + r.stderr
    symm.cubin.write_manifest(str(tmp_path), {"comm": entry})
    assert symm.cubin.read_manifest(str(tmp_path))["comm"]["backend"] == "nvshmem"


def test_backend_choice_errors(monkeypatch, tmp_path):
    """A bad backend name, NVSHMEM just in time, and a missing NCCL each stop
    with a message that says what to do; the just-in-time default follows
    SYMM_BACKEND before symm.init."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    import symm.tilelang as sT
    from symm import _backends
    known = ", ".join(_backends.COMPILE_TARGETS)
    with pytest.raises(ValueError, match="backend 'nvshmemx': expected one of %s" % known):
        sT.build(_comm_kernel(), str(tmp_path), "comm", backend="nvshmemx")
    assert not os.listdir(tmp_path)
    with pytest.raises(NotImplementedError, match="ahead of time"):
        sT.compile(_comm_kernel(), target=90, backend="nvshmem")
    monkeypatch.setenv("SYMM_NCCL_INCLUDE", str(tmp_path))
    with pytest.raises(ImportError, match="pip install nvidia-nccl-cu13 or set SYMM_NCCL_INCLUDE"):
        sT.compile_flags("nccl")
    monkeypatch.delenv("SYMM_NCCL_INCLUDE")
    monkeypatch.setenv("SYMM_BACKEND", "nccl")
    if sT.running_backend() == "nccl":  # symm not initialised in this process: the environment decides
        assert "-DSYMM_DEVICE_BACKEND=nccl" in sT.compile_flags()
    monkeypatch.setenv("SYMM_BACKEND", "native")
    assert not [f for f in sT.compile_flags() if "SYMM_DEVICE_BACKEND" in f]


def test_build_script_backend_folder(tmp_path):
    """examples/tilelang/build.py --backend refuses to mix backends in one
    folder (every entry of a manifest is for one backend)."""
    _need_tilelang()
    import json
    with open(os.path.join(tmp_path, "manifest.json"), "w") as f:
        json.dump({"prim_sync": {"cubin": "prim_sync.cubin", "entry": "prim_sync_kernel", "params": [],
                                 "backend": "native"}}, f)
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "build.py"), "--backend", "nccl", "--out",
                        str(tmp_path), "--only", "prim_sync", "--pes", "1"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert r.returncode == 2 and "holds kernels built for native" in r.stdout, r.stdout + r.stderr


def test_build_script_forgets_failed_kernels(tmp_path):
    """A kernel whose build fails keeps no entry (nor cubin) from an earlier
    build in the folder: running it would run code older than its source."""
    _need_tilelang()
    import json
    out = tmp_path / "out"
    out.mkdir()
    (out / "prim_sync.cubin").write_bytes(b"old")
    (out / "manifest.json").write_text(json.dumps({"prim_sync": {
        "cubin": "prim_sync.cubin", "entry": "prim_sync_kernel", "params": [], "backend": "native"}}))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvcc").write_text("#!/bin/sh\necho 'nvcc: made to fail' >&2\nexit 1\n")
    (fake / "nvcc").chmod(0o755)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, PATH="%s:%s" % (fake, os.environ["PATH"]))
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "build.py"), "--out", str(out),
                        "--only", "prim_sync", "--pes", "1", "--jobs", "1"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "FAILED: prim_sync" in r.stdout, r.stdout + r.stderr
    assert "prim_sync" not in json.loads((out / "manifest.json").read_text())
    assert not (out / "prim_sync.cubin").exists()


# -- TMA GEMMs (docs/tilelang.md, "GEMMs: TMA and wgmma") --------------------------------

class _FakeDriver:
    """Stands in for libcuda: records cuTensorMapEncodeTiled's arguments."""

    def __init__(self):
        self.calls = []

    def cuTensorMapEncodeTiled(self, out, dtype, rank, addr, dims, strides, box, estr, inter, swz, l2, oob):
        self.calls.append(dict(out=out.value, dtype=dtype, rank=rank, addr=addr.value, dims=list(dims[:rank]),
                               strides=list(strides[:rank - 1]), box=list(box[:rank]),
                               estr=list(estr[:rank]), rest=(inter, swz, l2, oob)))
        return 0


def test_tma_gemm_manifest_and_tensor_maps(tmp_path, monkeypatch):
    """A pipelined GEMM built with TMA (with_tma): its entry takes a
    CUtensorMap per buffer; the manifest records cuTensorMapEncodeTiled's
    arguments (dims innermost first, byte strides, box, swizzle) and
    symm.cubin encodes each from the tensor's address at launch, 64-byte
    aligned, once per address."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import _gemm
    import symm.cubin
    import symm.tilelang as sT
    M, N, K = 256, 512, 128
    cfg = _gemm.CONFIGS[_gemm.DEFAULT]
    entry = sT.build(_gemm.k_gemm(M, N, K, cfg), str(tmp_path), "g")
    assert entry["block"] == [384, 1, 1]   # a producer warp group and two consumer ones
    assert [p[:4] for p in entry["params"]] == [["A", "tmap", "bfloat16", [M, K]], ["B", "tmap", "bfloat16", [K, N]],
                                                ["C", "tmap", "bfloat16", [M, N]]]
    a_spec = entry["params"][0][4]
    assert a_spec["dims"] == [K, M] and a_spec["strides"] == [K * 2] and a_spec["box"] == [cfg["bk"], cfg["bm"]]
    assert a_spec["rank"] == 2 and a_spec["dtype"] == 9 and a_spec["swizzle"] == 3   # bf16, 128-byte swizzle
    symm.cubin.write_manifest(str(tmp_path), {"g": entry})
    k = symm.cubin.load(str(tmp_path))["g"]
    fake = _FakeDriver()
    monkeypatch.setattr(symm.cubin, "_driver", fake)
    vals = k.pack((0x10000, 0x20000, 0x30000, 0), {})   # A, B, C, nsm (unused: not persistent)
    assert len(vals) == 3 and all(isinstance(v, symm.cubin.TensorMap) and v.address % 64 == 0 for v in vals)
    assert [c["addr"] for c in fake.calls] == [0x10000, 0x20000, 0x30000]
    assert fake.calls[1]["dims"] == [N, K] and fake.calls[1]["strides"] == [N * 2]
    assert fake.calls[0]["rest"] == (a_spec["interleave"], a_spec["swizzle"], a_spec["l2"], a_spec["oob"])
    k.pack((0x10000, 0x20000, 0x30000, 0), {})
    assert len(fake.calls) == 3          # the same addresses: the same descriptors
    with pytest.raises(ValueError, match="16-byte-aligned"):
        k.pack((0x10008, 0x20000, 0x30000, 0), {})


def test_wgmma_kernels_wait_without_calls(tmp_path):
    """ptxas serialises every wgmma of a kernel that calls a function, and
    symm's printing waits make one: build() refuses such a GEMM (C7510); the
    same GEMM waiting with wait_rec (and counting with add_release) builds,
    and its wait checks the deadline and the abort flag inline; built with
    the device trace it records, still with no call."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import tilelang.language as T
    import _gemm
    import symm.tilelang as sT
    cfg = _gemm.CONFIGS[_gemm.DEFAULT]
    bm, bn, bk = cfg["bm"], cfg["bn"], cfg["bk"]
    M = N = 256
    K = 128

    def kernel(call_free):
        @T.prim_func
        def k(ctx: T.uint64, A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"),
              C: T.Tensor((M, N), "bfloat16"), flag: T.Tensor((4,), "uint64"), rec: T.Tensor((8,), "uint64")):
            with T.Kernel((M // bm) * (N // bn), threads=256) as t:
                A_s = T.alloc_shared((bm, bk), "bfloat16")
                B_s = T.alloc_shared((bk, bn), "bfloat16")
                acc = T.alloc_fragment((bm, bn), "float32")
                T.clear(acc)
                for kk in T.Pipelined(K // bk, num_stages=2):
                    if kk == 0:
                        if call_free:
                            sT.wait_rec(ctx, flag[0], "ge", 1, rec)
                            sT.fence_proxy_async_global()
                        else:
                            sT.wait_ge(ctx, flag[0], 1)
                    T.copy(A[(t // (N // bn)) * bm, kk * bk], A_s)
                    T.copy(B[kk * bk, (t % (N // bn)) * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[(t // (N // bn)) * bm, (t % (N // bn)) * bn])
                if call_free:
                    sT.add_release(flag[1], 1)
        return sT.with_tma(k)

    with pytest.raises(RuntimeError, match="C7510"):
        sT.build(kernel(False), str(tmp_path), "printing")
    entry = sT.build(kernel(True), str(tmp_path), "call_free", keep_ptx=True)
    with open(os.path.join(tmp_path, "call_free.ptx")) as f:
        ptx = f.read()
    assert "wgmma.mma_async" in ptx and not re.search(r"\bcall(\.uni)?\b", ptx)
    assert "%globaltimer" in ptx and "ld.acquire.sys.global" in ptx      # deadline, acquire
    assert "fence.proxy.async.global" in ptx and "red.relaxed.sys.global.add.u64" in ptx
    assert entry["params"][0][1] == "tmap"
    # with the device trace compiled in, the wait records inline: still no call
    sT.build(kernel(True), str(tmp_path), "call_free_traced", keep_ptx=True, trace=True)
    with open(os.path.join(tmp_path, "call_free_traced.ptx")) as f:
        ptx = f.read()
    assert "wgmma.mma_async" in ptx and not re.search(r"\bcall(\.uni)?\b", ptx)
    assert "%smid" in ptx, "the traced wait records"


def test_wait_report_prints_and_traps(tmp_path):
    """The kernel after a GEMM reports a wait that gave up with symm's own
    message and trap (rec[0]: 1 deadline, 2 abort flag, 3 bad comparison)."""
    _need_tilelang()
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, EXAMPLES)
    import _gemm
    import symm.tilelang as sT
    sT.build(_gemm.k_finish(16), str(tmp_path), "finish", keep_ptx=True)
    with open(os.path.join(tmp_path, "finish.ptx")) as f:
        ptx = f.read()
    assert "vprintf" in ptx and "trap;" in ptx and "symm__report_timeout" in ptx and "symm__report_abort" in ptx
