"""multimem (NVLS) accesses through a multicast address, for CuTe DSL kernels.

The multicast address of a symmetric buffer comes from the host
(symm.cute.host.get_multicast_tensor), which raises unless multicast is
enabled (docs/design.md decision 7: opt-in and gated). These helpers compile on
any machine; a kernel using them runs only where a multicast object exists.
`addr` is a byte address (cutlass.Int64) into the multicast mapping, 16-byte
aligned.
"""
import cutlass
from cutlass._mlir import ir
from cutlass._mlir.dialects import llvm

from ._convert import address


def ld_reduce_add_v4_f32(addr):
    """The sum over the team's PEs of four f32 at addr
    (multimem.ld_reduce.relaxed.sys.global.add.v4.f32); a tuple of four."""
    f32 = ir.F32Type.get()
    res = llvm.StructType.get_literal([f32] * 4)
    r = llvm.inline_asm(res, [address(addr).ir_value()],
                        "multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {$0, $1, $2, $3}, [$4];",
                        "=f,=f,=f,=f,l", has_side_effects=True)
    return tuple(cutlass.Float32(llvm.extractvalue(f32, r, [i])) for i in range(4))


def st_v4_f32(addr, values):
    """Store four f32 into every PE's copy at addr
    (multimem.st.relaxed.sys.global.v4.f32)."""
    ops = [address(addr).ir_value()] + [cutlass.Float32(v).ir_value() for v in values]
    llvm.inline_asm(None, ops, "multimem.st.relaxed.sys.global.v4.f32 [$0], {$1, $2, $3, $4};",
                    "l,f,f,f,f", has_side_effects=True)


def red_release_add_u32(addr, value):
    """Add value to every PE's u32 at addr, release at system scope
    (multimem.red.release.sys.global.add.u32): a signal to the whole team."""
    llvm.inline_asm(None, [address(addr).ir_value(), cutlass.Uint32(value).ir_value()],
                    "multimem.red.release.sys.global.add.u32 [$0], $1;", "l,r",
                    has_side_effects=True)
