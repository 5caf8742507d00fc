"""Helpers for the symm.triton wrappers: thread index, scalar checks, the
broadcast of one thread's result to the whole program."""
import triton
import triton.language as tl
from triton.language import core
from triton.language.extra.cuda.utils import num_threads


@core.extern
def tid(_semantic=None):
    """The calling thread's index in the program (%tid.x; Triton launches
    one-dimensional blocks of num_warps * 32 threads)."""
    return core.inline_asm_elementwise("mov.u32 $0, %tid.x;", "=r", [], dtype=core.int32,
                                       is_pure=True, pack=1, _semantic=_semantic)


@core.builtin
def require_scalars(name, *args, _semantic=None):
    """Stop compilation when a one-thread call gets a tensor argument: one
    thread would then handle only the elements it holds."""
    name = core._unwrap_if_constexpr(name)
    for a in args:
        if isinstance(a, core.tensor) and a.type.is_block():
            raise TypeError(
                "symm.triton.%s runs in one thread of the program and takes scalars, got a "
                "tensor of shape %s; symm.triton.raw.%s applies the call element-wise in every "
                "thread that holds an element" % (name, [int(s) for s in a.shape], name))
    return None


@triton.jit
def broadcast_from_thread0(v):
    """Thread 0's value of v, in every thread of the program.

    Element 0 of a range as long as the program has threads lives in thread
    0, so a sum over that range with every other element zero is thread 0's
    value; the reduction crosses warps through shared memory, which also
    orders thread 0's work before every thread's next step."""
    NT: tl.constexpr = num_threads()
    idx = tl.arange(0, NT)
    return tl.sum(tl.where(idx == 0, v, 0), axis=0)


@core.builtin
def like_pointer(addr, like, _semantic=None):
    """The int64 address `addr` as a pointer of `like`'s type when `like` is a
    Triton pointer (so tl.load/tl.store take it), else the address itself."""
    like = _semantic.to_tensor(like)
    if like.type.scalar.is_ptr():
        return _semantic.cast(addr, like.type.scalar)
    return addr
