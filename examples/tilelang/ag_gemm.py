"""All-gather + GEMM with the communication hidden: C = all_gather(A) @ B, the
tensor-parallel column layer. Every PE holds a row shard of A (m/P rows, in
place: its slot of the symmetric A_full, as torch.distributed's in-place
all_gather_into_tensor takes it) and its column shard B [k, n/P].

The data moves on the copy engines, queued by the host on a side stream
(_copyengine.py): no SM leaves the GEMM. Each PE pushes its shard, in
`chunks` pieces, into every peer's A_full, PE me-1 first (it needs this
shard right after its own), then me-2, ...; after each piece an 8-byte copy
sets the peer's flag for it. The GEMM (_gemm.py's pipelined TMA + wgmma
tiles) goes band by band, its own shard first (no wait), then PE me+1's,
me+2's, ...; a tile of a peer's band waits, in its producer warps before the
first TMA load, for the flag of the piece its rows are in.

A call is a fixed protocol of flags set to 1 and reset to 0 (so a CUDA graph
replays it): the side stream first tells every peer this PE has entered the
call (its last GEMM no longer reads A_full) by setting `entered[me]` there,
waits for a peer's own `entered` before pushing to it (and resets it), and
the stream ends with a one-block kernel that reports a wait that gave up and
zeroes the flags. Against dist.all_gather_into_tensor (NCCL, in place) then
torch.matmul, and the GEMM alone at the same per-PE shape.

    torchrun --nproc-per-node N examples/tilelang/ag_gemm.py [--aot build-tilelang]"""
import sys

import torch

import symm

import _copyengine as ce
import _fused as F
import _gemm
from _common import all_ok, close, example_main, rand, row, skipped, sync_all

CONFIGS = [dict(m=8192, k=8192, n=8192, chunks=4), dict(m=4096, k=8192, n=28672, chunks=2)]


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


def fused_name(c, world, cfg):
    return "ag_gemm_%s_p%d_m%d_k%d_n%d_c%d" % (c, world, cfg["m"], cfg["k"], cfg["n"], cfg["chunks"])


def kernels(world, cfg):
    m_loc, K, N = _shape(world, cfg)
    out = F.gemm_kernels(world * m_loc, N, K, world)
    for c in _gemm.config_names(world):
        out[fused_name(c, world, cfg)] = (lambda c=c: k_ag_gemm(world, m_loc, N, K, cfg["chunks"],
                                                                 _gemm.CONFIGS[c]))
    out[_gemm.finish_name(world * cfg["chunks"])] = lambda: _gemm.k_finish(world * cfg["chunks"])
    return out


class AGGemm:
    """C = all_gather(A) @ B with the shard in place: write this PE's rows
    into shard() (A_full's slot me), then call op(B, C)."""

    def __init__(self, env, fused, finish, m, k, chunks, cfg):
        P, me = env.world, env.rank
        self.env, self.fused, self.finish, self.chunks = env, F.launcher(fused, cfg), finish, chunks
        self.m_loc, self.k = m // P, k
        self.afull = symm.zeros((m, k), torch.bfloat16)
        self.ready = symm.zeros((P * chunks,), torch.uint64)
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.one = ce.ones(env.device)
        self.side = ce.Side(env.device) if P > 1 else None
        # every address the side stream needs, computed once
        es = self.entered.element_size()
        piece = self.m_loc // chunks * k * 2
        base = self.afull.data_ptr() + me * self.m_loc * k * 2
        self.pushes = []   # per peer, in the order it needs this shard: (its entered word, pieces)
        for i in range(1, P):
            q = (me - i) % P
            pieces = [(ce.peer(base + j * piece, q), base + j * piece, piece,
                       ce.peer(self.ready.data_ptr() + (me * chunks + j) * es, q)) for j in range(chunks)]
            self.pushes.append((self.entered.data_ptr() + q * es, pieces))
        self.announce = [ce.peer(self.entered.data_ptr() + me * es, q) for q in range(P) if q != me]
        symm.barrier()

    def shard(self):
        me = self.env.rank
        return self.afull[me * self.m_loc:(me + 1) * self.m_loc]

    def __call__(self, b, c):
        s, one = self.side, self.one.data_ptr()
        if s is not None:
            s.begin()
        # the GEMM is queued first, so that no stream wait queued after it can
        # hold it back where streams share a hardware queue
        self.fused(self.env.ctx, self.afull, b, c, self.ready, self.rec)
        if s is not None:
            for dst in self.announce:             # entered this call: peers may push to us
                s.copy(dst, one, 8)
            for entered, pieces in self.pushes:
                s.wait_eq(entered, 1)             # that peer entered: its A_full is free
                s.write(entered, 0)
                for dst, src, n, flag in pieces:
                    s.copy(dst, src, n)
                    s.copy(flag, one, 8)          # after the piece, on the same stream
        self.finish(self.env.ctx, self.ready, self.rec)
        if s is not None:
            s.end()

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.afull, self.ready, self.entered):
            symm.free_tensor(t)


def run(env, ks, cfg, args):
    P, me = env.world, env.rank
    m, K = cfg["m"], cfg["k"]
    m_loc, _, N = _shape(P, cfg)
    label = "M=%d K=%d N=%d (per PE: %dx%dx%d), %d pieces per shard" % (m, K, cfg["n"], m, K, N, cfg["chunks"])
    if m % P or cfg["n"] % P:
        return [skipped("ag_gemm", label, env, "M and N must divide by the PE count")]
    best, alone = F.pick_config(env, ks, m, N, K, args)
    op = AGGemm(env, ks[fused_name(best, P, cfg)], ks[_gemm.finish_name(P * cfg["chunks"])], m, K, cfg["chunks"],
                _gemm.CONFIGS[best])
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

        ok = all([check(it) for it in range(args.checks)])
        times = {"config": best}
        if not args.no_bench:
            fg, fs = F.timed(env, lambda: op(b, c), args)
            gg = alone.get(best)
            mm = F.time_graph(lambda: torch.matmul(op.afull, b, out=c), args.graph_iters)
            tg = ts = None
            if F.nccl_ok(env):
                full = torch.empty((m, K), dtype=torch.bfloat16, device=env.device)
                mine = full[me * m_loc:(me + 1) * m_loc]
                mine.copy_(op.shard())

                def ref():
                    F.all_gather_ref(env, full, mine)
                    torch.matmul(full, b, out=c)
                tg, ts = F.timed(env, ref, args)
            times.update({"fused graph us": fg, "fused stream us": fs, "GEMM alone us": gg,
                          "torch.matmul us": mm, "torch+NCCL graph us": tg, "torch+NCCL stream us": ts,
                          "CE calls per call": str(op.side.calls) if op.side else "0"})
            times.update(F.bar_cells(fg, fs, gg, tg, ts))
            ok = check(args.checks) and ok   # fresh data after the timed calls
    finally:
        op.close()
    return [row("ag_gemm", label, env, all_ok(ok), **times)]


if __name__ == "__main__":
    example_main(sys.modules[__name__], "all-gather + GEMM (copy engines)")
