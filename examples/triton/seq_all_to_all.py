"""Sequence-parallel all-to-all before attention (Ulysses-style).

Before attention each PE holds a slice of the sequence with all heads,
x [S/n, H, D]; attention needs the whole sequence for a slice of the heads,
out [S, H/n, D]. PE q receives heads [q*H/n, (q+1)*H/n) of every PE's tokens,
placed at the sender's sequence offset.

One Triton kernel does the exchange with no separate pack/unpack copies:
PER_DEST programs per destination PE q (one program per SM in all, so every
program is resident: each one waits for the others' data) read token blocks'
heads for PE q from x (a strided slice) and store them straight into PE q's
symmetric output at rows me*S/n + block (peer_ptr + tl.store); then each
adds 1 to PE q's counter (signal_op, release) and waits until its own PE's
counter shows all n * PER_DEST arrivals of this call (acquire). The output is double-buffered by call parity
(a PE's call-e+2 stores land in a buffer whose owner finished with call e
before sending its call-e+1 data). The wait target comes from a per-program
count of this parity's calls kept on the GPU, so the launch can be replayed
from a CUDA graph (captured in pairs of calls, so the parity stays in step).

    torchrun --nproc-per-node 4 examples/triton/seq_all_to_all.py --seq 32768 --heads 32 --dim 128

Reference: permute to [n, S/n, H/n, D] (contiguous), all_to_all_single,
view as [S, H/n, D].
"""
import torch
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def seq_all_to_all_kernel(ctx, out, x, counter, gen, S_LOC, HD, HD_LOC, NBLK, PER_DEST,
                          VEC: tl.constexpr, BS: tl.constexpr, BC: tl.constexpr):
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    pid = tl.program_id(0)
    g = gen + pid
    epoch = C.next_epoch(g)
    # PER_DEST programs per destination; the groups start at different peers
    q = (pid // PER_DEST + me) % npes
    dst = st.peer_ptr(ctx, out, q) + (me * S_LOC) * HD_LOC
    for t in range(pid % PER_DEST, NBLK, PER_DEST):
        tok = t * BS + tl.arange(0, BS)
        tmask = tok < S_LOC
        for c0 in range(0, HD_LOC, BC):
            col = c0 + tl.arange(0, BC)
            mask = tmask[:, None] & (col < HD_LOC)[None, :]
            vals = tl.load(x + tok[:, None] * HD + q * HD_LOC + col[None, :], mask=mask)
            ptrs = dst + tok[:, None] * HD_LOC + col[None, :]
            if VEC:
                ptrs = tl.max_contiguous(tl.multiple_of(ptrs, [16, 16]), [1, BC])
            tl.store(ptrs, vals, mask=mask)
    # one arrival per program at its destination; every PE expects
    # npes * PER_DEST of them per call
    st.signal_op(ctx, counter, 1, st.SIGNAL_ADD, q)
    st.signal_wait_until(ctx, counter, st.CMP_GE, epoch * npes * PER_DEST)
    C.end_epoch(g, epoch)


class SeqAllToAll:
    BS, BC = 16, 256

    def __init__(self, env, seq, heads, dim, dtype=torch.bfloat16):
        w = env.world
        if seq % w or heads % w:
            raise ValueError("seq and heads must be multiples of the PE count")
        self.env, self.s_loc, self.h, self.d = env, seq // w, heads, dim
        self.h_loc = heads // w
        self.blocks = triton.cdiv(self.s_loc, self.BS)
        # Every program waits for the others' data, so all of them must be
        # resident at once: at most one per SM (the same count on every PE).
        self.per_dest = max(1, min(C.num_sms(env.device) // w, self.blocks))
        self.vec = C.vec_ok(self.h_loc * dim, heads * dim)
        self.out = symm.zeros((2, seq, self.h_loc, dim), dtype)
        self.counters = symm.zeros((2, 1), torch.int64)
        self.gen = torch.zeros((2, w * self.per_dest), dtype=torch.int64, device=env.device)
        self.calls = 0
        self._launches = C.PreparedPerInput(self._prepare)
        symm.barrier()

    def _prepare(self, x):
        """One prepared launch per buffer parity, for input x."""
        env = self.env
        return [st.prepare(seq_all_to_all_kernel, (env.world * self.per_dest,), env.ctx,
                           self.out[par], x, self.counters[par], self.gen[par], self.s_loc,
                           self.h * self.d, self.h_loc * self.d, self.blocks, self.per_dest,
                           VEC=self.vec, BS=self.BS, BC=self.BC, num_warps=4)
                for par in (0, 1)]

    def __call__(self, x):
        par = self.calls % 2
        self.calls += 1
        self._launches.get(x)[par]()
        return self.out[par]

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.counters)
        symm.free_tensor(self.out)


def reference(x, world):
    s_loc, h, d = x.shape
    send = x.view(s_loc, world, h // world, d).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    C.REF.all_to_all_single(recv, send)
    return recv.view(world * s_loc, h // world, d)


def run(seq=32768, heads=32, dim=128, iters=50, bench=True, checks=3):
    env = C.setup()
    op = SeqAllToAll(env, seq, heads, dim)
    x = torch.empty(seq // env.world, heads, dim, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        x.normal_(generator=torch.Generator(device=env.device).manual_seed(51000 * it + env.rank))
        got = op(x).clone()
        ok &= torch.equal(got, reference(x, env.world))
    ok = C.all_ok(ok)
    t_symm = t_ref = None
    if bench:
        t_symm = C.bench(lambda: op(x), iters)
        t_ref = C.bench_ref(lambda: reference(x, env.world), iters)
    op.close()
    C.report(env, "seq_all_to_all", "S=%d H=%d D=%d bf16 [S/n,H,D] -> [S,H/n,D], %d iterations equal "
             "to NCCL's" % (seq, heads, dim, checks), ok,
             [("symm.triton", t_symm), ("permute + NCCL all_to_all_single", t_ref)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], seq=32768, heads=32, dim=128)
