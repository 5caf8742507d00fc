"""symm: GPU-initiated communication over symmetric memory, from Python.

A thin ctypes layer over libsymm (no compiled extension), with torch tensors
over symmetric memory and, in symm.triton, device functions for Triton
kernels. `import symm` needs neither torch nor a GPU; torch is imported by the
calls that take or return tensors, libsymm on the first call that needs it.

    import torch, symm
    symm.init()                                  # torchrun / symmrun environment
    x = symm.tensor((1024,), torch.bfloat16)     # same offset on every PE
    peer = symm.get_peer_tensor(x, (symm.my_pe() + 1) % symm.n_pes())
    peer.copy_(x)                                # store into the next PE's copy
    symm.barrier()
    symm.free_tensor(x)
    symm.finalize()

Stream collectives on tensors (current torch stream): all_reduce,
reduce_scatter, all_gather, all_to_all, all_to_allv, broadcast. MoE token
dispatch and combine: symm.moe (pplx-kernels' AllToAll, and HighThroughput;
symm.moe.deep_ep: DeepEP's Buffer; imported on their own, they need torch).

Errors from C raise SymmError subclasses (symm.MismatchError, ...) carrying
the C message; bad arguments raise TypeError/ValueError before anything runs.
"""
from ._errors import *  # noqa: F401,F403 - the exception classes
from ._errors import SymmError, error_class  # noqa: F401
from ._lib import (  # noqa: F401
    LibraryNotFoundError, bitcode_path, include_dir, library_path, nvshmem_device_bitcode,
)
from ._runtime import (  # noqa: F401
    Team, backend, backend_caps, backend_module_init, barrier, barrier_on_stream, ctx, device, finalize, free,
    get_unique_id, gpu_pes,
    heap_info, host_allgather, host_broadcast, init, initialized, malloc, multicast_allowed,
    my_pe, n_pes, peer_ptr, scope, sm_share, team_node, team_world,
)
from ._tensor import (  # noqa: F401
    free_tensor, get_multicast_tensor, get_peer_tensor, is_symmetric, tensor, zeros,
)
from ._coll import (  # noqa: F401
    all_gather, all_reduce, all_to_all, all_to_allv, broadcast, last_algo, reduce_scatter,
)

__version__ = "0.1.0"
