"""symm.cute on GPUs: every family of the device API inside CuTe DSL kernels
(tests/python/cute_kernels.py), checked against references built from the
inputs' seeds, fresh data every iteration. Run by examples/cute/run_gpu.py
(which also runs the examples) under torchrun on 1, 2 and 4 PEs:

    torchrun --nproc-per-node N examples/cute/run_gpu.py --cubins build-cute
"""
import torch

import symm

BLOCK = 128


def _sym(shape, dtype=torch.float32, zero=True):
    return symm.zeros(shape, dtype) if zero else symm.tensor(shape, dtype)


def _rand(env, seed, pe, n, integer=False):
    g = env.gen(seed, pe)
    if integer:
        return torch.randint(-50, 50, (n,), generator=g, device=env.device).float()
    return torch.randn(n, generator=g, device=env.device)


def _launch(env, name, grid, *args):
    env.k[name](grid, env.ctx, *args)
    torch.cuda.synchronize()
    symm.barrier()


def check_pg(env):
    n = 1000
    dst, src, got = _sym(n), _sym(n), _sym(n)
    prv = (env.rank - 1) % env.world
    for _ in range(env.iters):
        s = env.next_seed()
        src.copy_(_rand(env, s, env.rank, n))
        dst.zero_(), got.zero_()
        symm.barrier()
        _launch(env, "t_pg", 1, dst, src, got, n)
        ref = _rand(env, s, prv, n)
        if not (torch.equal(dst, ref) and torch.equal(got, ref)):
            return False, "p/g mismatch"
    return True, "p_f32/g_f32 (views), %d iterations" % env.iters


def check_bulk(env):
    n, nseg = 1001, 6   # odd sizes: segments start at every alignment
    dst, got, src = _sym(n * nseg), _sym(n * nseg), _sym(n * nseg)
    prv = (env.rank - 1) % env.world
    names = ["put/get", "put/get_nbi", "_warp", "_warp_nbi", "_block", "_block_nbi"]
    for _ in range(env.iters):
        s = env.next_seed()
        src.copy_(_rand(env, s, env.rank, n * nseg))
        dst.zero_(), got.zero_()
        symm.barrier()
        _launch(env, "t_bulk", nseg, dst, got, src, n)
        ref = _rand(env, s, prv, n * nseg)
        for b in range(nseg):
            seg = slice(b * n, (b + 1) * n)
            if not torch.equal(dst[seg], ref[seg]):
                return False, "put variant %s wrong" % names[b]
            if not torch.equal(got[seg], ref[seg]):
                return False, "get variant %s wrong" % names[b]
    return True, "put/get x thread/warp/block x blocking/nbi, %d iterations" % env.iters


def check_put_signal(env):
    n, nseg = 777, 12
    dst, got, src = _sym(n * nseg), _sym(n * nseg), _sym(n * nseg)
    sig = _sym(nseg, torch.uint64)
    prv = (env.rank - 1) % env.world
    for it in range(1, env.iters + 1):
        s = env.next_seed()
        src.copy_(_rand(env, s, env.rank, n * nseg))
        dst.zero_(), got.zero_()
        symm.barrier()
        _launch(env, "t_put_signal", nseg, dst, got, src, sig, n, it)
        ref = _rand(env, s, prv, n * nseg)
        if not torch.equal(got, ref):
            bad = [b for b in range(nseg) if not torch.equal(got[b * n:(b + 1) * n], ref[b * n:(b + 1) * n])]
            return False, "data not there when the signal was (segments %s)" % bad
        if _signed(sig).tolist() != [it] * nseg:
            return False, "signal words %s, expected %d" % (_signed(sig).tolist(), it)
    return True, "put_signal x 3 scopes x nbi x SET/ADD + signal_wait_until, %d iterations" % env.iters


def check_words(env):
    w32 = _sym(1, torch.int32)
    w64 = _sym(1, torch.int64)
    u32 = _sym(1, torch.uint32)
    u64 = _sym(2, torch.uint64)
    f32 = _sym(1, torch.float32)
    f64 = _sym(1, torch.float64)
    out = _sym(16, torch.float64)
    me, n = env.rank, env.world
    prv, pp = (me - 1) % n, (me - 2) % n
    for e in range(1, env.iters + 1):
        out.zero_()
        symm.barrier()
        _launch(env, "t_words", 1, w32, w64, u32, u64, f32, f64, out, e)
        want = [e * 3 + prv, e * 5 + prv, e * 7 + prv, e * 11 + prv, e + 0.5, e + 0.25,
                e * 3 + pp, e * 5 + pp, e * 7 + pp, e * 11 + pp, e + 0.5, e + 0.25,
                e, e * 7 + prv, e * 3 + prv, e * 5 + prv]
        got = out.tolist()
        if got != [float(x) for x in want]:
            return False, "got %s, want %s" % (got, want)
    return True, "st/ld x 6 types x sems/scopes, signal_op/fetch/wait, wait_until x 3 types"


def _signed(w):
    """A view of an integer tensor as the signed type of its width (torch's
    unsigned 32/64-bit types have few operations)."""
    return w.view(torch.int32 if w.element_size() == 4 else torch.int64)


def check_amo(env):
    words = {t: _sym(16, t) for t in (torch.int32, torch.int64, torch.uint32, torch.uint64)}
    out = _sym(4 * BLOCK + 2, torch.int64)
    N = BLOCK
    for _ in range(env.iters):
        for w in words.values():
            _signed(w).zero_()
            _signed(w)[6] = -1                      # the and-word starts all ones
        _signed(words[torch.int32])[8] = -1         # fetch_and's word too
        out.zero_()
        symm.barrier()
        _launch(env, "t_amo", 1, words[torch.int32], words[torch.int64], words[torch.uint32],
                words[torch.uint64], out)
        for t, w in words.items():
            mask = (1 << (8 * w.element_size())) - 1
            v = [x & mask for x in _signed(w).tolist()]
            want = [N, N, 2 * N, N, 0xFFFFFFFF, 3, mask ^ 0xFFFF]
            if v[:7] != want:
                return False, "%s words %s, want %s" % (t, v[:7], want)
        u64w = _signed(words[torch.uint64]).tolist()
        if u64w[7] != N:
            return False, "compare_swap chain reached %d, want %d" % (u64w[7], N)
        if _signed(words[torch.uint32])[8].item() != -1 or \
                words[torch.int64][8].item() != 3 or words[torch.int32][8].item() != -65536:
            return False, "fetch_or/xor/and words wrong"
        o = out.tolist()
        for k in range(4):
            if sum(o[k * N:(k + 1) * N]) != N * (N - 1) + N * (N - 1) // 2:
                return False, "fetch_add/fetch_inc results of type %d sum to %d" % (
                    k, sum(o[k * N:(k + 1) * N]))
        if o[4 * N] != 0 or o[4 * N + 1] != 5:
            return False, "swap/set/fetch on own PE: %s" % o[4 * N:]
    return True, "14 atomic ops x i32/i64/u32/u64 on the next PE, %d threads" % N


def check_sync(env):
    n = 37
    data, out = _sym(n * env.world), _sym(n * env.world)
    for e in range(1, max(env.iters, 4) + 1):
        data.zero_()
        symm.barrier()
        _launch(env, "t_sync", 1, data, out, n, e)
        want = torch.arange(n * env.world, device=env.device, dtype=torch.float32) + e * 1000
        if not torch.equal(out, want):
            return False, "variant %d: stores not all visible after the barrier" % (e % 4)
    return True, "barrier_block/_warp/thread, sync_block, fence*, quiet_block"


def check_coll(env):
    n, w, me = 1000, env.world, env.rank
    m = n * w
    ar, src, ag, rs, a2a, bc = (_sym(m), _sym(m), _sym(m), _sym(n), _sym(m), _sym(m))
    ar2 = _sym(2 * m)
    for _ in range(env.iters):
        s = env.next_seed()
        srcs = [_rand(env, s, p, m, integer=True) for p in range(w)]
        src.copy_(srcs[me])
        symm.barrier()
        _launch(env, "t_coll", 1, ar, src, ag, rs, a2a, bc, n)
        total = torch.stack(srcs).sum(0)
        checks = {
            "all_reduce_block": torch.equal(ar, total),
            "reduce_scatter_block": torch.equal(rs, total[me * n:(me + 1) * n]),
            "all_gather_block": torch.equal(ag, torch.cat([x[:n] for x in srcs])),
            "all_to_all_block": torch.equal(a2a, torch.cat([x[me * n:(me + 1) * n] for x in srcs])),
            "broadcast_block": torch.equal(bc, srcs[0]),
        }
        _launch(env, "t_coll_grid", 4, ar2, src, n)
        checks["all_reduce_ex_grid"] = torch.equal(ar2[:m], total)
        checks["all_reduce_grid (max)"] = torch.equal(ar2[m:], torch.stack(srcs).max(0).values)
        bad = [k for k, v in checks.items() if not v]
        if bad:
            return False, "wrong: " + ", ".join(bad)
    return True, "all_reduce/reduce_scatter/all_gather/all_to_all/broadcast (views), grid forms"


CHECKS = [("p/g", check_pg), ("put/get", check_bulk), ("put_signal", check_put_signal),
          ("ld/st/signal/wait", check_words), ("atomics", check_amo),
          ("fence/quiet/barrier", check_sync), ("collectives", check_coll)]


def run(env):
    """[(name, ok, detail)] for every family, each checked on every PE."""
    rows = []
    for name, fn in CHECKS:
        try:
            ok, detail = fn(env)
        except Exception as e:  # noqa: BLE001 - a failing family is a row, not the end
            ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:200])
        torch.cuda.synchronize()
        ok = _all(ok)
        rows.append((name, ok, detail))
        env.log("cute %-22s %s  %s" % (name, "ok" if ok else "FAILED", detail))
    return rows


def _all(ok):
    return all(x == b"1" for x in symm.host_allgather(b"1" if ok else b"0"))
