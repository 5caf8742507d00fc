"""What Cannon and SUMMA share: a sqrt(P) x sqrt(P) PE grid, PE (i, j) =
i * q + j holding blocks A_ij and B_ij (S x S, bf16) of the qS x qS
matrices and computing C_ij = sum_k A_ik B_kj.

One GEMM kernel serves both (k_grid_gemm): C = sum over steps s of
Abuf[kk] @ Bbuf[kk], kk = (first + s) % q, with _gemm.py's pipelined TMA +
wgmma tiles running over all q S of K in one pipeline. The blocks arrive in
`pieces` pieces each (A by rows, B by rows of K) on the copy engines, each
piece followed by its flag (aflag / bflag[kk * pieces + piece]); the
producer warps of a tile wait for the A piece holding its rows when a step
starts and for each B piece when the K loop reaches it, so the GEMM starts
with the first piece and never waits for a whole block. Slots skip_a /
skip_b (this PE's own blocks, in place) are never waited for. The examples
differ only in what the side stream sends where (cannon.py: a skew, then
each step's blocks forwarded to the left / upper neighbour as they arrive;
summa.py: each block straight to its row / column).

The host side (Grid2D) runs the call: the blocks that stay on this GPU
copied on the caller's stream before the GEMM (a copy within one GPU may
run on the SMs, where it would queue behind GEMM blocks waiting for it),
then on the side stream the entered flags to every peer and the example's
sends, beside the fused kernel, the join, and the one-block kernel that
reports a wait that gave up and zeroes the flags (after the join: Cannon's
forwards wait on the same flags). The GPU run tries the fused kernel in
each configuration built and keeps the faster. The reference is the unfused torch path:
dist.all_gather_into_tensor of every A and B block (NCCL), the row and
column rearranged, torch.matmul."""
import math

import torch

import symm
from symm import copyengine as ce

import _fused as F
import _gemm
from _common import all_ok, close, rand, row, skipped, sync_all, time_graphs, time_op

PIECES = 4


def grid_side(world):
    q = math.isqrt(world)
    return q if q * q == world else None


def k_grid_gemm(q, S, pieces, cfg):
    import tilelang.language as T
    import symm.tilelang as sT
    from _gemm import ACC, BF16, policy, tile_mn
    bm, bn, bk = cfg["bm"], cfg["bn"], cfg["bk"]
    rows_p = S // pieces
    _gemm.check_shape("grid gemm", S, S, S, cfg, m_unit=rows_p)
    kb = S // bk
    if kb % pieces:
        raise ValueError("grid gemm: S/bk=%d steps must split into %d pieces" % (kb, pieces))
    kp = kb // pieces
    tiles_m, tiles_n = S // bm, S // bn
    ntiles = tiles_m * tiles_n
    grp = _gemm.group_of(cfg, rows_p // bm)

    @T.macro
    def tile(t, ctx, Abuf, Bbuf, C, aflag, bflag, rec, first, skip_a, skip_b, A_s, B_s, C_s, acc):
        mi, ni = tile_mn(t, tiles_m, tiles_n, grp)
        T.clear(acc)
        for k in T.Pipelined(q * kb, num_stages=cfg["stages"]):
            kk = (first + k // kb) % q
            kin = k % kb
            if kin % kp == 0:   # a B piece starts (and with the first, this step's A)
                if kin == 0:
                    if kk != skip_a:
                        sT.wait_rec(ctx, aflag[kk * pieces + (mi * bm) // rows_p], "ge", 1, rec)
                if kk != skip_b:
                    sT.wait_rec(ctx, bflag[kk * pieces + kin // kp], "ge", 1, rec)
                sT.fence_proxy_async_global()
            T.copy(Abuf[kk, mi * bm, kin * bk], A_s)
            T.copy(Bbuf[kk, kin * bk, ni * bn], B_s)
            T.gemm(A_s, B_s, acc, policy=policy(cfg))
        T.copy(acc, C_s)
        T.copy(C_s, C[mi * bm, ni * bn])

    @T.prim_func
    def grid_gemm(ctx: T.uint64, Abuf: T.Tensor((q, S, S), BF16), Bbuf: T.Tensor((q, S, S), BF16),
                  C: T.Tensor((S, S), BF16), aflag: T.Tensor((q * pieces,), "uint64"),
                  bflag: T.Tensor((q * pieces,), "uint64"), rec: T.Tensor((sT.REC_WORDS,), "uint64"),
                  first: T.int32, skip_a: T.int32, skip_b: T.int32, nsm: T.int32):
        with T.Kernel(_gemm.grid_of(cfg, ntiles), threads=cfg["threads"]) as bid:
            A_s = T.alloc_shared((bm, bk), BF16)
            B_s = T.alloc_shared((bk, bn), BF16)
            C_s = T.alloc_shared((bm, bn), BF16)
            acc = T.alloc_fragment((bm, bn), ACC)
            if cfg.get("persistent"):
                for w in T.serial(_gemm.waves(T, ntiles, nsm)):
                    if w * nsm + bid < ntiles:
                        tile(w * nsm + bid, ctx, Abuf, Bbuf, C, aflag, bflag, rec, first, skip_a, skip_b,
                             A_s, B_s, C_s, acc)
            else:
                tile(bid, ctx, Abuf, Bbuf, C, aflag, bflag, rec, first, skip_a, skip_b, A_s, B_s, C_s, acc)
    return sT.with_tma(grid_gemm)


def fused_name(c, q, S):
    return "grid2d_gemm_%s_q%d_s%d_p%d" % (c, q, S, PIECES)


def kernels(world, cfg):
    """The grid GEMM in the configurations built for `world` PEs, the GEMM
    alone at its shape, and the finish kernel."""
    q = grid_side(world)
    if q is None:
        return {}
    S = cfg["s"]
    out = F.gemm_kernels(S, S, q * S, world)
    for c in _gemm.fused_config_names(world):
        out[fused_name(c, q, S)] = (lambda c=c: k_grid_gemm(q, S, PIECES, _gemm.CONFIGS[c]))
    out[_gemm.finish_name(2 * q * PIECES)] = lambda: _gemm.k_finish(2 * q * PIECES)
    return out


class Grid2D:
    """The buffers and the call; the example queues its sends with
    send_block (after plan(), then commit()) and sets the kernel's (first,
    skip_a, skip_b). A and B are the inputs unless the example places them
    in a slot. use() picks the fused kernel's configuration."""

    def __init__(self, env, finish, q, S):
        P, me = env.world, env.rank
        self.env, self.finish, self.q, self.S = env, finish, q, S
        self.fused = None
        self.i, self.j = divmod(me, q)
        self.abuf = symm.zeros((q, S, S), torch.bfloat16)
        self.bbuf = symm.zeros((q, S, S), torch.bfloat16)
        self.flags = symm.zeros((2 * q * PIECES,), torch.uint64)   # aflag, then bflag
        self.aflag, self.bflag = self.flags[:q * PIECES], self.flags[q * PIECES:]
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.one = ce.ones(env.device)
        self.side = ce.Side(env.device)
        self.announce = [ce.peer(self.entered.data_ptr() + me * 8, p) for p in range(P) if p != me]
        self.sends = []      # ("copy", dst, src, n) / ("wait", addr) / ("flag", dst) / ("handshake", addr)
        self.local = []      # ("copy", dst, src, n) / ("set", addr): on the caller's stream, before the GEMM
        self.program = None
        self.first, self.skip_a, self.skip_b = 0, -1, -1
        symm.barrier()

    def use(self, fused, cfg):
        self.fused = F.launcher(fused, cfg)

    def pe(self, i, j):
        return (i % self.q) * self.q + (j % self.q)

    def piece_bytes(self):
        return self.S // PIECES * self.S * 2

    def send_block(self, buf, flags, src_slot, dst_pe, dst_slot, src_ptr=None, wait_src=False):
        """Queue block buf[src_slot] (or the tensor at src_ptr) into dst_pe's
        buf[dst_slot], piece by piece, each followed by dst_pe's flag; with
        wait_src, each piece once this PE's own flag for it is up (forwarding
        what is still arriving). The first send to a peer waits for its
        entered flag. A block for this PE itself is copied whole on the
        caller's stream before the GEMM, its flags set after it."""
        me, n = self.env.rank, self.piece_bytes()
        block = self.S * self.S * 2
        base = buf.data_ptr() + src_slot * block if src_ptr is None else src_ptr
        if dst_pe == me:
            if wait_src:
                raise ValueError("a forward to this PE itself")
            self.local.append(("copy", buf.data_ptr() + dst_slot * block, base, block))
            for p in range(PIECES):
                self.local.append(("set", flags.data_ptr() + (dst_slot * PIECES + p) * 8))
            return
        if ("entered", dst_pe) not in self._greeted:
            self._greeted.add(("entered", dst_pe))
            self.sends.append(("handshake", self.entered.data_ptr() + dst_pe * 8))
        for p in range(PIECES):
            if wait_src:
                self.sends.append(("wait", flags.data_ptr() + (src_slot * PIECES + p) * 8))
            dst = ce.peer(buf.data_ptr() + dst_slot * block + p * n, dst_pe)
            flag = ce.peer(flags.data_ptr() + (dst_slot * PIECES + p) * 8, dst_pe)
            self.sends.append(("copy", dst, base + p * n, n))
            self.sends.append(("flag", flag))

    def plan(self):
        self.sends, self.local, self._greeted = [], [], set()

    def commit(self):
        """The side stream's program of a call from the sends queued, its
        graph captured."""
        if not self.sends:
            self.program = None
            return
        prog, one = ce.Program(1), self.one.data_ptr()
        for dst in self.announce:
            prog.copy(dst, one, 8)
        for op in self.sends:
            if op[0] == "copy":
                prog.copy(op[1], op[2], op[3])
            elif op[0] == "flag":
                prog.copy(op[1], one, 8)
            elif op[0] == "wait":
                prog.wait_eq(op[1], 1)
            else:   # handshake: the peer entered this call (its buffers are free)
                prog.wait_eq(op[1], 1)
                prog.write(op[1], 0)
        self.program = prog
        self.side.prepare(prog)

    def __call__(self, a, b, c):
        s = self.side
        for op in self.local:      # stays here: before the GEMM, on its stream
            if op[0] == "copy":
                s.main_copy(op[1], op[2], op[3])
            else:
                s.main_write(op[1], 1)
        if self.program is not None:
            s.begin(self.program)
        # the GEMM first (see AGGemm.__call__ in ag_gemm.py)
        self.fused(self.env.ctx, self.abuf, self.bbuf, c, self.aflag, self.bflag, self.rec,
                   self.first, self.skip_a, self.skip_b)
        if self.program is not None:
            s.run()
            s.end()      # before the flags are zeroed: forwards wait on them
        self.finish(self.env.ctx, self.flags, self.rec)

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.abuf, self.bbuf, self.flags, self.entered):
            symm.free_tensor(t)


def run(env, ks, cfg, args, example, make):
    """Check and time one example: make(env, finish, q, S, a, b) returns the
    Grid2D with its plan committed (reading this PE's blocks from a and b)
    and a function (a, b) -> None that puts them where the plan reads them."""
    import torch.distributed as dist
    P, me = env.world, env.rank
    q = grid_side(P)
    S = cfg["s"]
    label = "%dx%d grid of %dx%d blocks (M=N=K=%d)" % (q or 0, q or 0, S, S, (q or 0) * S)
    if q is None:
        return [skipped(example, "%d PEs" % P, env, "needs a square number of PEs")]
    i, j = divmod(me, q)
    alone = F.pick_config(env, ks, S, S, q * S, args)
    a = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    b = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    c = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    op, place = make(env, ks[_gemm.finish_name(2 * q * PIECES)], q, S, a, b)
    try:
        scale = (q * S) ** -0.5

        def blk(kind, it, pe):
            x = rand((S, S), torch.float32, env.device, example + kind, it, pe)
            return (x if kind == "A" else x.mul_(scale)).to(torch.bfloat16)

        def check(it):
            a.copy_(blk("A", it, me))
            b.copy_(blk("B", it, me))
            place(a, b)
            c.zero_()
            sync_all()
            op(a, b, c)
            sync_all()
            want = sum(blk("A", it, i * q + kk).float() @ blk("B", it, kk * q + j).float() for kk in range(q))
            return close(c, want, 2e-2, 2e-2)

        names = _gemm.fused_config_names(P)
        if getattr(args, "gemm_config", None):
            names = [args.gemm_config]
        vs = [(n, lambda n=n: op.use(ks[fused_name(n, q, S)], _gemm.CONFIGS[n])) for n in names]
        best, vrows = F.sweep(env, args, example, label, vs, check, lambda: op(a, b, c))
        name, enter = vs[best]
        enter()
        ok = all([check(it) for it in range(args.checks)])
        times = {"config": name}
        if not args.no_bench:
            fns = {"fused graph us": lambda: op(a, b, c), "GEMM alone us": alone.fn()}
            if F.nccl_ok(env):
                aall = torch.empty((P, S, S), dtype=torch.bfloat16, device=env.device)
                ball = torch.empty((P, S, S), dtype=torch.bfloat16, device=env.device)

                def ref():   # every block everywhere, then this PE's row of A and column of B
                    dist.all_gather_into_tensor(aall, a)
                    dist.all_gather_into_tensor(ball, b)
                    arow = aall[i * q:(i + 1) * q].permute(1, 0, 2).reshape(S, q * S)
                    bcol = ball[j::q].reshape(q * S, S)
                    torch.matmul(arow, bcol, out=c)
                fns["torch+NCCL graph us"] = ref
            got = time_graphs(fns, args.graph_iters)
            fg, gg, tg = got["fused graph us"], got["GEMM alone us"], got.get("torch+NCCL graph us")
            fs = time_op(lambda: op(a, b, c), args.iters)
            ts = time_op(fns["torch+NCCL graph us"], args.iters) if F.nccl_ok(env) else None
            times.update({"fused graph us": fg, "fused stream us": fs, "GEMM alone us": gg,
                          "GEMM alone config": alone.best, "torch+NCCL graph us": tg, "torch+NCCL stream us": ts,
                          "CE calls per call": str(op.program.count() if op.program else 0),
                          "copies within this GPU": str(sum(x[0] == "copy" for x in op.local))})
            # Cannon's and SUMMA's bar: at least as fast as the unfused torch path
            times.update(F.bar_cells(fg, fs, gg, tg, ts, gemm_bar=None, torch_bar=1.0))
            ok = check(args.checks) and ok
    finally:
        op.close()
    return [row(example, label, env, all_ok(ok), **times)] + vrows
