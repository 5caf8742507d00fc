"""Linking libsymm_device*.bc into Triton kernels."""
from .. import _backends, _lib
from .raw import LIB_NAME


def _current_arch():
    """Compute capability of the GPU Triton would compile for, or None."""
    try:
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return major * 10 + minor
        from triton.runtime import driver
        target = driver.active.get_current_target()
        return int(target.arch) if target.backend == "cuda" else None
    except Exception:  # noqa: BLE001 - no GPU or driver: use the default file
        return None


# The library names a kernel's extern_libs use: symm's bitcode, and on a
# backend with a device library of its own (list.h's device_lib: NVSHMEM's
# libnvshmem_device.bc, which symm's calls) that file under the backend's name.
NVSHMEM_LIB_NAME = "nvshmem"


def _current_backend():
    """The running symm's backend, or "native" before init."""
    from .. import _runtime
    try:
        return _runtime.backend() or "native"
    except Exception:  # noqa: BLE001 - no libsymm loaded yet: the default file
        return "native"


def extern_libs(arch=None, backend=None, trace=None):
    """The extern_libs to pass when launching or compiling a kernel that calls
    symm.triton: {"symm": <bitcode path>}, plus {"nvshmem": libnvshmem_device.bc}
    on the nvshmem backend. `arch` is the target's compute capability (e.g.
    90; by default the current GPU's, or the sm_90 file when there is no
    GPU); `backend` the symm backend the kernel will run on (by default the
    running one: a kernel is compiled for exactly one backend, like the
    constexpr backend hint of PyTorch's extern library); `trace` True links
    the traced bitcode (the kernel records into the device trace,
    docs/trace.md), None follows $SYMM_TRACE."""
    if arch is None:
        arch = _current_arch()
    if backend is None:
        backend = _current_backend()
    trace = _lib.trace_requested(trace)
    if backend in _lib.SCALE_OUT_BACKENDS:
        libs = {LIB_NAME: _lib.bitcode_path(arch, backend=backend, trace=trace)}
        b = _backends.get(backend)
        if b.device_lib:  # the library's own device bitcode, under the backend's name
            libs[b.name] = _lib.device_lib_bitcode(backend)
        if b.module_init:
            _install_module_hook()
        return libs
    return {LIB_NAME: _lib.bitcode_path(arch, trace=trace)}


# the libraries per (CUDA device index, backend, trace): launch() runs on every
# kernel call, and asking torch for the capability and building the paths each
# time costs host time that a short kernel cannot hide
_LIBS_BY_DEVICE = {}


def _cached_libs(trace=None):
    device = None
    try:
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            device = torch.cuda.current_device()
    except Exception:  # noqa: BLE001 - no GPU: one entry for "no device"
        device = None
    key = (device, _current_backend(), _lib.trace_requested(trace))
    libs = _LIBS_BY_DEVICE.get(key)
    if libs is None:
        libs = _LIBS_BY_DEVICE[key] = extern_libs(backend=key[1], trace=key[2])
    return libs


def _pop_trace(kernel, kwargs):
    """The `trace` keyword of launch()/prepare(), unless the kernel itself
    has a parameter of that name (then it is the kernel's)."""
    names = getattr(kernel, "arg_names", None)
    if names is not None and "trace" in names:
        return None
    return kwargs.pop("trace", None)


def _with_symm_lib(libs, trace=None):
    """`libs` (an extern_libs value or None) with symm's libraries added."""
    ours = _cached_libs(trace) if trace is not None else _cached_libs()
    if libs is None:
        return dict(ours)
    if any(name not in libs for name in ours):
        libs = dict(libs)
        for name, path in ours.items():
            libs.setdefault(name, path)
    return libs


# ---- NVSHMEM's per-module state ------------------------------------------------
#
# A module that links NVSHMEM's device bitcode keeps NVSHMEM's device state in
# a constant of its own, which must be filled before its kernels run
# (nvshmemx_cumodule_init). Triton calls kernel_load_end_hook right after it
# loads a module and before the first launch; symm's hook hands every module
# to symm_backend_module_init, which sets up those that link NVSHMEM and
# leaves the others alone. So users have no init step.

_hook_installed = False


def _module_loaded(module, function, name, metadata_group, hash):  # noqa: A002 - Triton's names
    from .. import _runtime
    if _runtime.initialized():
        _runtime.backend_module_init(module)


def _install_module_hook():
    global _hook_installed
    if _hook_installed:
        return
    from triton import knobs
    rt = knobs.runtime
    hook = rt.kernel_load_end_hook
    if hasattr(hook, "add"):  # Triton 3.5+: a HookChain
        hook.add(_module_loaded)
    elif hook is None:
        rt.kernel_load_end_hook = _module_loaded
    else:  # someone's hook already: call both
        previous = hook

        def both(*args):
            previous(*args)
            _module_loaded(*args)
        rt.kernel_load_end_hook = both
    _hook_installed = True


def launch(kernel, grid, *args, **kwargs):
    """kernel[grid](*args, **kwargs) with symm's libraries for the running
    backend added to extern_libs (looked up once per device and backend).
    trace=True links the traced bitcode (None: $SYMM_TRACE; docs/trace.md)."""
    trace = _pop_trace(kernel, kwargs)
    libs = _with_symm_lib(kwargs.pop("extern_libs", None), trace)
    return kernel[grid](*args, extern_libs=libs, **kwargs)


# ---- prepared launches ---------------------------------------------------------
#
# kernel[grid](...) runs JITFunction.run on every call: bind the arguments,
# work out each one's specialisation, build the cache key, look the compiled
# kernel up, check the globals it used, build the launch metadata, and only
# then call the launcher. For a kernel launched again and again with the same
# arguments every step but the last gives the same answer each time, and for a
# short kernel they cost more host time than the GPU spends (the all-reduce
# example: 37.8 us per call back to back against 22.5 us replayed from a CUDA
# graph). prepare() does them once.

# The Triton versions whose JITFunction.run was read for the one call that
# PreparedLaunch repeats (the same in 3.4, 3.5 and 3.6):
#   compiled.run(grid_0, grid_1, grid_2, stream, compiled.function,
#                compiled.packed_metadata, launch_metadata,
#                knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook,
#                *values of every kernel parameter, in order)
# Other versions get the ordinary launch on every call (same results).
_CHECKED_TRITON = ((3, 4), (3, 6))


def _triton_version():
    import triton
    v = triton.__version__.split("+")[0].split(".")
    try:
        return int(v[0]), int(v[1])
    except (IndexError, ValueError):
        return None


class PreparedLaunch:
    """A launch of one kernel with its arguments bound once (see prepare()).

    Calling it (no arguments) launches the kernel on the current stream of
    the device that was current at prepare time, so it is captured by a CUDA
    graph like any launch. Attributes: kernel, grid, args, kwargs (with the
    symm extern_libs added); fast (True: the compiled kernel is launched
    directly; False: every call is an ordinary launch()) and reason (why not
    fast, else None)."""

    fast = True
    reason = None

    def __init__(self, kernel, grid, args, kwargs, values, compiled, run, driver, knobs):
        self.kernel, self.grid, self.args, self.kwargs = kernel, grid, args, kwargs
        self.compiled = compiled
        g = tuple(grid) + (1, 1)
        self._g0, self._g1, self._g2 = g[0], g[1], g[2]
        self._values = values
        self._device = driver.get_current_device()
        # torch._C._cuda_getCurrentRawStream on CUDA (what Triton itself
        # calls): one C call returning the stream handle, where
        # torch.cuda.current_stream().cuda_stream builds a Stream object
        self._get_stream = driver.get_current_stream
        self._knobs = knobs
        self._chain = getattr(knobs, "HookChain", None)
        # the kernel's live list: hooks added later run too, as in Triton
        self._pre_run_hooks = getattr(kernel, "pre_run_hooks", ())
        self._run = run
        self._function = compiled.function
        self._packed = compiled.packed_metadata

    def __call__(self):
        for hook in self._pre_run_hooks:
            hook(*self.args, **self.kwargs)
        stream = self._get_stream(self._device)
        rt = self._knobs.runtime
        enter, leave = rt.launch_enter_hook, rt.launch_exit_hook
        chain = self._chain
        # Triton 3.5+ keeps the hooks in a HookChain that is never None; an
        # empty chain does nothing, so the launcher is told there is none and
        # no metadata is built. With a hook set (a profiler), the metadata is
        # made per call as JITFunction.run makes it.
        if ((enter is None or (type(enter) is chain and not enter.calls))
                and (leave is None or (type(leave) is chain and not leave.calls))):
            self._run(self._g0, self._g1, self._g2, stream, self._function, self._packed,
                      None, None, None, *self._values)
        else:
            meta = self.compiled.launch_metadata(self.grid, stream, *self._values)
            self._run(self._g0, self._g1, self._g2, stream, self._function, self._packed,
                      meta, enter, leave, *self._values)

    def __repr__(self):
        name = getattr(self.kernel, "__name__", type(self.kernel).__name__)
        return "<%s %s[%s] %s>" % (type(self).__name__, name, self.grid,
                                   "fast" if self.fast else "launch() each call: " + self.reason)


class _LaunchEachCall(PreparedLaunch):
    """The fallback: every call is launch(kernel, grid, *args, **kwargs)."""

    fast = False

    def __init__(self, kernel, grid, args, kwargs, reason):
        self.kernel, self.grid, self.args, self.kwargs = kernel, grid, args, kwargs
        self.compiled = None
        self.reason = reason

    def __call__(self):
        launch(self.kernel, self.grid, *self.args, **self.kwargs)  # kwargs carry the extern_libs chosen


def _bind(kernel, args, kwargs):
    """The value of every kernel parameter in order, as JITFunction.run's
    binder gives them (keyword arguments that are not parameters are
    compile options). Raises TypeError for missing or extra arguments."""
    import inspect
    sig = inspect.signature(kernel.fn)
    params = {k: v for k, v in kwargs.items() if k in sig.parameters}
    bound = sig.bind(*args, **params)
    bound.apply_defaults()
    return tuple(bound.arguments[name] for name in sig.parameters)


def _missing_before_compile(kernel):
    """Why the fast path cannot be used with this kernel and Triton (checked
    on classes, before anything is compiled), or None."""
    try:
        from triton import knobs
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime.jit import JITFunction
    except ImportError as e:
        return "Triton internals missing (%s)" % e
    v = _triton_version()
    if v is None or not _CHECKED_TRITON[0] <= v <= _CHECKED_TRITON[1]:
        return "Triton %s not among the versions checked (%d.%d to %d.%d)" % (
            "unknown" if v is None else "%d.%d" % v, *_CHECKED_TRITON[0], *_CHECKED_TRITON[1])
    if not isinstance(kernel, JITFunction):
        return "%s is not a JITFunction" % type(kernel).__name__
    # (CompiledKernel.run is a property in 3.5+, made on first access in 3.4:
    # asked of the compiled kernel itself, below)
    for owner, a in ((JITFunction, "warmup"), (CompiledKernel, "launch_metadata")):
        if not hasattr(owner, a):
            return "%s.%s missing" % (owner.__name__, a)
    rt = getattr(knobs, "runtime", None)
    if rt is None or not hasattr(rt, "launch_enter_hook") or not hasattr(rt, "launch_exit_hook"):
        return "triton.knobs.runtime.launch_enter_hook/launch_exit_hook missing"
    return None


def prepare(kernel, grid, *args, **kwargs):
    """Bind a launch once, to repeat it cheaply: prepare(kernel, grid, *args,
    **kwargs)() does what launch(kernel, grid, *args, **kwargs) does, with
    the per-call work of kernel[grid](...) (argument binding, specialisation,
    cache look-up) done here, once.

    The kernel is compiled now (Triton's warmup: nothing is launched, so
    kernels keeping state on the GPU see no extra call) and each call of the
    returned PreparedLaunch launches it on the current stream, CUDA graph
    capture included.

    The arguments are fixed: the same objects are passed at every call.
    Tensors are fine to refill in place (the launcher reads their data
    pointers at each call), but not to replace or re-point (t.set_(), .data =):
    the kernel was specialised on their alignment. Scalars and the grid (a
    callable grid is evaluated now) never change; for other values prepare
    again. Call it with the same device current as at prepare time. Unlike
    kernel[grid](...), it does not re-check at each call that the globals
    the kernel read are unchanged.

    trace=True links the traced bitcode (None: $SYMM_TRACE; docs/trace.md).

    Raises TypeError at once for arguments that do not fit the kernel's
    parameters. Where the installed Triton lacks the internals this relies
    on (see _CHECKED_TRITON) or the kernel is not a plain @triton.jit
    function (an autotuner, the interpreter), the returned object's calls are
    ordinary launch() calls (.fast is False, .reason says why)."""
    # extern_libs first, as launch() passes it: Triton's cache key holds the
    # options in the order given, and prepare should find launch()'s kernel
    trace = _pop_trace(kernel, kwargs)
    libs = _with_symm_lib(kwargs.pop("extern_libs", None), trace)
    kwargs = dict(extern_libs=libs, **kwargs)
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        JITFunction = ()
    # before anything else, on either path (an autotuner's arguments are
    # completed by its configs: not checked here)
    values = _bind(kernel, args, kwargs) if isinstance(kernel, JITFunction) else None
    reason = _missing_before_compile(kernel)
    if reason is not None:
        return _LaunchEachCall(kernel, grid, args, kwargs, reason)
    from triton import knobs
    from triton.runtime import driver
    try:
        # a property in Triton 3.5+, an attribute before: asking for it makes
        # the driver (an error without a GPU, as a launch would give)
        drv = driver.active
        drv.get_current_device, drv.get_current_stream
    except AttributeError as e:
        return _LaunchEachCall(kernel, grid, args, kwargs, "Triton driver: %s" % e)
    if callable(grid):
        # as JITFunction.run calls it: with the parameters by name
        grid = grid(dict(zip(_param_names(kernel), values)))
    grid = tuple(grid)
    if not 1 <= len(grid) <= 3:
        raise ValueError("grid %r: expected 1 to 3 dimensions" % (grid,))
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    if hasattr(compiled, "result"):      # an async compile's future
        compiled = compiled.result()
    if compiled is None:                 # a jit_cache_hook declined the compile
        return _LaunchEachCall(kernel, grid, args, kwargs, "warmup compiled nothing")
    for a in ("run", "packed_metadata", "launch_metadata"):
        if not hasattr(compiled, a):
            return _LaunchEachCall(kernel, grid, args, kwargs, "%s.%s missing"
                                   % (type(compiled).__name__, a))
    # .run loads the binary into the current context and builds the launcher,
    # setting .function: done now, not in the first call, which may be
    # inside a CUDA graph capture
    run = compiled.run
    if getattr(compiled, "function", None) is None:
        return _LaunchEachCall(kernel, grid, args, kwargs, "no CUfunction after loading")
    return PreparedLaunch(kernel, grid, args, kwargs, values, compiled, run, drv, knobs)


def _param_names(kernel):
    import inspect
    return list(inspect.signature(kernel.fn).parameters)
