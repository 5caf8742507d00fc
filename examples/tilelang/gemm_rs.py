"""GEMM + reduce-scatter with the communication hidden: out = the rows of
sum over PEs of (A_p @ B_p) that this PE owns, the tensor-parallel row
layer. A is sharded by columns ([m, k/P] on each PE), B by rows ([k/P, n]);
PE c owns rows [c m/P, (c+1) m/P).

The GEMM (_gemm.py's pipelined TMA + wgmma tiles) goes band by band over
the owners' row chunks, PE me+1's first, this PE's own last. A tile of a
peer's band stores its bf16 partial into a local staging buffer and adds 1
to the count of its sub-chunk (a release after the block's stores). The
copy engines move each finished sub-chunk: a side stream queued by the host
(_copyengine.py) waits for the count on the GPU (cuStreamWaitValue64, no
SM), copies the sub-chunk into the owner's receive slot for this PE and
sets the owner's flag for it. A tile of the own band, once its sum over K
is done, waits for the P-1 peers' partials of its tile (their flags, in its
consumer warps), adds them to its fp32 accumulator and stores the result:
the reduction costs no pass of its own.

Like ag_gemm.py, a call is a fixed protocol of flags set to 1 and reset to
0, with `entered` telling a peer that this PE no longer reads its receive
slots (so it may copy into them) and a one-block kernel at the end that
reports a wait that gave up and zeroes the flags. No SM copies anything.
Against torch.matmul then dist.reduce_scatter_tensor (NCCL), and the GEMM
alone at the same per-PE shape.

    torchrun --nproc-per-node N examples/tilelang/gemm_rs.py [--aot build-tilelang]"""
import sys

import torch

import symm

import _copyengine as ce
import _fused as F
import _gemm
from _common import all_ok, close, example_main, rand, row, skipped, sync_all

CONFIGS = [dict(m=8192, k=8192, n=8192, subs=4), dict(m=4096, k=28672, n=8192, subs=2)]


def k_gemm_rs(P, M, K, N, subs, cfg):
    """The fused kernel: bands of m_loc = M/P rows, band b for PE (me+1+b) % P."""
    import tilelang.language as T
    import symm.tilelang as sT
    from _gemm import ACC, BF16, policy, tile_mn
    bm, bn, bk = cfg["bm"], cfg["bn"], cfg["bk"]
    m_loc = M // P
    sub_rows = m_loc // subs
    _gemm.check_shape("gemm_rs", M, N, K, cfg, m_unit=sub_rows)
    tm_band, tiles_n = m_loc // bm, N // bn
    tiles_band = tm_band * tiles_n
    ntiles = P * tiles_band
    grp = _gemm.group_of(cfg, sub_rows // bm)   # a group of row tiles stays inside one sub-chunk

    @T.macro
    def tile(t, ctx, A, B, stage, recv, out, done, rflag, rec, A_s, B_s, C_s, acc):
        me = sT.get_rank(ctx)
        band = t // tiles_band
        c = (me + 1 + band) % P                    # the owner of this band's rows
        mi, ni = tile_mn(t % tiles_band, tm_band, tiles_n, grp)
        sub = (mi * bm) // sub_rows
        T.clear(acc)
        for k in T.Pipelined(K // bk, num_stages=cfg["stages"]):
            T.copy(A[c * m_loc + mi * bm, k * bk], A_s)
            T.copy(B[k * bk, ni * bn], B_s)
            T.gemm(A_s, B_s, acc, policy=policy(cfg))
        if band < P - 1:
            # a peer's rows: the partial into staging, then count it (release,
            # after every thread's stores: the barrier orders them first)
            T.copy(acc, C_s)
            T.copy(C_s, stage[c, mi * bm, ni * bn], disable_tma=True)
            T.sync_threads()
            if T.get_thread_binding(0) == 0:
                sT.add_release(done[c * subs + sub], 1)
        else:
            # own rows: add the peers' partials of this tile as they land, each
            # through shared memory (16-byte coalesced loads, then the fragment's layout)
            for p in T.serial(P - 1):
                src = (me + 1 + p) % P
                sT.wait_rec(ctx, rflag[src * subs + sub], "ge", 1, rec)
                T.copy(recv[src, mi * bm, ni * bn], C_s, disable_tma=True)
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] += C_s[i, j]
                T.sync_threads()
            T.copy(acc, C_s)
            T.copy(C_s, out[mi * bm, ni * bn])

    @T.prim_func
    def gemm_rs(ctx: T.uint64, A: T.Tensor((M, K), BF16), B: T.Tensor((K, N), BF16),
                stage: T.Tensor((P, m_loc, N), BF16), recv: T.Tensor((P, m_loc, N), BF16),
                out: T.Tensor((m_loc, N), BF16), done: T.Tensor((P * subs,), "uint64"),
                rflag: T.Tensor((P * subs,), "uint64"), rec: T.Tensor((sT.REC_WORDS,), "uint64"), nsm: T.int32):
        with T.Kernel(_gemm.grid_of(cfg, ntiles), threads=cfg["threads"]) as bid:
            A_s = T.alloc_shared((bm, bk), BF16)
            B_s = T.alloc_shared((bk, bn), BF16)
            C_s = T.alloc_shared((bm, bn), BF16)
            acc = T.alloc_fragment((bm, bn), ACC)
            if cfg.get("persistent"):
                for w in T.serial(_gemm.waves(T, ntiles, nsm)):
                    if w * nsm + bid < ntiles:
                        tile(w * nsm + bid, ctx, A, B, stage, recv, out, done, rflag, rec, A_s, B_s, C_s, acc)
            else:
                tile(bid, ctx, A, B, stage, recv, out, done, rflag, rec, A_s, B_s, C_s, acc)
    return sT.with_tma(gemm_rs)


def _shape(world, cfg):
    return cfg["m"], cfg["k"] // world, cfg["n"]   # M, K, N per PE


def fused_name(c, world, cfg):
    return "gemm_rs_%s_p%d_m%d_k%d_n%d_s%d" % (c, world, cfg["m"], cfg["k"], cfg["n"], cfg["subs"])


def kernels(world, cfg):
    M, K, N = _shape(world, cfg)
    out = F.gemm_kernels(M, N, K, world)
    for c in _gemm.config_names(world):
        out[fused_name(c, world, cfg)] = (lambda c=c: k_gemm_rs(world, M, K, N, cfg["subs"], _gemm.CONFIGS[c]))
    out[_gemm.finish_name(world * cfg["subs"])] = lambda: _gemm.k_finish(world * cfg["subs"])
    return out


class GemmRS:
    """out (this PE's m/P rows) = reduce_scatter(A @ B): op(A, B, out)."""

    def __init__(self, env, fused, finish, M, N, subs, cfg):
        P, me = env.world, env.rank
        self.env, self.fused, self.finish = env, F.launcher(fused, cfg), finish
        self.m_loc = M // P
        sub_rows = self.m_loc // subs
        self.stage = torch.empty((P, self.m_loc, N), dtype=torch.bfloat16, device=env.device)
        self.recv = symm.zeros((P, self.m_loc, N), torch.bfloat16)
        self.done = symm.zeros((P * subs,), torch.uint64)
        self.rflag = symm.zeros((P * subs,), torch.uint64)
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.one = ce.ones(env.device)
        self.side = ce.Side(env.device) if P > 1 else None
        es, piece = 8, sub_rows * N * 2
        tiles_sub = (sub_rows // cfg["bm"]) * (N // cfg["bn"])
        self.sends = []   # per owner, in band order: (its entered word, sub-chunks)
        for b in range(P - 1):
            c = (me + 1 + b) % P
            subs_c = []
            for s in range(subs):
                src = self.stage.data_ptr() + (c * self.m_loc * N) * 2 + s * piece
                dst = ce.peer(self.recv.data_ptr() + (me * self.m_loc * N) * 2 + s * piece, c)
                flag = ce.peer(self.rflag.data_ptr() + (me * subs + s) * es, c)
                subs_c.append((self.done.data_ptr() + (c * subs + s) * es, tiles_sub, dst, src, piece, flag))
            self.sends.append((self.entered.data_ptr() + c * es, subs_c))
        self.announce = [ce.peer(self.entered.data_ptr() + me * es, q) for q in range(P) if q != me]
        symm.barrier()

    def __call__(self, a, b, out):
        s, one = self.side, self.one.data_ptr()
        if s is not None:
            s.begin()
        # the GEMM first (see AGGemm.__call__ in ag_gemm.py)
        self.fused(self.env.ctx, a, b, self.stage, self.recv, out, self.done, self.rflag, self.rec)
        if s is not None:
            for dst in self.announce:             # entered: our receive slots are free
                s.copy(dst, one, 8)
            for entered, subs_c in self.sends:
                s.wait_eq(entered, 1)             # the owner entered: its slot for us is free
                s.write(entered, 0)
                for done, tiles, dst, src, n, flag in subs_c:
                    s.wait_ge(done, tiles)        # every tile of the sub-chunk stored
                    s.write(done, 0)
                    s.copy(dst, src, n)
                    s.copy(flag, one, 8)
        self.finish(self.env.ctx, self.rflag, self.rec)
        if s is not None:
            s.end()

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.recv, self.done, self.rflag, self.entered):
            symm.free_tensor(t)


def run(env, ks, cfg, args):
    import torch.distributed as dist
    P, me = env.world, env.rank
    M, K, N = _shape(P, cfg)
    label = "M=%d K=%d N=%d (per PE: %dx%dx%d), %d sub-chunks per owner" % (cfg["m"], cfg["k"], N, M, K, N,
                                                                          cfg["subs"])
    if cfg["m"] % P or cfg["k"] % P:
        return [skipped("gemm_rs", label, env, "M and K must divide by the PE count")]
    m_loc = M // P
    best, alone = F.pick_config(env, ks, M, N, K, args)
    op = GemmRS(env, ks[fused_name(best, P, cfg)], ks[_gemm.finish_name(P * cfg["subs"])], M, N, cfg["subs"],
                _gemm.CONFIGS[best])
    try:
        a = torch.empty((M, K), dtype=torch.bfloat16, device=env.device)
        b = torch.empty((K, N), dtype=torch.bfloat16, device=env.device)
        out = torch.empty((m_loc, N), dtype=torch.bfloat16, device=env.device)
        scale = (P * K) ** -0.5

        def check(it):
            a.copy_(rand((M, K), torch.bfloat16, env.device, "rsA", it, me))
            b.copy_(rand((K, N), torch.float32, env.device, "rsB", it, me).mul_(scale))
            out.zero_()
            sync_all()
            op(a, b, out)
            sync_all()
            rows = slice(me * m_loc, (me + 1) * m_loc)
            want = sum(rand((M, K), torch.bfloat16, env.device, "rsA", it, p)[rows].float() @
                       rand((K, N), torch.float32, env.device, "rsB", it, p).mul_(scale).to(torch.bfloat16).float()
                       for p in range(P))
            return close(out, want, 2e-2, 2e-2)

        ok = all([check(it) for it in range(args.checks)])
        times = {"config": best}
        if not args.no_bench:
            fg, fs = F.timed(env, lambda: op(a, b, out), args)
            gg = alone.get(best)
            full = torch.empty((M, N), dtype=torch.bfloat16, device=env.device)
            mm = F.time_graph(lambda: torch.matmul(a, b, out=full), args.graph_iters)
            tg = ts = None
            if F.nccl_ok(env):
                def ref():
                    torch.matmul(a, b, out=full)
                    dist.reduce_scatter_tensor(out, full)
                tg, ts = F.timed(env, ref, args)
            times.update({"fused graph us": fg, "fused stream us": fs, "GEMM alone us": gg,
                          "torch.matmul us": mm, "torch+NCCL graph us": tg, "torch+NCCL stream us": ts,
                          "CE calls per call": str(op.side.calls) if op.side else "0"})
            times.update(F.bar_cells(fg, fs, gg, tg, ts))
            ok = check(args.checks) and ok   # fresh data after the timed calls
    finally:
        op.close()
    return [row("gemm_rs", label, env, all_ok(ok), **times)]


if __name__ == "__main__":
    example_main(sys.modules[__name__], "GEMM + reduce-scatter (copy engines)")
