"""The symm Python package without a GPU: import, errors, constants, and the
host API over the host backend (SYMM_BACKEND=host: CPU shared memory)."""
import ctypes
import gc
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import (INCLUDE_DIR, PYTHON_DIR, REPO, describe, have_library,  # noqa: E402
                           run_pes, run_python)

sys.path.insert(0, PYTHON_DIR)
import symm  # noqa: E402
from symm import _dlpack  # noqa: E402


needs_lib = pytest.mark.skipif(not have_library(), reason="libsymm.so not built (set SYMM_LIBRARY)")


# ---------------------------------------------------------------------------
# import and metadata
# ---------------------------------------------------------------------------

def test_import_needs_neither_torch_nor_gpu():
    r = run_python("import sys, symm\n"
                   "assert 'torch' not in sys.modules, 'import symm imported torch'\n"
                   "assert 'triton' not in sys.modules, 'import symm imported triton'\n"
                   "print(symm.__version__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == symm.__version__


def test_symm_triton_without_triton_says_what_to_install():
    r = run_python("import sys\n"
                   "sys.modules['triton'] = None  # as if Triton were not installed\n"
                   "try:\n"
                   "    import symm.triton\n"
                   "except ImportError as e:\n"
                   "    print('IMPORTERROR', e)\n")
    assert r.returncode == 0, r.stderr
    assert "IMPORTERROR" in r.stdout and "pip install 'symm[triton]'" in r.stdout, r.stdout
    assert "pip install '.[triton]'" in r.stdout, r.stdout


def test_install_hints_have_one_form():
    """Every hint that names an extra is quoted (an unquoted [..] is a glob in
    zsh and some shells) and names the checkout's form too."""
    bad = []
    for root, _, files in os.walk(os.path.join(PYTHON_DIR, "symm")):
        for f in files:
            if not f.endswith(".py"):
                continue
            text = open(os.path.join(root, f)).read()
            for m in re.finditer(r"pip install ([^\s'\"]*\[\w+\])", text):
                bad.append("%s: unquoted pip install %s" % (f, m.group(1)))
            for m in re.finditer(r"pip install '?symm\[(\w+)\]", text):
                tail = text[m.end():m.end() + 200]
                if "pip install '.[%s]'" % m.group(1) not in tail:
                    bad.append("%s: symm[%s] without the checkout's form" % (f, m.group(1)))
    assert not bad, "\n".join(bad)


def test_triton_versions_agree():
    """pyproject's triton extra and python/README name the same versions."""
    pyproject = open(os.path.join(REPO, "pyproject.toml")).read()
    lo, hi = re.search(r'triton = \["triton>=3\.(\d+),<3\.(\d+)"\]', pyproject).groups()
    readme = open(os.path.join(PYTHON_DIR, "README.md")).read()
    assert "Triton 3.%s to 3.%d" % (lo, int(hi) - 1) in readme


def test_versions_agree():
    cmake = open(os.path.join(REPO, "CMakeLists.txt")).read()
    pyproject = open(os.path.join(REPO, "pyproject.toml")).read()
    v_cmake = re.search(r"project\(symm VERSION ([0-9.]+)", cmake).group(1)
    v_py = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    h = open(os.path.join(INCLUDE_DIR, "symm", "symm.h")).read()
    v_h = ".".join(re.search(r"#define SYMM_VERSION_%s (\d+)" % k, h).group(1)
                   for k in ("MAJOR", "MINOR", "PATCH"))
    assert v_cmake == v_py == v_h == symm.__version__


def test_status_table_matches_header():
    text = open(os.path.join(INCLUDE_DIR, "symm", "symm_types.h")).read()
    header = {name: int(v) for name, v in re.findall(r"(SYMM_ERR_\w+)\s*=\s*(-\d+)", text)}
    assert header, "no status codes found in symm_types.h"
    table = {cname: status for status, cname, _, _ in symm._errors.STATUSES}
    assert table == header
    for status, cname, pyname, _ in symm._errors.STATUSES:
        cls = getattr(symm, pyname)
        assert cls is symm.error_class(status) and issubclass(cls, symm.SymmError)
        assert cls.code == cname and cls.status == status
    assert symm.error_class(-999) is symm.SymmError


def test_error_carries_the_c_message():
    e = symm.MismatchError("symm_malloc", -6, "PE 1 asked for 8 bytes, PE 0 for 16",
                           "SYMM_ERR_MISMATCH: arguments differ across PEs")
    assert isinstance(e, RuntimeError) and e.status == -6 and e.call == "symm_malloc"
    assert str(e) == ("symm_malloc failed: SYMM_ERR_MISMATCH: arguments differ across PEs: "
                      "PE 1 asked for 8 bytes, PE 0 for 16")
    assert isinstance(symm.HeapExhaustedError("x", -5, ""), MemoryError)
    assert isinstance(symm.SymmTimeoutError("x", -12, ""), TimeoutError)


def test_bitcode_path_choice(tmp_path, monkeypatch):
    for name in ("libsymm_device.bc", "libsymm_device_sm80.bc", "libsymm_device_sm90.bc"):
        (tmp_path / name).write_bytes(b"BC")
    monkeypatch.setenv("SYMM_BITCODE_DIR", str(tmp_path))
    assert symm.bitcode_path() == str(tmp_path / "libsymm_device.bc")
    assert symm.bitcode_path(80).endswith("_sm80.bc")
    assert symm.bitcode_path(86).endswith("_sm80.bc")
    assert symm.bitcode_path("sm_90").endswith("_sm90.bc")
    assert symm.bitcode_path("90a").endswith("_sm90.bc")
    assert symm.bitcode_path(100).endswith("_sm90.bc")
    with pytest.raises(ValueError):
        symm.bitcode_path(75)
    monkeypatch.setenv("SYMM_BITCODE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(symm.LibraryNotFoundError, match="clang-19"):
        symm.bitcode_path()


def test_compile_backend_default(monkeypatch):
    """Before symm.init a kernel compiled without backend= targets $SYMM_BACKEND
    (what symm.init will pick), else native; "host" and unknown names mean
    native. symm.cute and symm.tilelang take this same default."""
    from symm import _runtime
    if not have_library() or _runtime.backend() is not None:
        pytest.skip("needs libsymm, not initialised in this process")
    monkeypatch.delenv("SYMM_BACKEND", raising=False)
    assert _runtime.compile_backend() == "native"
    from symm import _backends
    # every backend kernels compile for is itself; the others (host) and unknown names are native
    cases = [(b.name, b.name if b.bitcode else "native") for b in _backends.BACKENDS.values()]
    for env, want in cases + [("nvshmemx", "native")]:
        monkeypatch.setenv("SYMM_BACKEND", env)
        assert _runtime.compile_backend() == want, env
        # the DSL front ends, where installed, follow it
        for mod, fn in (("symm.cute._bitcode", "resolve_backend"), ("symm.tilelang._build", "running_backend")):
            try:
                m = __import__(mod, fromlist=[fn])
            except ImportError:
                continue
            assert getattr(m, fn)() == want, (mod, env)


def test_include_dir():
    assert os.path.isfile(os.path.join(symm.include_dir(), "symm", "symm_device.h"))


def test_cubin_checks_pointer_arguments(tmp_path):
    """symm.cubin checks what a manifest records of a pointer parameter
    ([name, "ptr", dtype, shape, align]) before anything is launched: a
    tensor's dtype, shape, contiguity and device, an address's alignment;
    what is not recorded is not checked."""
    torch = pytest.importorskip("torch")
    from symm import cubin
    entry = {"cubin": "k.cubin", "entry": "k", "grid": 1,
             "params": [["n", "i32"], ["x", "ptr", "float32", [4], 16], ["y", "ptr", "uint64", None, 8],
                        ["z", "ptr"]]}
    k = cubin.Kernel("k", entry, str(tmp_path))
    vals = k.pack((3, 0x1000, 0x2008, 0x3001), {})
    assert [v.value for v in vals] == [3, 0x1000, 0x2008, 0x3001]
    with pytest.raises(ValueError, match=r"k: x \(0x1008\) is not 16-byte aligned"):
        k.pack((3, 0x1008, 0x2008, 0), {})
    with pytest.raises(ValueError, match=r"k: y \(0x2004\) is not 8-byte aligned"):
        k.pack((3, 0x1000, 0x2004, 0), {})
    with pytest.raises(TypeError, match="k: x must be float32, got torch.float16"):
        k.pack((3, torch.zeros(4, dtype=torch.float16), 0x2008, 0), {})
    with pytest.raises(ValueError, match=r"k: x must have shape \[4\], got \[5\]"):
        k.pack((3, torch.zeros(5), 0x2008, 0), {})
    with pytest.raises(ValueError, match="k: x must be contiguous"):
        k.pack((3, torch.zeros(8)[::2], 0x2008, 0), {})
    with pytest.raises(ValueError, match="k: x must be on a CUDA device, got cpu"):
        k.pack((3, torch.zeros(4), 0x2008, 0), {})          # dtype and shape are right
    with pytest.raises(TypeError, match="k: y must be a tensor or an address"):
        k.pack((3, 0x1000, 1.5, 0), {})
    with pytest.raises(TypeError, match="k: n is a i32 scalar, got a tensor"):
        k.pack((torch.zeros(1), 0x1000, 0x2008, 0), {})
    bad = dict(entry, params=[["n", "i32", "int32", [2]]])
    with pytest.raises(ValueError, match="scalar parameter n records a shape"):
        cubin.Kernel("k", bad, str(tmp_path))
    with pytest.raises(ValueError, match="is not \\[name, kind"):
        cubin.Kernel("k", dict(entry, params=[["n", "i8"]]), str(tmp_path))


def test_write_manifest_merges_and_drops(tmp_path):
    """write_manifest adds entries, keeps the others, and removes a dropped
    name's entry and cubin (a kernel that failed to build now)."""
    import json
    import symm.cubin as cubin
    for name in ("a", "b"):
        (tmp_path / (name + ".cubin")).write_bytes(b"x")
    cubin.write_manifest(str(tmp_path), {"a": {"cubin": "a.cubin"}, "b": {"cubin": "b.cubin"}})
    cubin.write_manifest(str(tmp_path), {"c": {"cubin": "c.cubin"}}, drop=["b", "never-built"])
    assert sorted(json.loads((tmp_path / "manifest.json").read_text())) == ["a", "c"]
    assert (tmp_path / "a.cubin").exists() and not (tmp_path / "b.cubin").exists()


def _write_entries(folder, worker, count):
    import symm.cubin as cubin
    for i in range(count):
        cubin.write_manifest(folder, {"w%d_%d" % (worker, i): {"cubin": "x.cubin"}})


def test_write_manifest_from_processes_at_once(tmp_path):
    """Builds in parallel processes (examples/tilelang/build.py's pool, or
    a user's) each merge their entries: none is lost, and no temporary file
    is left behind."""
    import json
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_entries, args=(str(tmp_path), w, 25)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 6
    assert len(json.loads((tmp_path / "manifest.json").read_text())) == 6 * 25
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_tensor_without_torch_says_so():
    if "torch" in sys.modules or _importable("torch"):
        pytest.skip("torch is installed here")
    with pytest.raises(ImportError, match="need torch"):
        symm.tensor((4,))


def _importable(mod):
    import importlib.util
    return importlib.util.find_spec(mod) is not None


# ---------------------------------------------------------------------------
# DLPack export (checked with numpy on CPU memory: the same capsule torch gets)
# ---------------------------------------------------------------------------

def test_dlpack_capsule_layout_and_deleter():
    np = pytest.importorskip("numpy")
    buf = (ctypes.c_uint8 * 96)(*range(96))
    freed = []
    before = _dlpack.live_exports()
    a = np.from_dlpack(_dlpack.Exporter(ctypes.addressof(buf), 96, _dlpack.KDL_CPU, 0,
                                        lambda: freed.append(True)))
    assert a.dtype == np.uint8 and a.shape == (96,) and a.strides == (1,)
    assert list(a[:4]) == [0, 1, 2, 3] and a[95] == 95
    assert a.ctypes.data == ctypes.addressof(buf)  # shared, not copied
    buf[10] = 200
    assert a[10] == 200
    view = a[8:].view(np.uint32)
    del a
    gc.collect()
    assert freed == [] and _dlpack.live_exports() == before + 1  # the view keeps it
    assert int(view[0]) == int.from_bytes(bytes(buf[8:12]), "little")
    del view
    gc.collect()
    assert freed == [True] and _dlpack.live_exports() == before


# ---------------------------------------------------------------------------
# The C library through ctypes
# ---------------------------------------------------------------------------

@needs_lib
def test_calls_before_init_raise_not_initialized():
    assert symm.my_pe() == -1 and symm.n_pes() == -1 and not symm.initialized()
    with pytest.raises(symm.NotInitializedError, match="symm_malloc failed: SYMM_ERR_NOT_INITIALIZED"):
        symm.malloc(16)
    with pytest.raises(symm.NotInitializedError):
        symm.ctx()
    with pytest.raises(symm.NotInitializedError):
        symm.finalize()
    with pytest.raises(symm.NotInitializedError):
        symm.gpu_pes()
    with pytest.raises(symm.NotInitializedError):
        symm.sm_share()


def test_bad_arguments_raise_before_c():
    # No library call happens: these fail on the Python side.
    with pytest.raises(TypeError):
        symm.malloc(1.5)
    with pytest.raises(ValueError):
        symm.malloc(-1)
    with pytest.raises(ValueError, match="power of two"):
        symm.malloc(64, alignment=48)
    with pytest.raises(TypeError, match="uid must be"):
        symm.init(uid=b"short", rank=0, world=1)
    with pytest.raises(ValueError, match="outside"):
        symm.init(uid=bytes(128), rank=2, world=2)
    with pytest.raises(ValueError, match="rank= and world="):
        symm.init(uid=bytes(128))
    with pytest.raises(ValueError, match="not both"):
        symm.init(group=True, uid=bytes(128), rank=0, world=1)


@needs_lib
def test_init_without_gpu_fails_clearly():
    r = run_python("import symm\n"
                   "try:\n"
                   "    symm.init()\n"
                   "except symm.NoDeviceError as e:\n"
                   "    print('NODEVICE', e)\n"
                   "else:\n"
                   "    print('INIT-OK', symm.device())\n"
                   "    symm.finalize()\n", env={"SYMM_BACKEND": "native"})
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("INIT-OK"):
        assert os.path.exists("/dev/nvidia0"), "init succeeded on a machine without a GPU"
        pytest.skip("this machine has a GPU")
    assert "NODEVICE symm_init failed: SYMM_ERR_NO_DEVICE" in r.stdout, r.stdout


HOST_ONE_PE = r"""
import symm
symm.init()
assert symm.initialized() and symm.my_pe() == 0 and symm.n_pes() == 1, (symm.my_pe(), symm.n_pes())
assert symm.ctx() != 0
w = symm.team_world()
assert w.my_pe() == 0 and w.n_pes() == 1 and w.ctx() == symm.ctx()
p = symm.malloc(1000)
assert p % 256 == 0 and symm.peer_ptr(p, 0) == p and symm.peer_ptr(p, 5) == 0
mapped, limit = symm.heap_info()
assert mapped >= 1000 and limit >= mapped
z = symm.malloc(4096, zero=True)
assert bytes((ctypes.c_char * 4096).from_address(z)) == bytes(4096)
a = symm.malloc(100, alignment=4096)
assert a % 4096 == 0
assert symm.malloc(0) == 0
with symm.scope():
    q = symm.malloc(64)
    with symm.scope():
        r = symm.malloc(64)
    try:
        symm.free(r)
    except ValueError:
        pass
    else:
        raise AssertionError("inner scope did not free")
    symm.free(q)          # freeing inside the scope is allowed
try:
    symm.free(q)
except ValueError as e:
    assert "not a live allocation" in str(e)
else:
    raise AssertionError("double free not caught")
try:
    symm.init()
except symm.AlreadyInitializedError as e:
    print("ALREADY", e)
symm.barrier()
assert symm.host_broadcast(b"abc") == b"abc"
assert symm.host_allgather(b"xy") == [b"xy"]
assert symm.gpu_pes() == 1
try:
    symm.sm_share()
except symm.UnsupportedError as e:
    assert "has no GPU" in str(e), e
else:
    raise AssertionError("sm_share on the host backend did not raise")
symm.free(p)
symm.finalize()            # frees z and a
assert not symm.initialized()
symm.init()                # init again after finalize
assert symm.n_pes() == 1
symm.finalize()
print("DONE")
"""


@needs_lib
def test_host_backend_one_pe():
    r = run_python("import ctypes\n" + HOST_ONE_PE, env={"SYMM_BACKEND": "host"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ALREADY symm_init failed: SYMM_ERR_ALREADY_INITIALIZED" in r.stdout
    assert r.stdout.strip().endswith("DONE")


HOST_PES = r"""
import ctypes, symm
symm.init()
me, n = symm.my_pe(), symm.n_pes()
assert n == 3, n
assert symm.host_allgather(bytes([me]) * 4) == [bytes([p]) * 4 for p in range(n)]
assert symm.host_allgather(b"x" * me) == [b"x" * p for p in range(n)]  # lengths differ
assert symm.host_allgather(b"") == [b""] * n
assert symm.host_broadcast(b"from%d" % me, root=2) == b"from2"
p = symm.malloc(4096)
# write my PE number into my copy, then read every peer's copy through peer_ptr
ctypes.memset(p, 0, 4096)
ctypes.c_int.from_address(p + 8).value = 100 + me
symm.barrier()
seen = [ctypes.c_int.from_address(symm.peer_ptr(p, q) + 8).value for q in range(n)]
assert seen == [100, 101, 102], seen
symm.barrier()
# sizes that differ between PEs: every PE is told
try:
    symm.malloc(64 + 8 * me)
except symm.MismatchError as e:
    print("MISMATCH", e)
symm.free(p)
symm.finalize()
print("DONE", me)
"""


@needs_lib
def test_host_backend_three_pes():
    res = run_pes(HOST_PES, 3)
    for r in res:
        assert r.returncode == 0, describe(res)
        assert "MISMATCH symm_malloc failed: SYMM_ERR_MISMATCH" in r.stdout, describe(res)
        assert "DONE" in r.stdout, describe(res)


SETTLE_PES = r"""
import symm
from symm import _runtime
symm.init()
me = symm.my_pe()
# a free whose arguments differ between PEs fails on every PE and loses nothing
a, b = symm.malloc(64), symm.malloc(64)
try:
    symm.free(a if me == 0 else b)
except symm.MismatchError:
    print("FREE MISMATCH")
assert a in _runtime._allocs and b in _runtime._allocs
symm.free(b)
symm.free(a)
# local work after an allocation fails on PE 1 only (as symm.tensor()'s
# wrapping may): every PE frees the allocation and raises
key, alloc = _runtime._malloc(256)
err = ValueError("local failure") if me == 1 else None
try:
    _runtime._settle(key, err, "test")
except ValueError:
    print("RAISED OWN")
except symm.SymmError as e:
    assert "PE(s) 1" in str(e), e
    print("RAISED PEER")
assert key not in _runtime._allocs
key2, _ = _runtime._malloc(128)
_runtime._settle(key2, None, "test")  # nobody failed: kept
assert key2 in _runtime._allocs
symm.barrier()
symm.finalize()
print("DONE")
"""


@needs_lib
def test_failed_free_and_failed_local_work_stay_collective():
    res = run_pes(SETTLE_PES, 3)
    for i, r in enumerate(res):
        assert r.returncode == 0, describe(res)
        assert "FREE MISMATCH" in r.stdout and "DONE" in r.stdout, describe(res)
        assert ("RAISED OWN" if i == 1 else "RAISED PEER") in r.stdout, describe(res)


UID_PES = r"""
import os, symm
rank, world = int(os.environ["T_RANK"]), int(os.environ["T_WORLD"])
path = os.environ["T_UID_FILE"]
if rank == 0:
    uid = symm.get_unique_id()
    assert len(uid) == 128
    with open(path + ".tmp", "wb") as f:
        f.write(uid)
    os.rename(path + ".tmp", path)
else:
    import time
    for _ in range(600):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    uid = open(path, "rb").read()
symm.init(uid=uid, rank=rank, world=world)
assert symm.my_pe() == rank and symm.n_pes() == world
assert symm.host_allgather(bytes([rank])) == [bytes([r]) for r in range(world)]
symm.finalize()
print("DONE")
"""


@needs_lib
def test_init_with_unique_id(tmp_path):
    import subprocess
    from symm_testutil import child_env
    uid_file = str(tmp_path / "uid")
    procs = [subprocess.Popen([sys.executable, "-c", UID_PES], text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              env=child_env({"SYMM_BACKEND": "host", "T_RANK": str(r),
                                             "T_WORLD": "2", "T_UID_FILE": uid_file,
                                             "SYMM_BOOTSTRAP_TIMEOUT": "30"}))
             for r in range(2)]
    outs = [p.communicate(timeout=90) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "DONE" in out, out + err
