"""symm.triton.raw: every device function of libsymm_device.bc as a Triton
extern call, with no gating.

Each function here is the C function of the same name without `symm_`,
called through core.extern_elementwise (is_pure=False) by *every thread that
executes it*: with scalar arguments that is every thread of the program; with
tensor arguments, each thread calls it for the elements it holds (a tensor
smaller than the program's thread count is held by several threads, so
element calls repeat). The symm.triton functions of the same names add the
gating and barriers that make a call happen once per program where the C
call is thread- or warp-scoped; use raw when you gate yourself, e.g.

    if symm.triton.tid() == 0:
        symm.triton.raw.signal_op(ctx, sig, 1, symm.triton.SIGNAL_ADD, pe)

Argument conversion: pointers may be Triton pointers or int64 addresses (the
context is usually an int64 kernel argument); other arguments are cast to the
C parameter's type. Functions returning void return None; symm_ctx_ptr
returns an int64 address.
"""
from triton.language import core

from .. import _lib
from ._signatures import FUNCTIONS

LIB_NAME = "symm"

# C type -> Triton type of the extern call (pointers travel as int64; the
# bitcode takes `ptr`, and LLVM turns the integer back into a pointer when it
# inlines the call).
_SCALARS = {
    "int": core.int32, "int8_t": core.int8, "int16_t": core.int16, "int32_t": core.int32,
    "int64_t": core.int64, "uint8_t": core.uint8, "uint16_t": core.uint16,
    "uint32_t": core.uint32, "uint64_t": core.uint64, "size_t": core.uint64,
    "float": core.float32, "double": core.float64,
}


def triton_type(ctype):
    """The Triton dtype a C parameter or return type travels as."""
    if "*" in ctype:
        return core.int64
    words = [w for w in ctype.split() if w not in ("const", "volatile", "restrict")]
    base = " ".join(words)
    if base not in _SCALARS:
        raise TypeError("no Triton type for C type %r" % ctype)
    return _SCALARS[base]


def _lib_path():
    # extern_elementwise records a path in the IR, but what is linked is
    # decided by extern_libs at compile time (symm.triton.extern_libs()); a
    # checkout without the bitcode can still trace kernels.
    try:
        return _lib.bitcode_path()
    except _lib.LibraryNotFoundError:
        return "libsymm_device.bc"


def _convert(name, pname, ctype, value, _semantic):
    value = _semantic.to_tensor(value)
    want = triton_type(ctype)
    have = value.type.scalar
    if "*" in ctype:
        if not (have.is_ptr() or have in (core.int64, core.uint64)):
            raise TypeError("symm.triton.%s: %s must be a pointer or an int64 address, got %s"
                            % (name, pname, have))
    return _semantic.cast(value, want)


def _make(name, ret, params):
    cname = "symm_" + name
    arg_types = tuple(triton_type(t) for _, t in params)
    # extern_elementwise cannot return void: declare int32 and drop it. LLVM
    # resolves the call to the void definition when it links the bitcode.
    ret_type = core.int32 if ret == "void" else triton_type(ret)
    table = {arg_types: (cname, ret_type)}

    def fn(*args, _semantic=None):
        if len(args) != len(params):
            raise TypeError("symm.triton.raw.%s takes %d arguments (%s), got %d"
                            % (name, len(params), ", ".join(p for p, _ in params), len(args)))
        conv = [_convert(name, p, t, a, _semantic) for (p, t), a in zip(params, args)]
        out = core.extern_elementwise(LIB_NAME, _lib_path(), conv, table, is_pure=False,
                                      _semantic=_semantic)
        return None if ret == "void" else out

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "%s %s(%s): called by every thread that executes it." % (
        ret, cname, ", ".join("%s %s" % (t, p) for p, t in params))
    return core.extern(fn)


__all__ = []
for _name, _ret, _params, _mode in FUNCTIONS:
    globals()[_name] = _make(_name, _ret, _params)
    __all__.append(_name)
