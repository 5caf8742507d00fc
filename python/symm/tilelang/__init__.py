"""symm.tilelang: symm's device API inside TileLang kernels, with TileScale's
distributed primitives (put_warp, put_block, get_warp, get_block, st / ld
with scope and sem, wait_eq / ne / gt / ge / lt / le locally or on a peer,
barrier_blocks, get_rank, get_num_ranks, fences) on upstream TileLang.

Every primitive becomes a call of a symm device function in the generated
CUDA (T.call_extern), with the context as an ordinary kernel parameter: no
fork of TileLang, no __constant__ table filled per module. Importing this
package registers a TileLang CUDA post-processing hook that includes
symm_tilelang.h (which includes symm/symm_device.h) in sources that call
symm; compile() passes the include folders to nvcc.

    import tilelang.language as T
    import symm, symm.tilelang as sT

    @T.prim_func
    def shift(ctx: T.uint64, src: T.Tensor((N,), "float16"), dst: T.Tensor((N,), "float16"),
              sig: T.Tensor((1,), "uint64")):
        with T.Kernel(1, threads=128):
            me, n = sT.get_rank(ctx), sT.get_num_ranks(ctx)
            sT.put_signal_block(ctx, src, dst, N, sig[0], 1, "add", dst_pe=(me + 1) % n)
            sT.wait_ge(ctx, sig[0], 1)          # every thread; acquire

    kernel = sT.compile(shift)                   # just in time, on this GPU
    kernel(symm.ctx(), src, dst, sig)            # symmetric torch tensors

    sT.build(shift, "build-tilelang", "shift")   # ahead of time, no GPU: cubin (arch=90: sm_90a) and its
                                                 # manifest.json entry (backend="nccl"/"nvshmem")
    symm.cubin.load("build-tilelang")["shift"](symm.ctx(), src, dst, sig)   # no TileLang

Conventions (TileScale's where they fit): the context comes first; put /
get take (src, dst, size, dst_pe / src_pe) with size in elements of the
source's type (nbytes= for bytes); addresses are buffers, elements (buf[i])
or T.address_of(buf[i]); PE -1 is this PE; scope is "cta" / "gpu" / "sys",
sem "weak" / "relaxed" / "acquire" / "release" / "volatile". Who executes a
call is CUDA's rule: plain calls are one thread's (every thread reaching it
performs it: put a thread test around it to run it once), _warp calls need
a whole warp, _block calls the whole block, each with the same arguments.
Ordering (which call publishes whose data, one thread's wait plus a block
barrier, reusing buffers) and a whole program with its host side: see
docs/tilelang.md.
"""
try:
    import tilelang  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "symm.tilelang needs TileLang (tilelang==0.1.15), which is not installed: pip install "
        "'symm[tilelang]' (in a source checkout: pip install '.[tilelang]'). Kernels built ahead of "
        "time run without it through symm.cubin."
    ) from _e

from ._amo import *  # noqa: F401,F403,E402
from ._coll import *  # noqa: F401,F403,E402
from ._rma import *  # noqa: F401,F403,E402
from ._sync import *  # noqa: F401,F403,E402
from ._build import (BACKENDS, PASS_CONFIGS, SHIM_DIR, TMA_PASS_CONFIGS, Lowered, backend_flags,  # noqa: E402,F401
                     backend_include_dir, build, compile, compile_flags, dlink_command, include_dirs,
                     install_hook, lower, nvcc_command, with_tma, nvshmem_device_library, pass_configs, running_backend,
                     target_of, tilelang_include_dirs)
from ._args import ALGOS, CMPS, COLL_DTYPES, REDOPS, SCOPES, SEMS, SIGNAL_OPS  # noqa: E402,F401

install_hook()
