"""The GEMM shared by ag_gemm.py and gemm_rs.py, and its configuration.

GEMM_CONFIG is the one place to set the tile shape and pipelining of both
fused examples (tune_gemm.py times candidates on the GPU at their per-PE
shapes; put the winner here). On Hopper, Triton 3.6 lowers tl.dot to wgmma
on its own; BM=128, BN=256, BK=64 with 8 warps and 3-4 stages is a known
good configuration for large bf16 GEMMs.

Tiles are grouped per "band" of rows (gemm_kernel: the M/n rows of one PE;
the fused kernels: one chunk, the rows one flag covers), bands in the order
the kernel wants them, and inside a band GROUP_M row tiles share each column
tile (swizzle), so the B tiles and A rows in L2 are reused while the band
order (what communication waits for or feeds) is kept. A group never spans
two chunks: its first tiles would otherwise need the later chunk too.

The order the chunks arrive in is decided here too (ag_push_order,
rs_band_order), so the kernels' tile order and the copies' order come from
one place (tests/python/test_tile_order.py checks that they agree).

A and B are read through TMA tensor descriptors (operand()): the tiles come
in through each SM's tensor memory accelerator (cp.async.bulk.tensor) into
the pipeline's shared-memory stages, without the address arithmetic and
bounds masks of pointer loads in the main loop; rows or columns past the
tensor's edge read as zeros. Rows of A and B must be 16-byte aligned (bf16:
a multiple of 8 elements).
"""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# BM128 BN256 BK64 GROUP_M 8, 8 warps, 3 stages, TMA loads: on one H200 at
# every per-PE shape of both examples (square and LLM), 0.92-1.00x of
# torch.matmul (gemm_alone.py, graph and stream, two runs); in one run beside
# the pointer-load form with 4 stages, 0.93-1.08x against 0.89-0.97x
# (bench/results/latest/tune-gemm.md). 4 stages with TMA lost on two shapes
# in one of two tune_gemm.py runs (0.86-0.87x), 3 stages never; no shape
# preferred another candidate, so one config serves all. gemm_rs.py --stages
# overrides the own band's stages (its epilogue reduction and remote stores
# shift the best depth; re-time with it). gemm_rs_partial: the other PEs'
# partial bands when gemm_rs.py runs them in Triton (--partial triton): a
# plain GEMM, so the plain winner.
GEMM_CONFIG = {
    "ag_gemm": dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
    "gemm_rs": dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
    "gemm_rs_partial": dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
}


def ag_push_order(me, npes):
    """ag_gemm: the PEs this PE's shard is copied to, in order: me-1 first,
    which reads it right after its own rows, then me-2, ... So PE q receives
    the shard of q+1 first, then q+2's...: the order of ag_tile's bands."""
    return [(me - i) % npes for i in range(1, npes)]


def rs_band_order(me, npes):
    """gemm_rs: the owners of the partial bands this PE computes, in order:
    me+1, me+2, ..., me-1 (its own band comes last, in the fused kernel). So
    PE q receives its band from q-1 first and from q+1 last, chunk by chunk."""
    return [(me + i) % npes for i in range(1, npes)]


def auto_chunk_rows(m_loc, bm, group_m):
    """The rows per flag of ag_gemm when none are asked for: one group of
    row tiles (group_m * bm), so the chunk order is the group order of the
    GEMM alone, or the whole shard where it is not a multiple of that."""
    rows = group_m * bm
    return rows if m_loc % rows == 0 else m_loc


def split(cfg):
    """(constexpr kwargs, launch options) of a GEMM_CONFIG entry."""
    cx = {k: cfg[k] for k in ("BM", "BN", "BK", "GROUP_M")}
    return cx, {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}


def operand(t, rows, cols, what="operand"):
    """The TMA descriptor through which the kernels read the 2-D tensor t
    (row-major) in [rows, cols] blocks. TMA needs a 16-byte aligned start and
    row stride: raise a clear error where t has neither (e.g. bf16 with a
    row length that is not a multiple of 8)."""
    if t.dim() != 2 or t.stride(1) != 1:
        raise ValueError("%s: expected a 2-D row-major tensor, got shape %s strides %s"
                         % (what, tuple(t.shape), tuple(t.stride())))
    esz = t.element_size()
    if t.data_ptr() % 16 or (t.stride(0) * esz) % 16:
        raise ValueError("%s: TMA loads need a 16-byte aligned start and row stride (row of %d elements of %d "
                         "bytes at 0x%x): use a row length that is a multiple of %d"
                         % (what, t.stride(0), esz, t.data_ptr(), 16 // esz))
    return TensorDescriptor.from_tensor(t, [rows, cols])


def operands(a, b, cfg):
    """(A's descriptor in [BM, BK] blocks, B's in [BK, BN]) for a GEMM_CONFIG entry."""
    return operand(a, cfg["BM"], cfg["BK"], "A"), operand(b, cfg["BK"], cfg["BN"], "B")


@triton.jit
def band_tile(pid, N, M_LOC, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Program `pid` -> (band, row tile inside the band, column tile): bands
    one after the other; inside a band, groups of GROUP_M row tiles walk the
    column tiles together."""
    num_n = tl.cdiv(N, BN)
    mb = M_LOC // BM                       # row tiles per band
    band_tiles = mb * num_n
    band = pid // band_tiles
    r = pid % band_tiles
    per_group = GROUP_M * num_n
    first_m = (r // per_group) * GROUP_M
    gsz = tl.minimum(mb - first_m, GROUP_M)
    pid_m = first_m + (r % per_group) % gsz
    pid_n = (r % per_group) // gsz
    return band, pid_m, pid_n


@triton.jit
def chunk_tile(pid, N, CHUNK_M, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Program `pid` -> (first row, column tile) in a row space cut into
    chunks of CHUNK_M rows taken in order: every tile of chunk c comes
    before any of chunk c+1, grouped inside the chunk (band_tile)."""
    chunk, pid_m, pid_n = band_tile(pid, N, CHUNK_M, BM, BN, GROUP_M)
    return chunk * CHUNK_M + pid_m * BM, pid_n


@triton.jit
def ag_tile(pid, me, npes, N, M_LOC, CHUNK_M,
            BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """ag_gemm's program `pid` -> (source PE, first row inside its shard,
    column tile): the shards in the order they arrive (this PE's own, which
    never waits, then me+1's, me+2's...: ag_push_order), each shard chunk by
    chunk in the order its copies land."""
    row, pid_n = chunk_tile(pid, N, CHUNK_M, BM, BN, GROUP_M)
    band = row // M_LOC
    return (me + band) % npes, row - band * M_LOC, pid_n


@triton.jit
def mma_tile(a, row0, b, K, pid_n, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] = A[row0: +BM, :K] @ B[:K, column tile pid_n], A and B
    read through their TMA descriptors (operand(); K % BK == 0)."""
    col0 = pid_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a.load([row0, k]), b.load([k, col0]), acc)
    return acc


@triton.jit
def gemm_kernel(a, b, c, M, N, K, M_LOC,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B with the examples' tile order and main loop, no
    communication: what tune_gemm.py times. a, b: descriptors (operands())."""
    band, pid_m, pid_n = band_tile(tl.program_id(0), N, M_LOC, BM, BN, GROUP_M)
    row0 = band * M_LOC + pid_m * BM
    acc = mma_tile(a, row0, b, K, pid_n, BM, BN, BK)
    offs_m = row0 + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(c + offs_m[:, None] * N + offs_n[None, :], acc.to(c.dtype.element_ty),
             mask=offs_n[None, :] < N)
