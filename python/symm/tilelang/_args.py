"""How symm.tilelang turns TileLang values into the arguments of symm's device
functions: addresses and element types, byte counts, PEs, and the names of
the enums (scope, sem, cmp, signal op, reduction, dtype)."""
from tilelang import tvm
from tvm import tirx

import tilelang.language as T

from .. import _consts as C

# enum symm_scope / symm_sem / symm_cmp / symm_signal_op (symm_types.h)
SCOPES = C.names("symm_scope", "SYMM_SCOPE_")
SEMS = C.names("symm_sem", "SYMM_SEM_")
CMPS = C.names("symm_cmp", "SYMM_CMP_")
SIGNAL_OPS = C.names("symm_signal_op", "SYMM_SIGNAL_")
# enum symm_redop / symm_coll_algo / symm_dtype (symm_coll_types.h)
REDOPS = C.names("symm_redop", "SYMM_OP_")
ALGOS = C.names("symm_coll_algo", "SYMM_COLL_ALGO_")
COLL_DTYPES = {"float32": C.DTYPE_F32, "float16": C.DTYPE_F16, "bfloat16": C.DTYPE_BF16,
               "float64": C.DTYPE_F64, "int32": C.DTYPE_I32, "uint32": C.DTYPE_U32,
               "int64": C.DTYPE_I64, "uint64": C.DTYPE_U64, "float8_e4m3fn": C.DTYPE_FP8_E4M3,
               "float8_e4m3": C.DTYPE_FP8_E4M3, "float8_e5m2": C.DTYPE_FP8_E5M2,
               "uint8": C.DTYPE_U8, "int8": C.DTYPE_U8, "bool": C.DTYPE_U8}

# Type suffix of the one-element families, by TileLang dtype
_SUFFIX = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
           "uint16": "u16", "uint32": "u32", "uint64": "u64", "float32": "f32", "float64": "f64"}
RMA_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64")  # p / g
LDST_TYPES = ("i32", "i64", "u32", "u64", "f32", "f64")                          # ld / st
AMO_TYPES = ("i32", "i64", "u32", "u64")                                         # atomics, waits
_C_TYPE = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
           "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32", "f64": "float64"}


def enum(value, table, what):
    """A name of `table` (or its int value) as the int the C call takes."""
    if isinstance(value, str):
        key = value.lower()
        if key not in table:
            raise ValueError("%s must be one of %s, got %r" % (what, ", ".join(sorted(table)), value))
        return table[key]
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in table.values():
            raise ValueError("%s %d is not one of %s" % (what, value, sorted(set(table.values()))))
        return value
    if isinstance(value, tirx.PrimExpr):
        return value  # decided at run time: the C call checks it
    raise TypeError("%s must be a name (%s) or an int, got %r" % (what, ", ".join(sorted(table)), value))


def ctx_expr(ctx):
    """The kernel's context parameter (uint64, symm.ctx() on the host) as the
    `const symm_ctx_t *` every device function takes."""
    if isinstance(ctx, (tirx.Buffer, str)) or not isinstance(ctx, (tirx.PrimExpr, int)):
        raise TypeError("ctx must be the kernel's context parameter (declare it `ctx: T.uint64` and "
                        "pass symm.ctx()), got %r" % (ctx,))
    if isinstance(ctx, tirx.PrimExpr) and str(ctx.dtype) not in ("uint64", "int64"):
        raise TypeError("ctx must be a 64-bit integer (T.uint64), got dtype %s" % ctx.dtype)
    return T.call_extern("handle", "symm_tl_ctx", ctx)


def call(ret, name, ctx, *args):
    """symm_<name>(ctx, args...) in the generated CUDA."""
    return T.call_extern(ret, "symm_" + name, ctx_expr(ctx), *args)


def _is_address_of(x):
    return isinstance(x, tirx.Call) and getattr(x.op, "name", "") == "tirx.address_of"


def address(x, what):
    """(address expression, element dtype or None) of a buffer (its first
    element), an element (buf[i]), T.address_of(buf[i]) or a raw handle."""
    if isinstance(x, tirx.Buffer):
        return T.address_of(x), str(x.dtype)
    if isinstance(x, tirx.BufferLoad):
        return T.address_of(x), str(x.buffer.dtype)
    if _is_address_of(x):
        arg = x.args[0]
        return x, (str(arg.buffer.dtype) if isinstance(arg, tirx.BufferLoad) else None)
    if isinstance(x, tirx.BufferRegion):
        load = tirx.BufferLoad(x.buffer, [r.min for r in x.region])
        return T.address_of(load), str(x.buffer.dtype)
    if isinstance(x, tirx.PrimExpr) and str(x.dtype) == "handle":
        return x, None
    raise TypeError("%s must be a buffer, an element (buf[i]), T.address_of(buf[i]) or a pointer, "
                    "got %r" % (what, x))


def elem_bytes(dtype):
    t = tvm.DataType(dtype)
    return t.bits * t.lanes // 8


def byte_count(size, nbytes, dtype, what):
    """Bytes to move: `size` elements of `dtype`, or `nbytes` bytes."""
    if (size is None) == (nbytes is None):
        raise TypeError("%s: give exactly one of size (elements) and nbytes (bytes)" % what)
    if nbytes is not None:
        return nbytes
    if dtype is None:
        raise TypeError("%s: the element type of a raw pointer is unknown: give nbytes instead of size"
                        % what)
    return size * elem_bytes(dtype)


def suffix(dtype, allowed, what):
    s = _SUFFIX.get(str(dtype))
    if s is None or s not in allowed:
        raise TypeError("%s: element type %s is not supported (%s)"
                        % (what, dtype, ", ".join(_C_TYPE[a] for a in allowed)))
    return s


def element(x, allowed, what):
    """(address, type suffix) of one element of a buffer: buf[i] (or
    T.address_of(buf[i]), or a buffer for its first element)."""
    addr, dtype = address(x, what)
    if dtype is None:
        raise TypeError("%s needs an element of a buffer (buf[i]) to know its type, got a raw pointer"
                        % what)
    return addr, suffix(dtype, allowed, what)


def typed(value, sfx):
    """`value` cast to the C type of suffix `sfx` (a Python number or an expression)."""
    dt = _C_TYPE[sfx]
    if isinstance(value, tirx.PrimExpr):
        return value if str(value.dtype) == dt else T.Cast(dt, value)
    return tirx.const(value, dt)


def pe_expr(ctx, pe):
    """A PE argument: -1 or None (TileScale's "local") is this PE."""
    if pe is None or (isinstance(pe, int) and pe == -1):
        return call("int32", "ctx_my_pe", ctx)
    if isinstance(pe, int) and pe < -1:
        raise ValueError("PE must be >= 0 (or -1 for this PE), got %d" % pe)
    return pe


def coll_dtype(dtype, what):
    code = COLL_DTYPES.get(str(dtype))
    if code is None:
        raise TypeError("%s: element type %s has no collective type (%s)"
                        % (what, dtype, ", ".join(sorted(COLL_DTYPES))))
    return code


def numel(x):
    if isinstance(x, tirx.Buffer):
        n = 1
        for d in x.shape:
            n = n * d
        return n
    return None
