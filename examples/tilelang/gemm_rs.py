"""GEMM + reduce-scatter with the communication hidden: out = the rows of
sum over PEs of (A_p @ B_p) that this PE owns, the tensor-parallel row
layer. A is sharded by columns ([m, k/P] on each PE), B by rows ([k/P, n]);
PE c owns rows [c m/P, (c+1) m/P).

The GEMM (_gemm.py's pipelined TMA + wgmma tiles) goes band by band over
the owners' row chunks, PE me+1's first, this PE's own last. A tile of a
peer's band stores its bf16 partial into a local staging buffer and adds 1
to the count of its sub-chunk (a release after the block's stores). The
copy engines move each finished sub-chunk: a side stream queued by the host
(symm.copyengine) waits for the count on the GPU (cuStreamWaitValue64, no
SM), copies the sub-chunk into the owner's receive slot for this PE and
sets the owner's flag for it. A tile of the own band, once its sum over K
is done, waits for the P-1 peers' partials of its tile (their flags, in its
consumer warps), adds them to its fp32 accumulator and stores the result:
the reduction costs no pass of its own.

How the host moves the sub-chunks is a plan (PLANS): one by one on one side
stream, two at a time (one copy and one flag copy for both), a side stream
per owner, or the owners alternating between two streams; the GPU run tries
every configuration, sub-chunk count and plan (_fused.sweep) and keeps the
fastest.

Like ag_gemm.py, a call is a fixed protocol of flags set to 1 and reset to
0, with `entered` telling a peer that this PE no longer reads its receive
slots (so it may copy into them) and a one-block kernel at the end that
reports a wait that gave up and zeroes the flags. No SM copies anything.
Against torch.matmul then dist.reduce_scatter_tensor (NCCL), and the GEMM
alone at the same per-PE shape, with the fused kernel alone (flags set
beforehand) and the copies alone (counts set beforehand) beside them.

    torchrun --nproc-per-node N examples/tilelang/gemm_rs.py [--aot build-tilelang]"""
import sys

import torch

import symm
from symm import copyengine as ce

import _fused as F
import _gemm
from _common import all_ok, close, example_main, rand, row, skipped, sync_all

# subs: the kernel's sub-chunks per owner, the first the default; two (and
# one at the LLM shape) keep the GEMM's groups of 8 row tiles
CONFIGS = [dict(m=8192, k=8192, n=8192, subs=(4, 2)), dict(m=4096, k=28672, n=8192, subs=(2, 1))]
PLANS = ("1 lane", "1 lane, sub-chunk pairs", "a lane per owner", "2 lanes, owners alternate")


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


def fused_name(c, world, cfg, subs):
    return "gemm_rs_%s_p%d_m%d_k%d_n%d_s%d" % (c, world, cfg["m"], cfg["k"], cfg["n"], subs)


def kernels(world, cfg):
    M, K, N = _shape(world, cfg)
    out = F.gemm_kernels(M, N, K, world)
    for c in _gemm.fused_config_names(world):
        for sb in cfg["subs"]:
            out[fused_name(c, world, cfg, sb)] = (lambda c=c, sb=sb: k_gemm_rs(world, M, K, N, sb,
                                                                                _gemm.CONFIGS[c]))
    for sb in cfg["subs"]:
        out[_gemm.finish_name(world * sb)] = lambda sb=sb: _gemm.k_finish(world * sb)
    return out


class GemmRS:
    """out (this PE's m/P rows) = reduce_scatter(A @ B): pick a variant with
    use(), then op(A, B, out)."""

    def __init__(self, env, M, N, max_subs):
        P = env.world
        self.env, self.N = env, N
        self.m_loc = M // P
        self.stage = torch.empty((P, self.m_loc, N), dtype=torch.bfloat16, device=env.device)
        self.recv = symm.zeros((P, self.m_loc, N), torch.bfloat16)
        self.done = symm.zeros((P * max_subs,), torch.uint64)
        self.rflag = symm.zeros((P * max_subs,), torch.uint64)
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.ones = ce.ones(env.device, max_subs)
        self.side = ce.Side(env.device, lanes=max(2, P - 1))
        self.programs = {}   # (subs, plan, tiles per sub-chunk) -> ce.Program
        self.fused = self.finish = self.program = None
        self.subs, self.plan = None, None
        symm.barrier()

    def use(self, fused, finish, cfg, subs, plan):
        """The fused kernel (built for `subs` sub-chunks), its finish kernel
        and the side streams' plan of the calls that follow."""
        P = self.env.world
        if plan not in PLANS:
            raise ValueError("gemm_rs: no plan %r (%s)" % (plan, ", ".join(PLANS)))
        if subs > self.ones.numel() or self.m_loc % subs:
            raise ValueError("gemm_rs: %d sub-chunks of %d rows (at most %d)" % (subs, self.m_loc,
                                                                              self.ones.numel()))
        self.fused, self.finish = F.launcher(fused, cfg), finish
        self.subs, self.plan = subs, plan
        self.flags, self.counts = self.rflag[:P * subs], self.done[:P * subs]
        self.tiles_sub = (self.m_loc // subs // cfg["bm"]) * (self.N // cfg["bn"])
        if P > 1:
            key = (subs, plan, self.tiles_sub)
            if key not in self.programs:
                self.programs[key] = self._program(subs, plan)
                self.side.prepare(self.programs[key])
            self.program = self.programs[key]

    def _program(self, subs, plan):
        """Every side-stream operation of one call (see PLANS)."""
        P, me, N = self.env.world, self.env.rank, self.N
        es, one = 8, self.ones.data_ptr()
        piece = self.m_loc // subs * N * 2
        lanes = {"a lane per owner": P - 1, "2 lanes, owners alternate": 2}.get(plan, 1)
        prog = ce.Program(lanes)
        for q in range(P):                        # entered: our receive slots are free
            if q != me:
                prog.copy(ce.peer(self.entered.data_ptr() + me * es, q), one, es)
        for b in range(P - 1):                    # owners in the GEMM's band order
            c = (me + 1 + b) % P
            lane = {"a lane per owner": b, "2 lanes, owners alternate": b % 2}.get(plan, 0)
            entered = self.entered.data_ptr() + c * es
            prog.wait_eq(entered, 1, lane)        # the owner entered: its slot for us is free
            prog.write(entered, 0, lane)
            step = 2 if plan == "1 lane, sub-chunk pairs" else 1
            for s0 in range(0, subs, step):
                n = min(step, subs - s0)
                for s in range(s0, s0 + n):
                    done = self.done.data_ptr() + (c * subs + s) * es
                    prog.wait_ge(done, self.tiles_sub, lane)   # every tile of the sub-chunk stored
                    prog.write(done, 0, lane)
                src = self.stage.data_ptr() + (c * self.m_loc * N) * 2 + s0 * piece
                dst = ce.peer(self.recv.data_ptr() + (me * self.m_loc * N) * 2 + s0 * piece, c)
                prog.copy(dst, src, n * piece, lane)
                prog.copy(ce.peer(self.rflag.data_ptr() + (me * subs + s0) * es, c), one, n * es, lane)
        return prog

    def __call__(self, a, b, out):
        s, prog = self.side, self.program
        if prog is not None:
            s.begin(prog)
        # the GEMM first (see AGGemm.__call__ in ag_gemm.py)
        self.fused(self.env.ctx, a, b, self.stage, self.recv, out, self.counts, self.flags, self.rec)
        if prog is not None:
            s.run()
        self.finish(self.env.ctx, self.flags, self.rec)
        if prog is not None:
            s.end()

    def _peer_words(self, t):
        """The words of t (flags or counts, [PE][sub-chunk]) of every PE but this one."""
        P, me = self.env.world, self.env.rank
        return [t.data_ptr() + (x * self.subs + j) * 8 for x in range(P) if x != me for j in range(self.subs)]

    def kernel_only(self, a, b, out):
        """The fused kernel with its flags set beforehand (one fill): no
        communication (the own band adds whatever the receive slots hold);
        the counts its tiles leave are zeroed after it."""
        self.side.main_fill(self.flags, 1)
        self.fused(self.env.ctx, a, b, self.stage, self.recv, out, self.counts, self.flags, self.rec)
        self.side.main_fill(self.counts, 0)
        self.finish(self.env.ctx, self.flags, self.rec)

    def comm_only(self):
        """The side streams' work of a call without the GEMM (the counts set
        as the GEMM would leave them): the caller's stream waits for the
        peers' flags before the finish kernel zeroes them."""
        s, prog = self.side, self.program
        if prog is None:
            return
        s.main_fill(self.counts, self.tiles_sub)     # this PE's own counts are never read
        s.begin(prog)
        s.run()
        for addr in self._peer_words(self.flags):
            s.main_wait_eq(addr, 1)
        self.finish(self.env.ctx, self.flags, self.rec)
        s.end()

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.recv, self.done, self.rflag, self.entered):
            symm.free_tensor(t)


def variants(op, ks, world, cfg, args):
    """(name, enter) of every fused variant built: configuration, sub-chunks, plan."""
    return F.variants(op, ks, world, cfg, args, fused_name, PLANS, "subs", "sub-chunk")


def run(env, ks, cfg, args):
    import torch.distributed as dist
    P, me = env.world, env.rank
    M, K, N = _shape(P, cfg)
    label = "M=%d K=%d N=%d (per PE: %dx%dx%d)" % (cfg["m"], cfg["k"], N, M, K, N)
    if cfg["m"] % P or cfg["k"] % P:
        return [skipped("gemm_rs", label, env, "M and K must divide by the PE count")]
    m_loc = M // P
    alone = F.pick_config(env, ks, M, N, K, args)
    op = GemmRS(env, M, N, max(cfg["subs"]))
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

        vs = variants(op, ks, P, cfg, args)
        best, vrows = F.sweep(env, args, "gemm_rs", label, vs, check, lambda: op(a, b, out))
        name, enter = vs[best]
        enter()
        ok = all([check(it) for it in range(args.checks)])
        times = {"variant": name, "GEMM alone config": alone.best}
        if not args.no_bench:
            full = torch.empty((M, N), dtype=torch.bfloat16, device=env.device)
            fns = {"fused graph us": lambda: op(a, b, out), "GEMM alone us": alone.fn(),
                   "torch.matmul us": lambda: torch.matmul(alone.a, alone.b, out=alone.c),
                   "fused kernel only us": lambda: op.kernel_only(a, b, out), "copies only us": op.comm_only}
            if F.nccl_ok(env):
                def ref():
                    torch.matmul(a, b, out=full)
                    dist.reduce_scatter_tensor(out, full)
                fns["torch+NCCL graph us"] = ref
            times.update(F.time_cells(env, op, fns, lambda: op(a, b, out), args))
            ok = check(args.checks) and ok   # fresh data after the timed calls
    finally:
        op.close()
    return [row("gemm_rs", label, env, all_ok(ok), **times)] + vrows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "GEMM + reduce-scatter (copy engines)")
