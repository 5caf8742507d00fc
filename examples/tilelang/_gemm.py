"""The Hopper GEMM the TileLang GEMM examples share (bf16 in, fp32
accumulation, bf16 out): T.Pipelined over K with TMA loads from a producer
warp group and wgmma in two consumer warp groups (TileLang's warp
specialisation: symm.tilelang.with_tma), tiles taken in
groups of `group` row tiles per column sweep so that a wave of blocks
shares its B columns in L2.

A configuration is a dict (CONFIGS): tile bm x bn x bk, pipeline stages,
consumer threads, row-tile group, warp policy, and whether the grid is
persistent: one block per SM (NSM_MAX as built, `nsm` at launch) taking tiles
t = bid, bid + nsm, ..., so that the producer loads the next tile while the
consumers store the last one. A persistent grid must be co-resident (its
tiles may wait for one another's data through the copy engines), so it is
launched with at most the SMs this PE may fill (symm.sm_share). The GPU run
times every configuration alone at each shape and the fused examples use
the fastest (_fused.pick_config), so this file lists a few candidates rather
than one guess.

Every kernel here takes the tile index from one of the two shells
(kernel_shell): its body is a T.macro of the tile index.

The tile order helpers are plain Python building TileLang expressions; the
kernels that use them import TileLang (builders only run where it is)."""

BF16 = "bfloat16"
ACC = "float32"

CONFIGS = {
    # 128x256: two consumer warp groups of 64x256 (full rows) or 128x128 each
    "128x256x64s3": dict(bm=128, bn=256, bk=64, stages=3, threads=256, group=8, policy="fullrow"),
    "128x256x64s4": dict(bm=128, bn=256, bk=64, stages=4, threads=256, group=8, policy="fullrow"),
    "128x256x64s3q": dict(bm=128, bn=256, bk=64, stages=3, threads=256, group=8, policy="square"),
    "256x128x64s3": dict(bm=256, bn=128, bk=64, stages=3, threads=256, group=8, policy="fullrow"),
    # persistent (3 stages: the output tile then needs shared memory of its own, 208 KiB in all)
    "128x256x64s3p": dict(bm=128, bn=256, bk=64, stages=3, threads=256, group=8, policy="fullrow",
                          persistent=True),
}
DEFAULT = "128x256x64s3"
NSM_MAX = 132   # a persistent grid as built: the SMs of an H100 / H200


def check_shape(what, M, N, K, cfg, m_unit=None):
    """Shapes must be whole tiles (and whole groups of row tiles in every
    unit of `m_unit` rows, the rows one chunk of a fused kernel holds)."""
    bm, bn, bk, g = cfg["bm"], cfg["bn"], cfg["bk"], cfg["group"]
    unit = m_unit or M
    if M % bm or N % bn or K % bk or unit % bm or (unit // bm) % min(g, unit // bm):
        raise ValueError("%s: M=%d N=%d K=%d (row unit %d) must be multiples of the tile %dx%dx%d "
                         "and of %d row tiles" % (what, M, N, K, unit, bm, bn, bk, g))


def group_of(cfg, tiles_m):
    """The row-tile group actually used: the configuration's, or fewer where
    a unit has fewer row tiles."""
    return min(cfg["group"], tiles_m)


def tile_mn(r, tiles_m, tiles_n, group):
    """(row tile, column tile) of tile r of a tiles_m x tiles_n grid taken in
    groups of `group` row tiles (tiles_m a multiple of it): the blocks of one
    wave share few B columns and few A rows, so both stay in L2."""
    per = group * tiles_n
    g, i = r // per, r % per
    return g * group + i % group, i // group


def policy(cfg):
    import tilelang.language as T
    return {"fullrow": T.GemmWarpPolicy.FullRow, "square": T.GemmWarpPolicy.Square}[cfg["policy"]]


def grid_of(cfg, ntiles):
    """The grid a kernel is built with: one block per tile, or NSM_MAX."""
    return NSM_MAX if cfg.get("persistent") else ntiles


def waves(T, ntiles, nsm):
    """Tiles per block of a persistent grid of nsm blocks (a run-time value)."""
    return T.ceildiv(ntiles, nsm)


def k_gemm(M, N, K, cfg):
    """C = A @ B alone (row-major bf16, every dimension whole tiles); the
    last parameter, nsm, is the grid of a persistent configuration (and
    unused otherwise)."""
    import tilelang.language as T
    import symm.tilelang as sT
    check_shape("gemm", M, N, K, cfg)
    bm, bn, bk = cfg["bm"], cfg["bn"], cfg["bk"]
    tiles_m, tiles_n = M // bm, N // bn
    ntiles = tiles_m * tiles_n
    grp = group_of(cfg, tiles_m)

    @T.macro
    def tile(t, A, B, C, A_s, B_s, C_s, acc):
        mi, ni = tile_mn(t, tiles_m, tiles_n, grp)
        T.clear(acc)
        for k in T.Pipelined(K // bk, num_stages=cfg["stages"]):
            T.copy(A[mi * bm, k * bk], A_s)
            T.copy(B[k * bk, ni * bn], B_s)
            T.gemm(A_s, B_s, acc, policy=policy(cfg))
        T.copy(acc, C_s)
        T.copy(C_s, C[mi * bm, ni * bn])

    @T.prim_func
    def gemm(A: T.Tensor((M, K), BF16), B: T.Tensor((K, N), BF16), C: T.Tensor((M, N), BF16), nsm: T.int32):
        with T.Kernel(grid_of(cfg, ntiles), threads=cfg["threads"]) as bid:
            A_s = T.alloc_shared((bm, bk), BF16)
            B_s = T.alloc_shared((bk, bn), BF16)
            C_s = T.alloc_shared((bm, bn), BF16)
            acc = T.alloc_fragment((bm, bn), ACC)
            if cfg.get("persistent"):
                for w in T.serial(waves(T, ntiles, nsm)):
                    if w * nsm + bid < ntiles:
                        tile(w * nsm + bid, A, B, C, A_s, B_s, C_s, acc)
            else:
                tile(bid, A, B, C, A_s, B_s, C_s, acc)
    return sT.with_tma(gemm)


def k_finish(nwords):
    """After a fused kernel, on the same stream: print and trap if one of its
    waits gave up (symm.tilelang.wait_report on its record), then zero its
    `nwords` flag words for the next call (one block)."""
    import tilelang.language as T
    import symm.tilelang as sT
    threads = 128

    @T.prim_func
    def finish(ctx: T.uint64, flags: T.Tensor((nwords,), "uint64"), rec: T.Tensor((sT.REC_WORDS,), "uint64")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            if tx == 0:
                sT.wait_report(ctx, rec)
            for i in T.serial((nwords + threads - 1) // threads):
                if i * threads + tx < nwords:
                    flags[i * threads + tx] = T.uint64(0)
    return finish


def finish_name(nwords):
    return "gemm_finish_%d" % nwords


# The PE count the speed runs use (4x H100): its fused kernels come in every
# configuration; other PE counts (correctness runs, PEs sharing a GPU) get
# the default one only, which keeps the build folder small.
SPEED_PES = 4


def config_names(world=SPEED_PES):
    """The configurations built and swept for a PE count."""
    return list(CONFIGS) if world == SPEED_PES else [DEFAULT]
