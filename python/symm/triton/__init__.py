"""symm.triton: the symm device API inside @triton.jit kernels.

Every function of include/symm/symm_device.h and symm_device_coll.h is here
under its C name without `symm_` (symm_put_block -> symm.triton.put_block),
implemented by calling libsymm_device.bc. Link the bitcode when launching:

    kernel[grid](..., extern_libs=symm.triton.extern_libs())
    # or: symm.triton.launch(kernel, grid, ...)

(without it ptxas stops with "Unresolved extern function 'symm_...'"). The
first argument of every call is the device context, symm.ctx() on the host,
passed to the kernel as an integer.

Who executes a call (a Triton program is one CUDA block of num_warps * 32
threads, and Triton runs scalar code in every thread):

  block    *_block, *_grid (collectives too): every thread of the program
           calls the C function together. Reach it from code that every
           thread of the program reaches (not under a tid() test).
  warp     *_warp, *_warp_nbi: warp 0 calls it.
  thread0  the other thread-scope calls with effects (p, st, put, get,
           put_signal, signal_op, atomics other than atomic_fetch, fence,
           quiet, barrier): thread 0 calls it. A result (atomic_fetch_add,
           compare_swap...) is broadcast to every thread.
  each     reads without side effects (ctx_my_pe, ctx_n_pes, ctx_ptr, g, ld,
           atomic_fetch, signal_fetch, signal_wait_until, wait_until): every
           thread calls it and gets the value; tensor arguments are handled
           element-wise (vectorised remote loads).

warp and thread0 calls sit between two program barriers (tl.debug_barrier):
everything the program's threads did before is ordered before the call
(so a thread-0 signal_op after all threads stored data releases that data),
and the call's effect (a get's data, a quiet) is in place for every thread
after it. They take scalar arguments only. symm.triton.MODES names each
function's class; symm.triton.raw has the same functions with no gating.

Fast data movement: translate a pointer with ctx_ptr (it keeps the pointer
type) and use tl.load / tl.store / tl.atomic_* on the result, e.g.

    peer = symm.triton.ctx_ptr(ctx, dst_ptr, pe)
    tl.store(peer + offs, vals, mask=mask)
    symm.triton.fence(ctx)       # or quiet / a signal / a barrier

Constants for the int parameters: CMP_*, SIGNAL_SET/ADD, SEM_*, SCOPE_*,
DTYPE_*, OP_*, ALGO_* (tl.constexpr).
"""
try:
    import triton
    import triton.language as tl
except ImportError as _e:
    raise ImportError("symm.triton needs Triton 3.4 to 3.6, which is not installed (%s): "
                      "pip install 'symm[triton]' (in a source checkout: pip install '.[triton]')" % _e) from _e


def _version(v):
    return tuple(int(x) for x in v.split("+")[0].split(".")[:2] if x.isdigit())


if _version(triton.__version__) < (3, 4):
    raise ImportError("symm.triton needs Triton 3.4 or newer (builtins take _semantic); found %s: "
                      "pip install 'symm[triton]' (in a source checkout: pip install '.[triton]')"
                      % triton.__version__)

from . import raw  # noqa: E402,F401
from ._api import *  # noqa: E402,F401,F403
from ._api import __all__ as _api_all  # noqa: E402
from ._api import ctx_my_pe, ctx_n_pes, ctx_ptr  # noqa: E402
from ._launch import PreparedLaunch, extern_libs, launch, prepare  # noqa: E402,F401
from ._signatures import FUNCTIONS  # noqa: E402
from ._util import broadcast_from_thread0, tid  # noqa: E402,F401
from .. import _consts  # noqa: E402

# Short names for the context queries.
my_pe = ctx_my_pe
n_pes = ctx_n_pes
peer_ptr = ctx_ptr

MODES = {name: mode for name, _, _, mode in FUNCTIONS}

# The enums as tl.constexpr, from symm._consts (the C headers): CMP_*,
# SIGNAL_*, SEM_*, SCOPE_* (symm_types.h); DTYPE_*, OP_*, ALGO_*
# (symm_coll_types.h; device calls run ALGO_PUSH as TWOSHOT: it is a stream
# algorithm).
_CONST_PREFIXES = ("CMP_", "SIGNAL_", "SEM_", "SCOPE_", "DTYPE_", "OP_", "COLL_ALGO_")
CONSTANTS = {(n[len("COLL_"):] if n.startswith("COLL_ALGO_") else n): tl.constexpr(v)
             for n, v in vars(_consts).items()
             if n.startswith(_CONST_PREFIXES) and not n.endswith("_COUNT")}
globals().update(CONSTANTS)

__all__ = list(_api_all) + [
    "raw", "extern_libs", "launch", "prepare", "PreparedLaunch", "tid", "broadcast_from_thread0",
    "my_pe", "n_pes", "peer_ptr", "MODES", "CONSTANTS",
] + sorted(CONSTANTS)
