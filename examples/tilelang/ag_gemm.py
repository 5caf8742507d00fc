"""All-gather + GEMM with the communication hidden: C = all_gather(A) @ B, the
tensor-parallel column layer. Every PE holds a row shard of A (m/P rows, in
place: its slot of the symmetric A_full, as torch.distributed's in-place
all_gather_into_tensor takes it) and its column shard B [k, n/P].

The data moves on the copy engines, queued by the host on side streams
(symm.copyengine): no SM leaves the GEMM. Each PE pushes its shard into every
peer's A_full, PE me-1 first (it needs this shard right after its own), then
me-2, ...; after each piece a copy of 8-byte ones sets the peer's flags for
it. The GEMM (_gemm.py's pipelined TMA + wgmma tiles) goes band by band, its
own shard first (no wait), then PE me+1's, me+2's, ...; a tile of a peer's
band waits, in its producer warps before the first TMA load, for the flag of
the piece its rows are in.

The kernel's pieces (`chunks` per shard) are the finest unit a tile waits
for; how the host moves them is a plan (PLANS): piece by piece on one side
stream, the later shards whole (one copy and one flag copy each), a side
stream per peer, or the pieces of each shard alternating between two
streams. The GPU run tries every configuration, piece count and plan
(_fused.sweep) and keeps the fastest.

A call is a fixed protocol of flags set to 1 and reset to 0 (so a CUDA graph
replays it): the side stream first tells every peer this PE has entered the
call (its last GEMM no longer reads A_full) by setting `entered[me]` there,
waits for a peer's own `entered` before pushing to it (and resets it), and
the call ends with a one-block kernel that reports a wait that gave up and
zeroes the flags. Against dist.all_gather_into_tensor (NCCL, in place) then
torch.matmul, and the GEMM alone at the same per-PE shape; two more columns
split the fused time: the fused kernel with its flags set beforehand (no
communication) and the copies alone (no GEMM).

    torchrun --nproc-per-node N examples/tilelang/ag_gemm.py [--aot build-tilelang]"""
import sys

import torch

import symm
from symm import copyengine as ce

import _fused as F
import _gemm
from _common import all_ok, close, example_main, rand, row, skipped, sync_all

# chunks: the kernel's pieces per shard, the first the default; at the LLM
# shape one piece keeps the GEMM's groups of 8 row tiles (B stays in L2
# half as often as with groups of 4), and its shards arrive long before
# they are needed
CONFIGS = [dict(m=8192, k=8192, n=8192, chunks=(4, 8)), dict(m=4096, k=8192, n=28672, chunks=(2, 1))]
PLANS = ("1 lane", "1 lane, later shards whole", "a lane per peer", "2 lanes, pieces alternate")


def k_ag_gemm(P, m_loc, N, K, chunks, cfg):
    """The fused kernel: bands of m_loc rows, band b from PE (me + b) % P."""
    import tilelang.language as T
    import symm.tilelang as sT
    from _gemm import ACC, BF16, policy, tile_mn
    M = P * m_loc
    bm, bn, bk = cfg["bm"], cfg["bn"], cfg["bk"]
    rows_ch = m_loc // chunks
    _gemm.check_shape("ag_gemm", M, N, K, cfg, m_unit=rows_ch)
    tm_band, tiles_n = m_loc // bm, N // bn
    tiles_band = tm_band * tiles_n
    ntiles = P * tiles_band
    grp = _gemm.group_of(cfg, rows_ch // bm)     # a group of row tiles stays inside one piece

    @T.macro
    def tile(t, ctx, Afull, B, C, ready, rec, A_s, B_s, C_s, acc):
        me = sT.get_rank(ctx)
        band = t // tiles_band
        src = (me + band) % P
        mi, ni = tile_mn(t % tiles_band, tm_band, tiles_n, grp)
        row0 = src * m_loc + mi * bm
        T.clear(acc)
        for k in T.Pipelined(K // bk, num_stages=cfg["stages"]):
            if k == 0:
                if band > 0:   # a peer's rows: wait (producer warps) for their piece
                    sT.wait_rec(ctx, ready[src * chunks + (mi * bm) // rows_ch], "ge", 1, rec)
                    sT.fence_proxy_async_global()
            T.copy(Afull[row0, k * bk], A_s)
            T.copy(B[k * bk, ni * bn], B_s)
            T.gemm(A_s, B_s, acc, policy=policy(cfg))
        T.copy(acc, C_s)
        T.copy(C_s, C[row0, ni * bn])

    @T.prim_func
    def ag_gemm(ctx: T.uint64, Afull: T.Tensor((M, K), BF16), B: T.Tensor((K, N), BF16),
                C: T.Tensor((M, N), BF16), ready: T.Tensor((P * chunks,), "uint64"),
                rec: T.Tensor((sT.REC_WORDS,), "uint64"), nsm: T.int32):
        with T.Kernel(_gemm.grid_of(cfg, ntiles), threads=cfg["threads"]) as bid:
            A_s = T.alloc_shared((bm, bk), BF16)
            B_s = T.alloc_shared((bk, bn), BF16)
            C_s = T.alloc_shared((bm, bn), BF16)
            acc = T.alloc_fragment((bm, bn), ACC)
            if cfg.get("persistent"):
                for w in T.serial(_gemm.waves(T, ntiles, nsm)):
                    if w * nsm + bid < ntiles:
                        tile(w * nsm + bid, ctx, Afull, B, C, ready, rec, A_s, B_s, C_s, acc)
            else:
                tile(bid, ctx, Afull, B, C, ready, rec, A_s, B_s, C_s, acc)
    return sT.with_tma(ag_gemm)


def _shape(world, cfg):
    return cfg["m"] // world, cfg["k"], cfg["n"] // world   # m_loc, K, N per PE


def fused_name(c, world, cfg, chunks):
    return "ag_gemm_%s_p%d_m%d_k%d_n%d_c%d" % (c, world, cfg["m"], cfg["k"], cfg["n"], chunks)


def kernels(world, cfg):
    m_loc, K, N = _shape(world, cfg)
    out = F.gemm_kernels(world * m_loc, N, K, world)
    for c in _gemm.fused_config_names(world):
        for ch in cfg["chunks"]:
            out[fused_name(c, world, cfg, ch)] = (lambda c=c, ch=ch: k_ag_gemm(world, m_loc, N, K, ch,
                                                                               _gemm.CONFIGS[c]))
    for ch in cfg["chunks"]:
        out[_gemm.finish_name(world * ch)] = lambda ch=ch: _gemm.k_finish(world * ch)
    return out


class AGGemm:
    """C = all_gather(A) @ B with the shard in place: write this PE's rows
    into shard() (A_full's slot me), pick a variant with use(), then call
    op(B, C)."""

    def __init__(self, env, m, k, max_chunks):
        P, me = env.world, env.rank
        self.env, self.m_loc, self.k = env, m // P, k
        self.afull = symm.zeros((m, k), torch.bfloat16)
        self.ready = symm.zeros((P * max_chunks,), torch.uint64)
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.ones = ce.ones(env.device, max_chunks)
        self.side = ce.Side(env.device, lanes=max(2, P - 1))
        self.programs = {}   # (chunks, plan) -> ce.Program
        self.fused = self.finish = self.program = None
        self.chunks, self.plan = None, None
        symm.barrier()

    def use(self, fused, finish, cfg, chunks, plan):
        """The fused kernel (built for `chunks` pieces), its finish kernel and
        the side streams' plan of the calls that follow."""
        if plan not in PLANS:
            raise ValueError("ag_gemm: no plan %r (%s)" % (plan, ", ".join(PLANS)))
        if chunks > self.ones.numel() or self.m_loc % chunks:
            raise ValueError("ag_gemm: %d pieces of a %d-row shard (at most %d)" % (chunks, self.m_loc,
                                                                                 self.ones.numel()))
        self.fused, self.finish = F.launcher(fused, cfg), finish
        self.chunks, self.plan = chunks, plan
        self.flags = self.ready[:self.env.world * chunks]
        if self.env.world > 1:
            key = (chunks, plan)
            if key not in self.programs:
                self.programs[key] = self._program(chunks, plan)
                self.side.prepare(self.programs[key])
            self.program = self.programs[key]

    def _program(self, chunks, plan):
        """Every side-stream operation of one call (see PLANS)."""
        P, me, k = self.env.world, self.env.rank, self.k
        es, one = 8, self.ones.data_ptr()
        piece = self.m_loc // chunks * k * 2
        base = self.afull.data_ptr() + me * self.m_loc * k * 2
        lanes = {"a lane per peer": P - 1, "2 lanes, pieces alternate": 2}.get(plan, 1)
        prog = ce.Program(lanes)
        for q in range(P):                        # entered this call: peers may push to us
            if q != me:
                prog.copy(ce.peer(self.entered.data_ptr() + me * es, q), one, es)
        for i in range(1, P):                     # the peer that needs this shard next first
            q = (me - i) % P
            lane = i - 1 if plan == "a lane per peer" else 0
            entered = self.entered.data_ptr() + q * es
            prog.wait_eq(entered, 1, lane)        # that peer entered: its A_full is free
            prog.write(entered, 0, lane)
            if plan == "2 lanes, pieces alternate":
                prog.after(1, 0)
            whole = plan == "1 lane, later shards whole" and i > 1
            for j0, n in ([(0, chunks)] if whole else [(j, 1) for j in range(chunks)]):
                ln = j0 % 2 if plan == "2 lanes, pieces alternate" else lane
                prog.copy(ce.peer(base + j0 * piece, q), base + j0 * piece, n * piece, ln)
                # the piece's flags, after it on the same stream
                prog.copy(ce.peer(self.ready.data_ptr() + (me * chunks + j0) * es, q), one, n * es, ln)
        return prog

    def shard(self):
        me = self.env.rank
        return self.afull[me * self.m_loc:(me + 1) * self.m_loc]

    def __call__(self, b, c):
        s, prog = self.side, self.program
        if prog is not None:
            s.begin(prog)
        # the GEMM is queued first, so that no stream wait queued after it can
        # hold it back where streams share a hardware queue
        self.fused(self.env.ctx, self.afull, b, c, self.flags, self.rec)
        if prog is not None:
            s.run()
        self.finish(self.env.ctx, self.flags, self.rec)
        if prog is not None:
            s.end()

    def _peer_flags(self):
        P, me = self.env.world, self.env.rank
        return [self.flags.data_ptr() + (x * self.chunks + j) * 8 for x in range(P) if x != me
                for j in range(self.chunks)]

    def kernel_only(self, b, c):
        """The fused kernel with its flags set beforehand (one fill): no
        communication (it reads whatever A_full holds)."""
        self.side.main_fill(self.flags, 1)
        self.fused(self.env.ctx, self.afull, b, c, self.flags, self.rec)
        self.finish(self.env.ctx, self.flags, self.rec)

    def comm_only(self):
        """The side streams' work of a call without the GEMM: the caller's
        stream waits for the peers' flags before the finish kernel zeroes them."""
        s, prog = self.side, self.program
        if prog is None:
            return
        s.begin(prog)
        s.run()
        for addr in self._peer_flags():
            s.main_wait_eq(addr, 1)
        self.finish(self.env.ctx, self.flags, self.rec)
        s.end()

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.afull, self.ready, self.entered):
            symm.free_tensor(t)


def variants(op, ks, world, cfg, args):
    """(name, enter) of every fused variant built: configuration, pieces, plan."""
    return F.variants(op, ks, world, cfg, args, fused_name, PLANS, "chunks", "piece")


def run(env, ks, cfg, args):
    P, me = env.world, env.rank
    m, K = cfg["m"], cfg["k"]
    m_loc, _, N = _shape(P, cfg)
    label = "M=%d K=%d N=%d (per PE: %dx%dx%d)" % (m, K, cfg["n"], m, K, N)
    if m % P or cfg["n"] % P:
        return [skipped("ag_gemm", label, env, "M and N must divide by the PE count")]
    alone = F.pick_config(env, ks, m, N, K, args)
    op = AGGemm(env, m, K, max(cfg["chunks"]))
    try:
        b = torch.empty((K, N), dtype=torch.bfloat16, device=env.device)
        c = torch.empty((m, N), dtype=torch.bfloat16, device=env.device)

        def fill(it):
            op.shard().copy_(rand((m_loc, K), torch.bfloat16, env.device, "agA", it, me))
            b.copy_(rand((K, N), torch.float32, env.device, "agB", it, me).mul_(K ** -0.5))

        def check(it):
            fill(it)
            c.zero_()
            sync_all()
            op(b, c)
            sync_all()
            full = torch.cat([rand((m_loc, K), torch.bfloat16, env.device, "agA", it, p) for p in range(P)])
            return close(c, full @ b, 2e-2, 2e-2)

        vs = variants(op, ks, P, cfg, args)
        best, vrows = F.sweep(env, args, "ag_gemm", label, vs, check, lambda: op(b, c))
        name, enter = vs[best]
        enter()
        ok = all([check(it) for it in range(args.checks)])
        times = {"variant": name, "GEMM alone config": alone.best}
        if not args.no_bench:
            fns = {"fused graph us": lambda: op(b, c), "GEMM alone us": alone.fn(),
                   "torch.matmul us": lambda: torch.matmul(alone.a, alone.b, out=alone.c),
                   "fused kernel only us": lambda: op.kernel_only(b, c), "copies only us": op.comm_only}
            if F.nccl_ok(env):
                full = torch.empty((m, K), dtype=torch.bfloat16, device=env.device)
                mine = full[me * m_loc:(me + 1) * m_loc]
                mine.copy_(op.shard())

                def ref():
                    F.all_gather_ref(env, full, mine)
                    torch.matmul(full, b, out=c)
                fns["torch+NCCL graph us"] = ref
            times.update(F.time_cells(env, op, fns, lambda: op(b, c), args))
            ok = check(args.checks) and ok   # fresh data after the timed calls
    finally:
        op.close()
    return [row("ag_gemm", label, env, all_ok(ok), **times)] + vrows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "all-gather + GEMM (copy engines)")
