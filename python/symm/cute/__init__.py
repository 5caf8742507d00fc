"""symm.cute: the symm device API inside CuTe DSL kernels.

Every function of include/symm/symm_device.h and symm_device_coll.h is
callable from @cute.kernel code (and the @cute.jit functions it calls),
declared through CuTe DSL's own external-function mechanism
(cutlass.cute.extern) over libsymm_device_sm90.bc / _sm80.bc. The context is
an ordinary kernel argument (cutlass.Int64, symm.ctx() on the host): there is
no per-module initialisation and no global state.

    import cutlass, cutlass.cute as cute, symm.cute as sc

    @cute.kernel
    def ring(ctx: cutlass.Int64, dst: cute.Tensor, src: cute.Tensor, sig: cute.Pointer):
        me, n = sc.my_pe(ctx), sc.n_pes(ctx)
        nxt = (me + 1) % n
        sc.put_signal_block(ctx, dst, src, sig, 1, sc.SIGNAL_ADD, nxt)   # every thread
        sc.signal_wait_until(ctx, sig, sc.CMP_GE, 1)                     # any thread

Who calls what (as in CUDA C, one call per thread that makes it):
  *_block   every thread of the CTA, together, with the same arguments
  *_warp    all 32 lanes of a warp, together, with the same arguments
  *_grid    every thread of the `nblocks` CTAs taking part (collectives)
  the rest  any thread, alone (each thread that calls it performs it)

Two layers:
  symm.cute        calls on tensor views and typed cute.Pointers: bulk moves of
                   min(size(dst), size(src)) elements with matching element
                   types (checked when the kernel is compiled), one-element
                   families (p, g, ld, st, wait_until, atomic_*) dispatched by
                   element type, collectives with type and count from the views
  symm.cute.raw    every function with its C signature (bytes, type codes,
                   one function per element type); pointers may be integers

Host side: symm.cute.host (symmetric torch tensors as CuTe tensors:
as_tensor, get_peer_tensor, get_multicast_tensor, pointer), symm.cute.compile
(cute.compile with the bitcode of the target architecture), symm.cute.Kernel
(one launch description, compiled just in time or ahead of time: see
symm.cute.aot and symm.cubin).
"""
try:
    import cutlass  # noqa: F401
    import cutlass.cute  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "symm.cute needs NVIDIA CuTe DSL (the nvidia-cutlass-dsl package), which is not "
        "installed: pip install 'symm[cute]' (in a source checkout: pip install '.[cute]'; or: "
        "pip install 'nvidia-cutlass-dsl[cu13]==4.8.1'). "
        "Kernels compiled ahead of time run without it through symm.cubin."
    ) from _e

from . import raw  # noqa: E402
from ._bitcode import target  # noqa: E402
from ._signatures import CONSTANTS, FUNCTIONS  # noqa: E402
from ._views import *  # noqa: E402,F401,F403
from ._views import __all__ as _views_all  # noqa: E402

SCOPES = {name: scope for name, _, _, scope in FUNCTIONS}

# enum symm_cmp, symm_signal_op, symm_sem, symm_scope (symm_types.h), symm_dtype,
# symm_redop and symm_coll_algo (symm_coll_types.h): CMP_GE, SIGNAL_ADD, ...
globals().update({_name: _value for _name, _value, _ in CONSTANTS})

# Every raw function whose name the view layer does not take (fence, quiet,
# barrier*, sync_block, coll_barrier_*, ctx_*, and the typed p_f32, ...).
for _name in raw.__all__:
    if _name not in globals():
        globals()[_name] = getattr(raw, _name)

from . import host  # noqa: E402
from .host import arch_name, compile  # noqa: E402,F401
from ._kernel import Kernel, Ptr, Tma, tma_smem_layout  # noqa: E402,F401

__all__ = sorted(set(_views_all) | set(raw.__all__) | {_n for _n, _, _ in CONSTANTS} | {
    "raw", "host", "target", "SCOPES", "FUNCTIONS", "compile", "arch_name", "Kernel", "Ptr", "Tma",
    "tma_smem_layout"})
del _name
