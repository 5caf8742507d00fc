"""The host API: init/finalize, PEs and teams, symmetric allocations, barriers.

A thin layer over libsymm through ctypes. Every call that can fail raises a
SymmError subclass carrying the C message. Collective calls (init, malloc,
free, barrier, finalize) must be made by every PE in the same order, as in C.
torch is imported only by the calls that take or make tensors.
"""
import ctypes
import os
import sys

from . import _consts, _lib
from ._errors import raise_for

_c_void_p = ctypes.c_void_p


def _check(call, status):
    if status != 0:
        raise_for(call, status, _lib.load())


def _c():
    return _lib.load()


# ---------------------------------------------------------------------------
# Allocations made through this package, so finalize and scopes can release
# them and tensors over freed memory can be disabled.
# ---------------------------------------------------------------------------

class _Allocation:
    __slots__ = ("ptr", "nbytes", "invalidators")

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes
        self.invalidators = []  # called when the memory goes away


_allocs = {}        # key -> _Allocation, in allocation order (same on every PE)
_scopes = []        # open scope() blocks, innermost last
_zero_keys = [0]    # zero-byte allocations have no pointer: give them keys < 0


def _register(ptr, nbytes):
    if ptr:
        key = ptr
    else:
        _zero_keys[0] -= 1
        key = _zero_keys[0]
    a = _Allocation(ptr, nbytes)
    _allocs[key] = a
    if _scopes:
        _scopes[-1].append(key)
    return key, a


def _invalidate(a):
    for fn in a.invalidators:
        try:
            fn()
        except Exception:  # a tensor that is already gone
            pass
    a.invalidators.clear()


def _sync_torch():
    """Wait for torch's queued work on symm's device before memory goes away."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and device() >= 0:
        torch.cuda.synchronize(device())


# ---------------------------------------------------------------------------
# Initialisation
# ---------------------------------------------------------------------------

def get_unique_id():
    """Create the bootstrap root in this process and return its id (bytes).

    Call it in exactly one process (the future PE 0), send the bytes to the
    others, and have every process call init(uid=..., rank=..., world=...)."""
    uid = _lib.UniqueId()
    _check("symm_get_unique_id", _c().symm_get_unique_id(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))  # NULs included


def _init_uid(uid, rank, world):
    if not isinstance(uid, (bytes, bytearray)) or len(uid) != _lib.SYMM_UNIQUE_ID_BYTES:
        raise TypeError("uid must be the %d bytes returned by symm.get_unique_id()"
                        % _lib.SYMM_UNIQUE_ID_BYTES)
    if not isinstance(rank, int) or not isinstance(world, int):
        raise TypeError("rank and world must be ints")
    if world < 1 or not 0 <= rank < world:
        raise ValueError("rank %d is outside [0, world=%d)" % (rank, world))
    u = _lib.UniqueId()
    ctypes.memmove(ctypes.addressof(u), bytes(uid), ctypes.sizeof(u))
    _check("symm_init_with_uid", _c().symm_init_with_uid(ctypes.byref(u), rank, world))


def _init_group(group):
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("symm.init(group=...): torch.distributed is not initialised; call "
                           "torch.distributed.init_process_group() first, or symm.init() to use "
                           "the launcher's environment")
    if group is True:
        group = dist.group.WORLD
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("symm.init(group=...): this process is not a member of the group")
    src = 0 if group is None or group is dist.group.WORLD else dist.get_global_rank(group, 0)
    # Group rank 0 makes the id; a failure there is sent to the others too, so
    # nobody waits for an id that will never come.
    msg = [None]
    if rank == 0:
        try:
            msg[0] = ("ok", get_unique_id())
        except Exception as e:  # noqa: BLE001 - forwarded, then re-raised
            msg[0] = ("error", str(e))
            dist.broadcast_object_list(msg, src=src, group=group)
            raise
    dist.broadcast_object_list(msg, src=src, group=group)
    if msg[0][0] != "ok":
        from ._errors import BootstrapError
        raise BootstrapError("symm.init(group=...)", BootstrapError.status,
                             "group rank 0 could not create the unique id: " + msg[0][1])
    _init_uid(msg[0][1], rank, world)


def init(*, group=None, uid=None, rank=None, world=None):
    """Join the job. Collective: every PE calls it once.

    symm.init()                          from the launcher's environment (torchrun,
                                         symmrun, mpirun, srun; none: one PE)
    symm.init(group=pg)                  over an initialised torch.distributed group
                                         (group=True: the default group); group rank 0
                                         creates the id and broadcasts it over the group
    symm.init(uid=b, rank=r, world=n)    with an id from symm.get_unique_id() that the
                                         caller distributed

    Each PE uses GPU LOCAL_RANK % device_count (symm.device()); if torch is
    imported, its current CUDA device is set to it. Without a GPU this raises
    NoDeviceError (unless SYMM_BACKEND=host).
    """
    if group is not None and uid is not None:
        raise ValueError("symm.init: pass group= or uid=, not both")
    _lib.set_library_defaults()
    if group is not None:
        _init_group(group)
    elif uid is not None:
        if rank is None or world is None:
            raise ValueError("symm.init(uid=...) needs rank= and world=")
        _init_uid(uid, rank, world)
    else:
        if rank is not None or world is not None:
            raise ValueError("symm.init: rank= and world= go with uid=")
        _check("symm_init", _c().symm_init())
    torch = sys.modules.get("torch")
    if torch is not None and device() >= 0 and torch.cuda.is_available():
        torch.cuda.set_device(device())


def finalize():
    """Release everything symm holds. Collective.

    Symmetric memory still allocated is freed: tensors made by symm.tensor()
    become empty (views taken from them must not be used any more)."""
    if not initialized():
        _check("symm_finalize", _c().symm_finalize())  # raises NotInitializedError
    _sync_torch()
    for a in list(_allocs.values()):
        _invalidate(a)
    _allocs.clear()
    _scopes.clear()
    _check("symm_finalize", _c().symm_finalize())


def initialized():
    """True between a successful init() and finalize()."""
    return bool(_c().symm_initialized())


def my_pe():
    """This PE's index in the world (-1 before init)."""
    return _c().symm_my_pe()


def n_pes():
    """The number of PEs (-1 before init)."""
    return _c().symm_n_pes()


def device():
    """The CUDA device ordinal this PE uses (-1 before init or without a GPU)."""
    return _c().symm_device()


def gpu_pes():
    """The PEs of this node on this PE's GPU, this one included (1: the GPU is
    its own). Several PEs on one GPU is how kernels are developed on one GPU."""
    n = ctypes.c_int()
    _check("symm_gpu_pes", _c().symm_gpu_pes(ctypes.byref(n)))
    return n.value


def sm_share():
    """The SMs a grid of this PE that waits on peers may fill (the GPU's SMs,
    divided among the PEs sharing it; the same on every PE): size such grids
    (device barriers, grid-scope collectives, spinning on signals) with it."""
    n = ctypes.c_int()
    _check("symm_sm_share", _c().symm_sm_share(ctypes.byref(n)))
    return n.value


def backend():
    """The backend of this run ("native", "nvshmem", "nccl", "host"; SYMM_BACKEND),
    or None before init."""
    name = _c().symm_backend_name()
    return name.decode() if name else None


def compile_backend():
    """The backend a kernel compiled now will meet (symm.cute's and
    symm.tilelang's default): the running symm's, else $SYMM_BACKEND, which
    symm.init will pick, else native; "host" (no device calls) and names that
    are not a backend mean native."""
    try:
        name = backend()
    except Exception:  # noqa: BLE001 - no libsymm here: the environment decides
        name = None
    name = name or os.environ.get("SYMM_BACKEND") or "native"
    return name if name in _lib.BACKENDS else "native"


def backend_caps():
    """What the backend does here: a set of names of symm.CAP_* ("peer_ldst",
    "remote_put", "remote_get", "remote_signal", "remote_amo", "remote_quiet",
    "coll", "multi_node"; docs/backends.md)."""
    caps = ctypes.c_uint32()
    _check("symm_backend_caps", _c().symm_backend_caps(ctypes.byref(caps)))
    return {name[len("SYMM_CAP_"):].lower() for name, bit in _consts.ENUMS["symm_backend_cap"].items()
            if caps.value & bit}


def backend_module_init(module):
    """Set up a loaded CUDA module (a CUmodule handle, int) for the backend's
    device library; symm.triton does it for every module Triton loads."""
    _check("symm_backend_module_init", _c().symm_backend_module_init(ctypes.c_void_p(int(module))))


# ---------------------------------------------------------------------------
# Teams and device contexts
# ---------------------------------------------------------------------------

class Team:
    """An ordered set of PEs with its own device context (symm_team_t)."""

    def __init__(self, handle, name):
        self._h, self.name = handle, name

    def my_pe(self):
        return _c().symm_team_my_pe(self._h)

    def n_pes(self):
        return _c().symm_team_n_pes(self._h)

    def translate_pe(self, pe, dst):
        """The index in team `dst` of this team's PE `pe`, or -1."""
        return _c().symm_team_translate_pe(self._h, pe, dst._h)

    def ctx(self):
        """The team's device context: a device address (int) to pass to kernels."""
        out = _c_void_p()
        _check("symm_team_ctx", _c().symm_team_ctx(self._h, ctypes.byref(out)))
        return out.value

    def __repr__(self):
        return "<symm.Team %s>" % self.name


def _team(fn, name):
    h = getattr(_c(), fn)()
    if not h:
        _check(fn, -2)  # NULL before init
    return Team(h, name)


def team_world():
    return _team("symm_team_world", "world")


def team_node():
    return _team("symm_team_node", "node")


def ctx(team=None):
    """The device context (int device address) of `team`, default the world.

    Pass it to kernels: CUDA C takes it as `const symm_ctx_t *`, Triton as an
    integer argument that symm.triton functions take first."""
    if team is not None:
        return team.ctx()
    out = _c_void_p()
    _check("symm_ctx", _c().symm_ctx(ctypes.byref(out)))
    return out.value


# ---------------------------------------------------------------------------
# Symmetric memory as raw addresses (symm.tensor() builds torch tensors on it)
# ---------------------------------------------------------------------------

def _as_size(n, what):
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError("%s must be an int, got %r" % (what, type(n).__name__))
    if n < 0:
        raise ValueError("%s must be >= 0, got %d" % (what, n))
    return n


def malloc(nbytes, *, zero=False, alignment=None):
    """Allocate nbytes on every PE's symmetric heap; returns the address (int,
    0 for 0 bytes). Collective, same nbytes on every PE. zero=True zeroes it;
    alignment (a power of two) replaces the default 256 bytes."""
    return _malloc(nbytes, zero, alignment)[1].ptr


def _malloc(nbytes, zero=False, alignment=None):
    """malloc() returning (registry key, _Allocation)."""
    _as_size(nbytes, "nbytes")
    out = _c_void_p()
    if alignment is not None:
        _as_size(alignment, "alignment")
        if alignment == 0 or alignment & (alignment - 1):
            raise ValueError("alignment must be a power of two, got %d" % alignment)
        if zero:
            raise ValueError("malloc: zero= and alignment= cannot be combined")
        _check("symm_align", _c().symm_align(alignment, nbytes, ctypes.byref(out)))
    elif zero:
        _check("symm_calloc", _c().symm_calloc(1, nbytes, ctypes.byref(out)))
    else:
        _check("symm_malloc", _c().symm_malloc(nbytes, ctypes.byref(out)))
    return _register(out.value or 0, nbytes)


def _free_key(key):
    a = _allocs.get(key)
    if a is None:
        raise ValueError("symm.free: %#x is not a live allocation made by symm" % key
                         if key > 0 else "symm.free: not a live allocation made by symm")
    _sync_torch()
    # The C free first: when it fails (arguments differ between PEs, a peer
    # died) the allocation is still live and stays registered, so a later
    # free() or finalize() releases it.
    _check("symm_free", _c().symm_free(a.ptr or None))
    _invalidate(a)
    del _allocs[key]


def _settle(key, err, what):
    """Collective end of a call that allocated `key` and then did local work
    that may have failed (err: its exception, or None) on some PEs: if it
    failed anywhere, every PE frees the allocation (a free on the failing PEs
    alone would be a collective the others never join) and raises; the
    failing PE raises its own exception."""
    flags = host_allgather(b"\x01" if err is not None else b"\x00")
    bad = [pe for pe, f in enumerate(flags) if f != b"\x00"]
    if not bad:
        return
    _free_key(key)
    if err is not None:
        raise err
    from ._errors import SymmError
    raise SymmError(what, None, "PE(s) %s failed after allocating; the memory is freed on every PE"
                    % ", ".join(str(pe) for pe in bad), strerror="failed on another PE")


def free(ptr):
    """Free an allocation made by malloc() (or the memory under a symm tensor).
    Collective, same address on every PE."""
    _free_key(int(ptr))


def peer_ptr(ptr, pe):
    """The address of PE pe's copy of the symmetric address ptr, usable by this
    PE's GPU; 0 when ptr is not symmetric or pe cannot be reached."""
    return _c().symm_ptr(ptr, pe) or 0


def heap_info():
    """(bytes mapped, most bytes the heap may grow to), per PE."""
    mapped, limit = ctypes.c_size_t(), ctypes.c_size_t()
    _check("symm_heap_info", _c().symm_heap_info(ctypes.byref(mapped), ctypes.byref(limit)))
    return mapped.value, limit.value


def multicast_allowed():
    """Whether this process may use multicast (NVLS): SYMM_ENABLE_MULTICAST=1
    and none of NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1,
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1."""
    return bool(_c().symm_multicast_allowed())


class scope:
    """A block whose symmetric allocations are freed when it ends.

        with symm.scope():
            a = symm.tensor((n,), torch.float32)
            ...
        # a is freed here (collectively), even if the block raised

    Allocations freed earlier inside the block are skipped. Nested scopes free
    what they made themselves. Every PE must leave the block together."""

    def __init__(self):
        self._keys = None

    def __enter__(self):
        self._keys = []
        _scopes.append(self._keys)
        return self

    def __exit__(self, *exc):
        if _scopes and _scopes[-1] is self._keys:
            _scopes.pop()
        elif self._keys in _scopes:
            _scopes.remove(self._keys)
        for key in reversed(self._keys):
            if key in _allocs:
                _free_key(key)
        return False


# ---------------------------------------------------------------------------
# Synchronisation and host-side exchange
# ---------------------------------------------------------------------------

def _stream_handle(stream):
    """A cudaStream_t (int) from None (torch's current stream, else the legacy
    default stream), an int, or a torch.cuda.Stream."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and device() >= 0:
            return torch.cuda.current_stream(device()).cuda_stream
        return 0
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError("stream must be None, an int cudaStream_t or a torch.cuda.Stream")
    return handle


def barrier():
    """Wait for this PE's GPU work, then for every PE (symm_barrier_all). After
    it, every store any PE's kernels made before it is visible everywhere."""
    _check("symm_barrier_all", _c().symm_barrier_all())


def barrier_on_stream(stream=None, team=None):
    """A barrier across all PEs (or `team`) ordered on `stream` (default:
    torch's current stream): no host synchronisation, capturable in graphs."""
    s = _stream_handle(stream) or None
    if team is None:
        _check("symm_barrier_all_on_stream", _c().symm_barrier_all_on_stream(s))
    else:
        _check("symm_team_barrier_on_stream", _c().symm_team_barrier_on_stream(team._h, s))


def host_broadcast(data, root=0):
    """PE root's bytes, on every PE (over the bootstrap network; small data
    only). Every PE passes bytes of the same length."""
    data = bytes(data)
    buf = ctypes.create_string_buffer(data, len(data))
    _check("symm_host_broadcast", _c().symm_host_broadcast(buf, len(data), root))
    return buf.raw


def host_allgather(data):
    """Every PE's bytes, as a list indexed by PE (small data; the lengths may
    differ between PEs: they are exchanged first)."""
    data = bytes(data)
    n = n_pes()
    if n < 1:
        _check("symm_host_allgather", -2)
    lens = _allgather_fixed(len(data).to_bytes(8, "little"), n)
    lens = [int.from_bytes(x, "little") for x in lens]
    most = max(lens)
    if most == 0:
        return [b""] * n
    padded = _allgather_fixed(data + bytes(most - len(data)), n)
    return [p[:k] for p, k in zip(padded, lens)]


def _allgather_fixed(data, n):
    mine = ctypes.create_string_buffer(data, len(data))
    out = ctypes.create_string_buffer(len(data) * n)
    _check("symm_host_allgather", _c().symm_host_allgather(mine, out, len(data)))
    return [out.raw[i * len(data):(i + 1) * len(data)] for i in range(n)]
