"""symm.triton.prepare without a GPU.

Triton's CUDA driver is replaced by a stand-in (the target is sm_90; loading
a binary gives a made-up CUfunction; the launcher records what it is called
with), so a prepared launch goes through the real Triton compile (the kernel
calls symm.triton, linked from the device bitcode) and its launches can be
compared with what kernel[grid](...) hands the same launcher. Also: bad
arguments raise before anything is compiled or launched, and where Triton's
internals are not as expected every call is an ordinary launch().
The GPU side (results, CUDA graphs) is test_gpu_triton.py's.
"""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, in_ci  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

try:
    import triton
    import triton.language as tl
except ImportError:
    if in_ci():
        raise
    pytest.skip("triton not installed (pip install triton==3.6.0)", allow_module_level=True)

import symm.triton as st  # noqa: E402
from symm.triton import _launch  # noqa: E402

CTX = 0x7F0000001000          # a device context address (int64, as symm.ctx() gives)
LIBS = {"symm": "/nonexistent/libsymm_device.bc"}   # where nothing is compiled


@triton.jit
def k_pe(ctx, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, st.my_pe(ctx) * scale + offs, mask=offs < n)


class FakeTensor:
    """What Triton's launcher needs of a tensor: data_ptr() and dtype."""

    def __init__(self, ptr, dtype=tl.float32):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self):
        return self.ptr


CALLS = []  # every call of the stand-in launcher: its positional arguments


class FakeLauncher:
    def __init__(self, src, metadata):
        pass

    def __call__(self, *args):
        CALLS.append(args)


class FakeUtils:
    def load_binary(self, name, kernel, shared, device):
        return "module", 0xF00D, 32, 0, 1024     # module, CUfunction, regs, spills, max threads

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132}


class FakeDriver:
    launcher_cls = FakeLauncher

    def __init__(self):
        self.utils = FakeUtils()
        self.stream = 0x5000
        self.stream_asked = 0

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        assert device == 0
        self.stream_asked += 1
        return self.stream

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", 90, 32)


@pytest.fixture(scope="module", autouse=True)
def triton_cache():
    old = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="symm-prepare-") as d:
        os.environ["TRITON_CACHE_DIR"] = d
        yield
    if old is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = old


@pytest.fixture
def gpu():
    """The stand-in driver as Triton's active one; the kernel's caches
    emptied before and after (they hold launchers made by the driver)."""
    from triton.runtime import driver
    saved = dict(driver.__dict__)
    fake = FakeDriver()
    k_pe.device_caches.clear()
    driver.set_active(fake)
    CALLS.clear()
    try:
        yield fake
    finally:
        driver.__dict__.clear()
        driver.__dict__.update(saved)
        k_pe.device_caches.clear()
        CALLS.clear()


@pytest.fixture
def launches(monkeypatch):
    """_launch.launch replaced by a recorder: the fallback's calls."""
    seen = []
    monkeypatch.setattr(_launch, "launch", lambda kernel, grid, *a, **kw: seen.append((kernel, grid, a, kw)))
    return seen


def need_bitcode():
    try:
        import symm._lib
        symm._lib.bitcode_dir()
    except Exception as e:  # noqa: BLE001 - CMake passes SYMM_BITCODE_DIR only where it built it
        pytest.skip("no device bitcode to link (%s)" % e)


def test_exported():
    assert st.prepare is _launch.prepare and "prepare" in st.__all__
    assert st.PreparedLaunch is _launch.PreparedLaunch and "PreparedLaunch" in st.__all__


@pytest.mark.parametrize("forced_fallback", [False, True])
@pytest.mark.parametrize("args,kwargs", [
    ((CTX, FakeTensor(1 << 20), 1000), dict(BLOCK=256)),                  # scale missing
    ((CTX, FakeTensor(1 << 20), 1000, 3, 256, 7), {}),                     # one too many
    ((CTX, FakeTensor(1 << 20), 1000, 3), dict(BLOK=256)),                 # BLOCK misspelt
    ((CTX, FakeTensor(1 << 20), 1000, 3), dict(BLOCK=256, n=1000)),        # n twice
], ids=["missing", "extra", "misspelt", "twice"])
def test_wrong_arguments_raise_before_anything(monkeypatch, launches, args, kwargs, forced_fallback):
    compiled = []
    monkeypatch.setattr(k_pe, "warmup", lambda *a, **kw: compiled.append(a))
    if forced_fallback:
        monkeypatch.setattr(_launch, "_CHECKED_TRITON", ((0, 0), (0, 0)))
    with pytest.raises(TypeError):
        st.prepare(k_pe, (1,), *args, extern_libs=LIBS, **kwargs)
    assert compiled == [] and launches == []


def _drop(cls, name):
    """Monkeypatch action: `name` gone from cls (looked up along its MRO)."""
    owner = next(c for c in cls.__mro__ if name in vars(c))
    return lambda mp: mp.delattr(owner, name)


def _internals_missing():
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    def compiled_without(name):    # what a warmup might give in another Triton
        attrs = {a: v for a, v in (("run", None), ("launch_metadata", None), ("packed_metadata", ()),
                                   ("function", 0xF00D)) if a != name}
        fake = type("Compiled", (), attrs)()
        return lambda mp: mp.setattr(k_pe, "warmup", lambda *a, **kw: fake)

    return {
        # what: (monkeypatch action, words of the reason given)
        "version": (lambda mp: mp.setattr(_launch, "_CHECKED_TRITON", ((0, 0), (0, 0))),
                    "versions checked"),
        "no_warmup": (_drop(JITFunction, "warmup"), "warmup missing"),
        "no_compiled_run": (compiled_without("run"), "run missing"),
        "no_launch_metadata": (_drop(CompiledKernel, "launch_metadata"), "launch_metadata missing"),
        "no_runtime_hooks": (lambda mp: mp.delattr(type(triton.knobs.runtime), "launch_enter_hook"),
                             "launch_enter_hook"),
        "no_driver_stream": (_drop(FakeDriver, "get_current_stream"), "get_current_stream"),
        "warmup_gives_none": (lambda mp: mp.setattr(k_pe, "warmup", lambda *a, **kw: None),
                              "compiled nothing"),
        "no_packed_metadata": (compiled_without("packed_metadata"), "packed_metadata missing"),
        "no_function": (compiled_without("function"), "no CUfunction"),
    }


@pytest.mark.parametrize("what", sorted(_internals_missing()))
def test_fallback_launches_each_call(gpu, monkeypatch, launches, what):
    action, words = _internals_missing()[what]
    action(monkeypatch)
    out = FakeTensor(1 << 20)
    p = st.prepare(k_pe, (4,), CTX, out, 1000, 3, BLOCK=256, num_warps=2, extern_libs=LIBS)
    assert isinstance(p, st.PreparedLaunch)
    assert not p.fast and words in p.reason, p
    assert launches == [] and CALLS == []
    for _ in range(3):
        p()
    assert len(launches) == 3
    for kernel, grid, args, kw in launches:
        assert kernel is k_pe and tuple(grid) == (4,) and args == (CTX, out, 1000, 3)
        assert kw == dict(BLOCK=256, num_warps=2, extern_libs=LIBS)
    assert CALLS == []


def test_fallback_for_a_kernel_that_is_not_a_jit_function(launches):
    # a heuristics wrapper completes the arguments itself: not bound, launched as usual
    wrapped = triton.heuristics({"BLOCK": lambda a: 128})(k_pe)
    out = FakeTensor(1 << 20)
    p = st.prepare(wrapped, (2,), CTX, out, 100, 1, extern_libs=LIBS)
    assert not p.fast and "JITFunction" in p.reason
    p()
    p()
    assert [(k, g, a) for k, g, a, _ in launches] == [(wrapped, (2,), (CTX, out, 100, 1))] * 2
    assert launches[0][3]["extern_libs"] == LIBS


def test_symm_bitcode_added_to_extern_libs(launches, monkeypatch):
    monkeypatch.setattr(_launch, "_cached_libs", lambda: {"symm": "/x/libsymm_device_sm90.bc"})
    monkeypatch.setattr(_launch, "_CHECKED_TRITON", ((0, 0), (0, 0)))
    p = st.prepare(k_pe, (1,), CTX, FakeTensor(1 << 20), 10, 1, BLOCK=16,
                   extern_libs={"other": "/y/other.bc"})
    assert p.kwargs["extern_libs"] == {"other": "/y/other.bc", "symm": "/x/libsymm_device_sm90.bc"}


def test_backend_libraries_added_to_extern_libs(launches, monkeypatch):
    """On the nvshmem backend a kernel links NVSHMEM's device bitcode beside symm's."""
    monkeypatch.setattr(_launch, "_cached_libs", lambda: {"symm": "/x/libsymm_device_nvshmem_sm90.bc",
                                                          "nvshmem": "/z/libnvshmem_device.bc"})
    monkeypatch.setattr(_launch, "_CHECKED_TRITON", ((0, 0), (0, 0)))
    p = st.prepare(k_pe, (1,), CTX, FakeTensor(1 << 20), 10, 1, BLOCK=16, extern_libs={"symm": "/mine.bc"})
    assert p.kwargs["extern_libs"] == {"symm": "/mine.bc", "nvshmem": "/z/libnvshmem_device.bc"}


def _args_of_launch(kernel, grid, *args, **kwargs):
    """What kernel[grid](...) (through symm.triton.launch) hands the launcher,
    and the CompiledKernel it used."""
    n = len(CALLS)
    compiled = st.launch(kernel, grid, *args, **kwargs)
    assert len(CALLS) == n + 1
    return CALLS.pop(), compiled


def test_fast_path_launches_what_kernel_grid_launches(gpu):
    need_bitcode()
    out = FakeTensor(1 << 20)
    kw = dict(BLOCK=256, num_warps=2)
    p = st.prepare(k_pe, (3,), CTX, out, 1000, 5, **kw)
    assert p.fast, p.reason
    assert CALLS == [], "prepare launched the kernel"
    for stream in (0x5000, 0x6000, 0x5000):
        gpu.stream = stream
        asked = gpu.stream_asked
        p()
        assert gpu.stream_asked == asked + 1, "the current stream is looked up at each call"
        mine = CALLS.pop()
        theirs, compiled = _args_of_launch(k_pe, (3,), CTX, out, 1000, 5, **kw)
        assert compiled is p.compiled, "not the kernel that kernel[grid](...) uses"
        assert mine[:6] == theirs[:6] == (3, 1, 1, stream, 0xF00D, compiled.packed_metadata)
        # no launch hooks set: nothing for the launcher to call, no metadata
        assert mine[6:9] == (None, None, None)
        assert mine[9:] == theirs[9:] == (CTX, out, 1000, 5, 256)
        assert mine[10] is out


def _add_enter_hook(monkeypatch, hook):
    rt = triton.knobs.runtime
    if hasattr(rt.launch_enter_hook, "add"):             # Triton 3.5+: a HookChain
        rt.launch_enter_hook.add(hook)
        return lambda: rt.launch_enter_hook.remove(hook)
    monkeypatch.setattr(rt, "launch_enter_hook", hook)   # Triton 3.4: the function
    return lambda: monkeypatch.setattr(rt, "launch_enter_hook", None)


def test_fast_path_with_launch_hooks(gpu, monkeypatch):
    need_bitcode()
    out = FakeTensor(1 << 20)
    p = st.prepare(k_pe, (2,), CTX, out, 100, 1, BLOCK=64)
    assert p.fast, p.reason
    remove = _add_enter_hook(monkeypatch, lambda meta: None)
    try:
        gpu.stream = 0x7000
        p()
        mine = CALLS.pop()
        theirs, _ = _args_of_launch(k_pe, (2,), CTX, out, 100, 1, BLOCK=64)
        rt = triton.knobs.runtime
        # the hooks themselves, and metadata as JITFunction.run builds it
        assert mine[7] is theirs[7] is rt.launch_enter_hook
        assert mine[8] is theirs[8] is rt.launch_exit_hook
        meta = mine[6].get()
        assert meta == theirs[6].get()
        assert meta["name"] == p.compiled.name and meta["stream"] == 0x7000
        assert meta["function"] == 0xF00D
    finally:
        remove()
    p()
    assert CALLS.pop()[6:9] == (None, None, None)


def test_fast_path_grid_function_and_pre_run_hooks(gpu, monkeypatch):
    need_bitcode()
    seen = []
    monkeypatch.setattr(k_pe, "pre_run_hooks", [lambda *a, **kw: seen.append((a, kw["BLOCK"]))])
    out = FakeTensor(1 << 20)
    grids = []

    def grid(meta):
        grids.append(dict(meta))
        return (triton.cdiv(meta["n"], meta["BLOCK"]), 2)

    p = st.prepare(k_pe, grid, CTX, out, 1000, 3, BLOCK=128)
    assert p.fast, p.reason
    assert grids == [dict(ctx=CTX, out=out, n=1000, scale=3, BLOCK=128)], "grid evaluated once, by name"
    n_hooks = len(seen)     # warmup runs them too, as Triton does
    p()
    p()
    assert [c[:3] for c in CALLS] == [(8, 2, 1)] * 2 and len(grids) == 1
    assert seen[n_hooks:] == [((CTX, out, 1000, 3), 128)] * 2


def test_bad_grid(gpu):
    need_bitcode()
    with pytest.raises(ValueError):
        st.prepare(k_pe, (1, 1, 1, 1), CTX, FakeTensor(1 << 20), 10, 1, BLOCK=16)
    assert CALLS == []
