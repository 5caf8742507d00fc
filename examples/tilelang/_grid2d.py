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

The host side (Grid2D) runs the call: entered flags to every peer, the
example's sends, the fused kernel, the join, and the one-block kernel that
reports a wait that gave up and zeroes the flags (after the join: Cannon's
forwards wait on the same flags). The reference is the unfused torch path:
dist.all_gather_into_tensor of every A and B block (NCCL), the row and
column rearranged, torch.matmul."""
import math

import torch

import symm

import _copyengine as ce
import _fused as F
import _gemm
from _common import all_ok, close, rand, row, skipped, sync_all

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
    for c in _gemm.config_names(world):
        out[fused_name(c, q, S)] = (lambda c=c: k_grid_gemm(q, S, PIECES, _gemm.CONFIGS[c]))
    out[_gemm.finish_name(2 * q * PIECES)] = lambda: _gemm.k_finish(2 * q * PIECES)
    return out


class Grid2D:
    """The buffers and the call; the example fills self.sends (queued on the
    side stream after the entered flags) and the kernel's (first, skip_a,
    skip_b). A and B are the inputs unless the example places them in a slot."""

    def __init__(self, env, fused, finish, q, S, cfg):
        P, me = env.world, env.rank
        self.env, self.fused, self.finish, self.q, self.S = env, F.launcher(fused, cfg), finish, q, S
        self.i, self.j = divmod(me, q)
        self.abuf = symm.zeros((q, S, S), torch.bfloat16)
        self.bbuf = symm.zeros((q, S, S), torch.bfloat16)
        self.flags = symm.zeros((2 * q * PIECES,), torch.uint64)   # aflag, then bflag
        self.aflag, self.bflag = self.flags[:q * PIECES], self.flags[q * PIECES:]
        self.entered = symm.zeros((P,), torch.uint64)
        self.rec = torch.zeros(8, dtype=torch.uint64, device=env.device)
        self.one = ce.ones(env.device)
        self.side = ce.Side(env.device)   # even alone: Cannon's skew is a local copy then
        self.announce = [ce.peer(self.entered.data_ptr() + me * 8, p) for p in range(P) if p != me]
        self.sends = []      # ("copy", dst, src, n) / ("wait", addr) / ("set", addr) / ("flag", dst)
        self.first, self.skip_a, self.skip_b = 0, -1, -1
        symm.barrier()

    def pe(self, i, j):
        return (i % self.q) * self.q + (j % self.q)

    def piece_bytes(self):
        return self.S // PIECES * self.S * 2

    def send_block(self, buf, flags, src_slot, dst_pe, dst_slot, src_ptr=None, wait_src=False):
        """Queue block buf[src_slot] (or the tensor at src_ptr) into dst_pe's
        buf[dst_slot], piece by piece, each followed by dst_pe's flag; with
        wait_src, each piece once this PE's own flag for it is up (forwarding
        what is still arriving). The first send to a peer waits for its
        entered flag."""
        me, n = self.env.rank, self.piece_bytes()
        block = self.S * self.S * 2
        base = buf.data_ptr() + src_slot * block if src_ptr is None else src_ptr
        if dst_pe != me and ("entered", dst_pe) not in self._greeted:
            self._greeted.add(("entered", dst_pe))
            self.sends.append(("handshake", self.entered.data_ptr() + dst_pe * 8))
        for p in range(PIECES):
            if wait_src:
                self.sends.append(("wait", flags.data_ptr() + (src_slot * PIECES + p) * 8))
            dst = buf.data_ptr() + dst_slot * block + p * n
            flag = flags.data_ptr() + (dst_slot * PIECES + p) * 8
            if dst_pe != me:
                dst, flag = ce.peer(dst, dst_pe), ce.peer(flag, dst_pe)
            self.sends.append(("copy", dst, base + p * n, n))
            self.sends.append(("flag", flag) if dst_pe != me else ("set", flag))

    def plan(self):
        self.sends, self._greeted = [], set()

    def __call__(self, a, b, c):
        s, one = self.side, self.one.data_ptr()
        if self.sends:
            s.begin()
        # the GEMM first (see AGGemm.__call__ in ag_gemm.py)
        self.fused(self.env.ctx, self.abuf, self.bbuf, c, self.aflag, self.bflag, self.rec,
                   self.first, self.skip_a, self.skip_b)
        if self.sends:
            for dst in self.announce:
                s.copy(dst, one, 8)
            for op in self.sends:
                if op[0] == "copy":
                    s.copy(op[1], op[2], op[3])
                elif op[0] == "flag":
                    s.copy(op[1], one, 8)
                elif op[0] == "set":
                    s.write(op[1], 1)
                elif op[0] == "wait":
                    s.wait_eq(op[1], 1)
                else:   # handshake: the peer entered this call (its buffers are free)
                    s.wait_eq(op[1], 1)
                    s.write(op[1], 0)
        if self.sends:
            s.end()      # before the flags are zeroed: forwards wait on them
        self.finish(self.env.ctx, self.flags, self.rec)

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.abuf, self.bbuf, self.flags, self.entered):
            symm.free_tensor(t)


def run(env, ks, cfg, args, example, make):
    """Check and time one example: make(env, fused, finish, q, S, a, b, cfg)
    returns the Grid2D with its plan (reading this PE's blocks from a and b)
    and a function (a, b) -> None that puts them where the plan reads them."""
    import torch.distributed as dist
    P, me = env.world, env.rank
    q = grid_side(P)
    S = cfg["s"]
    label = "%dx%d grid of %dx%d blocks (M=N=K=%d)" % (q or 0, q or 0, S, S, (q or 0) * S)
    if q is None:
        return [skipped(example, "%d PEs" % P, env, "needs a square number of PEs")]
    i, j = divmod(me, q)
    best, alone = F.pick_config(env, ks, S, S, q * S, args)
    a = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    b = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    c = torch.empty((S, S), dtype=torch.bfloat16, device=env.device)
    op, place = make(env, ks[fused_name(best, q, S)], ks[_gemm.finish_name(2 * q * PIECES)], q, S, a, b,
                     _gemm.CONFIGS[best])
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

        ok = all([check(it) for it in range(args.checks)])
        times = {"config": best}
        if not args.no_bench:
            fg, fs = F.timed(env, lambda: op(a, b, c), args)
            gg = alone.get(best)
            tg = ts = None
            if F.nccl_ok(env):
                aall = torch.empty((P, S, S), dtype=torch.bfloat16, device=env.device)
                ball = torch.empty((P, S, S), dtype=torch.bfloat16, device=env.device)

                def ref():   # every block everywhere, then this PE's row of A and column of B
                    dist.all_gather_into_tensor(aall, a)
                    dist.all_gather_into_tensor(ball, b)
                    arow = aall[i * q:(i + 1) * q].permute(1, 0, 2).reshape(S, q * S)
                    bcol = ball[j::q].reshape(q * S, S)
                    torch.matmul(arow, bcol, out=c)
                tg, ts = F.timed(env, ref, args)
            times.update({"fused graph us": fg, "fused stream us": fs, "GEMM alone us": gg,
                          "torch+NCCL graph us": tg, "torch+NCCL stream us": ts,
                          "CE calls per call": str(op.side.calls)})
            # Cannon's and SUMMA's bar: at least as fast as the unfused torch path
            times.update(F.bar_cells(fg, fs, gg, tg, ts, gemm_bar=None, torch_bar=1.0))
            ok = check(args.checks) and ok
    finally:
        op.close()
    return [row(example, label, env, all_ok(ok), **times)]
