"""Argument conversion between CuTe DSL values and the bitcode's C types."""
import cutlass
import cutlass.cute as cute
from cutlass._mlir import ir
from cutlass._mlir.dialects import cute as _cute_ir
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import extract_mlir_values


def _llvm_ptr_type():
    return llvm.PointerType.get()


class VoidPtr:
    """A C pointer parameter (`void *`, `const T *`, the context) in an
    extern declaration: an LLVM generic pointer."""

    @staticmethod
    def mlir_type():
        return _llvm_ptr_type()

    @staticmethod
    def __get_mlir_types__():
        return [_llvm_ptr_type()]

    @classmethod
    def isinstance(cls, value):
        return isinstance(value, ir.Value) and value.type == _llvm_ptr_type()


def is_tensor(x):
    return isinstance(x, cute.Tensor)


def is_pointer(x):
    return isinstance(x, cute.Pointer)


def _generic(ptr):
    """A cute.Pointer as an LLVM generic pointer (a shared-memory pointer is
    converted to its generic address, as C's implicit conversion does)."""
    value = extract_mlir_values(ptr)[0]
    space = _cute_ir.PtrType(value.type).address_space
    as_int = _cute_ir.ptrtoint(ir.IntegerType.get_signless(64), value)
    typed = llvm.inttoptr(llvm.PointerType.get(space), as_int)
    return typed if space == 0 else llvm.addrspacecast(_llvm_ptr_type(), typed)


def _ptr(x):
    """A pointer-like value as an LLVM generic pointer: a cute.Pointer, a
    tensor (its first element), an LLVM pointer, or an integer address."""
    if is_tensor(x):
        x = x.iterator
    if is_pointer(x):
        return _generic(x)
    if isinstance(x, ir.Value) and x.type == _llvm_ptr_type():
        return x
    if isinstance(x, (cutlass.Int64, cutlass.Uint64, int)) and not isinstance(x, bool):
        return llvm.inttoptr(_llvm_ptr_type(), cutlass.Int64(x).ir_value())
    raise TypeError("expected a cute.Pointer, a cute tensor or a 64-bit integer address, got %s"
                    % type(x).__name__)


def address(x):
    """A pointer-like value (see _ptr) as a generic cutlass.Int64 address."""
    return cutlass.Int64(llvm.ptrtoint(ir.IntegerType.get_signless(64), _ptr(x)))


def _num(T):
    def conv(x):
        if type(x) is T:
            return x
        if isinstance(x, (cute.Tensor, cute.Pointer)):
            raise TypeError("expected a %s value, got a %s" % (T.__name__, type(x).__name__))
        return T(x)
    conv.__name__ = "_" + T.__name__.lower()
    return conv


_i8, _i16, _i32, _i64 = (_num(T) for T in (cutlass.Int8, cutlass.Int16, cutlass.Int32, cutlass.Int64))
_u8, _u16, _u32, _u64 = (_num(T) for T in (cutlass.Uint8, cutlass.Uint16, cutlass.Uint32,
                                          cutlass.Uint64))
_f32, _f64 = _num(cutlass.Float32), _num(cutlass.Float64)


def _ret(value, T):
    """An extern's result as a cutlass value (a pointer as an Int64 address)."""
    if T is None:
        return address(value)
    return T(value)
