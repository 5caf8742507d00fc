"""The cases of symm.moe.deep_ep's tests, shared by the CPU run (ranks as
threads over deepep_fake.py) and the GPU run (test_gpu_deepep.py, one process
per rank under torchrun). Every rank builds every rank's data from seeds, so
each compares every tensor DeepEP's API returns with a torch reference of its
own, with no communication beyond the calls under test.

A case is a function of a Ctx: the module (dep), rank, n, device, whether it
runs on GPUs, make_buffer(**kw) (a Buffer over the job's group), sync() (wait
for the device) and barrier().
"""
import re

import torch

MASK32 = (1 << 32) - 1


class Ctx:
    def __init__(self, dep, rank, n, device, gpu, make_buffer, sync, barrier):
        self.dep, self.rank, self.n, self.device, self.gpu = dep, rank, n, device, gpu
        self.make_buffer, self.sync, self.barrier = make_buffer, sync, barrier


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def routing(seed, T, E, K, n, avoid=None, drop=True):
    """Top-k experts of T tokens (distinct per token) and their weights; with
    drop, some slots -1 and token 3 routed nowhere; with avoid, no expert of
    rank `avoid` is chosen (that rank receives nothing)."""
    g = _gen(seed)
    L = E // n
    allowed = torch.tensor([e for e in range(E) if avoid is None or e // L != avoid], dtype=torch.int64)
    k = min(K, allowed.numel())
    idx = torch.full((T, K), -1, dtype=torch.int64)
    if T:
        idx[:, :k] = allowed[torch.rand((T, allowed.numel()), generator=g).argsort(dim=1)[:, :k]]
    if drop and T:
        idx[::5, -1] = -1
        if T > 3:
            idx[3, :] = -1
    w = torch.rand((T, K), generator=g) + 0.25
    return idx, w


def tokens(seed, T, H, fp8):
    """x of T tokens: bf16, or fp8 e4m3 with float32 scales per 128 (values of
    the e4m3 grid, scales powers of two so dequantised values are exact)."""
    g = _gen(seed)
    if not fp8:
        return (torch.randn((T, H), generator=g) * 2).to(torch.bfloat16), None
    x = ((torch.rand((T, H), generator=g) - 0.5) * 200).to(torch.float8_e4m3fn)
    s = torch.exp2(torch.randint(-3, 3, (T, (H + 127) // 128), generator=g).float())
    return x, s


class Rank:
    """One rank's batch, on the CPU (every rank can rebuild it)."""

    def __init__(self, seed, r, T, E, K, H, n, fp8=False, avoid=None):
        self.T = T
        self.idx, self.w = routing(seed * 1009 + r, T, E, K, n, avoid=avoid)
        self.x, self.s = tokens(seed * 7919 + r, T, H, fp8)


def batches(seed, n, Ts, E, K, H, fp8=False, avoid=None):
    return [Rank(seed, r, Ts[r], E, K, H, n, fp8, avoid) for r in range(n)]


def dests(idx, L):
    valid = idx >= 0
    return torch.where(valid, torch.div(idx, L, rounding_mode="floor"), torch.full_like(idx, -1))


def in_ranks(idx, L, n):
    d = dests(idx, L)
    return torch.stack([(d == r).any(dim=1) for r in range(n)], dim=1) if n else None


def expert_out(x, s, r):
    """The 'expert' of rank r: bf16(dequantised row x (r + 1))."""
    v = x.float()
    if s is not None:
        v = v * s.repeat_interleave(128, dim=1)[:, :x.size(1)]
    return (v * (r + 1)).to(torch.bfloat16)


def eq(got, want, what):
    got = got.cpu()
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape))
    if got.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    assert got.dtype == want.dtype, "%s: dtype %s, expected %s" % (what, got.dtype, want.dtype)
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        raise AssertionError("%s: %d entries differ, first at %s: %s vs %s" % (
            what, bad.size(0), tuple(bad[0].tolist()), got[tuple(bad[0])].item(), want[tuple(bad[0])].item()))


def close(got, want, what, rtol=1.6e-2, atol=1e-2):
    got = got.cpu().float()
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape))
    torch.testing.assert_close(got, want.float(), rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))


# ---------------------------------------------------------------------------
# normal mode
# ---------------------------------------------------------------------------

def ht_reference(data, me, n, E):
    """What rank `me` receives: rows by source rank then token; DeepEP's
    mapped indices and weights; sources; counts."""
    L = E // n
    xs, ss, ii, ww, src = [], [], [], [], []
    counts = torch.zeros((n, n), dtype=torch.int64)
    per_expert = torch.zeros(L, dtype=torch.int64)
    for s, d in enumerate(data):
        dst = dests(d.idx, L)
        for j in range(n):
            counts[s, j] = (dst == j).any(dim=1).sum()
        sel = (dst == me).any(dim=1).nonzero().flatten()
        xs.append(d.x[sel])
        if d.s is not None:
            ss.append(d.s[sel])
        loc = dst[sel] == me
        ii.append(torch.where(loc, d.idx[sel] - me * L, torch.full_like(d.idx[sel], -1)))
        ww.append(torch.where(loc, d.w[sel], torch.zeros_like(d.w[sel])))
        src.append(sel.to(torch.int32))
        for l in range(L):
            per_expert[l] += (d.idx == me * L + l).sum()
    return dict(x=torch.cat(xs), s=torch.cat(ss) if ss else None, idx=torch.cat(ii), w=torch.cat(ww),
                src=torch.cat(src), prefix=counts.cumsum(dim=0).to(torch.int32), per_expert=per_expert.tolist())


def combine_reference(data, me, n, E, bias=()):
    """combine of rows every rank turned into expert_out(row, r): the sum over
    the ranks a token went to, in rank order, in float32, then bf16; biases
    added to that (as the Buffer adds them)."""
    d, L = data[me], E // n
    dst = dests(d.idx, L)
    acc = torch.zeros((d.T, d.x.size(1)), dtype=torch.float32)
    for r in range(n):
        on = (dst == r).any(dim=1)
        acc += torch.where(on.unsqueeze(1), expert_out(d.x, d.s, r).float(), torch.zeros(()))
    out = acc.to(torch.bfloat16)
    if bias:
        f = out.float()
        for b in bias:
            f = f + b.float()
        out = f.to(torch.bfloat16)
    return out


def weights_reference(data, me, n, E):
    """combined_topk_weights when every rank returns recv_topk_weights x (rank + 1)."""
    d, L = data[me], E // n
    dst = dests(d.idx, L)
    return torch.where(dst >= 0, d.w * (dst + 1).float(), torch.zeros_like(d.w))


def _dev(t, ctx):
    return None if t is None else t.to(ctx.device)


def ht_round(ctx, buf, seed, Ts, E, K, H, fp8=False, with_topk=True, async_mode=False, previous=False,
             alignment=1, avoid=None, worst=False, cached=True, bias=False, wide=False):
    """One dispatch / cached dispatch / combine round of the normal mode, every output checked.
    wide: combine's topk_weights get one column more than the top-k (its first again), which symm's
    combine cannot carry: the Buffer's exchange of their own."""
    dep, me, n = ctx.dep, ctx.rank, ctx.n
    data = batches(seed, n, Ts, E, K, H, fp8, avoid)
    d = data[me]
    x = _dev(d.x, ctx)
    xin = (x, _dev(d.s, ctx)) if fp8 else x
    idx, w = _dev(d.idx, ctx), _dev(d.w, ctx)
    what = "normal %s topk=%s async=%s previous=%s align=%d avoid=%s worst=%s wide=%s seed %d" % (
        "fp8" if fp8 else "bf16", with_topk, async_mode, previous, alignment, avoid, worst, wide, seed)
    per_rank, per_rdma, per_expert, in_rank, ev = buf.get_dispatch_layout(
        idx, E, previous_event=buf.capture() if previous else None, async_finish=async_mode)
    if async_mode:
        ev.current_stream_wait()
    assert per_rdma is None, what
    L = E // n
    eq(in_rank, in_ranks(d.idx, L, n), what + ": is_token_in_rank")
    eq(per_rank, in_ranks(d.idx, L, n).sum(dim=0).to(torch.int32), what + ": num_tokens_per_rank")
    want_pe = torch.zeros(E, dtype=torch.int32)
    for e in range(E):
        want_pe[e] = (d.idx == e).sum()
    eq(per_expert, want_pe, what + ": num_tokens_per_expert")

    args = dict(x=xin, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
                expert_alignment=alignment, async_finish=async_mode)
    if with_topk:
        args.update(topk_idx=idx, topk_weights=w)
    if previous:
        args["previous_event"] = buf.capture()
    ref = ht_reference(data, me, n, E)
    R = ref["x"].size(0)
    W = max(Ts) * n
    if worst:
        args["num_worst_tokens"] = W
    recv_x, recv_idx, recv_w, lst, handle, event = buf.dispatch(**args)
    if async_mode:
        event.current_stream_wait()
    else:
        assert event.event is None, what
    if fp8:
        assert isinstance(recv_x, tuple) and len(recv_x) == 2, what
        recv_x, recv_s = recv_x
    rows = W if worst else R
    assert isinstance(handle, tuple) and len(handle) == 6, what
    eq(recv_x[:R], ref["x"], what + ": recv_x")
    assert recv_x.size(0) == rows, "%s: recv_x has %d rows, expected %d" % (what, recv_x.size(0), rows)
    if fp8:
        eq(recv_s[:R], ref["s"], what + ": recv_x scales")
        assert recv_s.size(0) == rows, what
    eq(handle[0], ref["prefix"], what + ": rank_prefix_matrix")
    eq(handle[3][:R], ref["src"], what + ": recv_src_idx")
    assert handle[4] is in_rank and handle[1] is None and handle[2] is None and handle[5] is None, what
    if with_topk:
        eq(recv_idx[:R], ref["idx"], what + ": recv_topk_idx")
        eq(recv_w[:R], ref["w"], what + ": recv_topk_weights")
        assert recv_idx.dtype == torch.int64 and recv_idx.size(0) == rows and recv_w.size(0) == rows, what
        if worst:
            eq(recv_idx[R:], torch.full((rows - R, K), -1, dtype=torch.int64), what + ": recv_topk_idx past the rows")
    else:
        assert recv_idx is None and recv_w is None, what
    if worst:
        assert lst == [], what
    else:
        assert lst == [(c + alignment - 1) // alignment * alignment for c in ref["per_expert"]], \
            "%s: num_recv_tokens_per_expert_list %s, expected %s aligned to %d" % (what, lst, ref["per_expert"],
                                                                                  alignment)

    if cached and not worst:
        cx, ci, cw, cl, ch, cev = buf.dispatch((x, _dev(d.s, ctx)) if fp8 else x, handle=handle,
                                               async_finish=async_mode,
                                               previous_event=buf.capture() if previous else None)
        if async_mode:
            cev.current_stream_wait()
        assert ci is None and cw is None and cl is None and ch is None, what
        if fp8:
            cx, cs = cx
            eq(cs, ref["s"], what + ": cached dispatch scales")
        eq(cx, ref["x"], what + ": cached dispatch")

    # combine: every rank returns expert_out(row, its rank) and recv weights x (rank + 1)
    y = expert_out(recv_x.cpu(), recv_s.cpu() if fp8 else None, me)
    y[R:] = 0
    cargs = dict(x=_dev(y, ctx), handle=handle, async_finish=async_mode)
    if with_topk:
        cargs["topk_weights"] = recv_w * (me + 1)
        if wide:
            cargs["topk_weights"] = torch.cat([cargs["topk_weights"], cargs["topk_weights"][:, :1]], dim=1)
    biases = ()
    if bias:
        g = _gen(seed + 17 + me)
        biases = ((torch.randn((d.T, H), generator=g)).to(torch.bfloat16),
                  (torch.randn((d.T, H), generator=g)).to(torch.bfloat16))
        cargs["bias"] = tuple(_dev(b, ctx) for b in biases)
    if previous:
        cargs["previous_event"] = buf.capture()
    out, cw, cev = buf.combine(**cargs)
    if async_mode:
        cev.current_stream_wait()
    close(out, combine_reference(data, me, n, E, biases).float(), what + ": combined_x")
    if with_topk:
        wref = weights_reference(data, me, n, E)
        if wide:
            wref = torch.cat([wref, wref[:, :1]], dim=1)
        close(cw, wref, what + ": combined_topk_weights", rtol=1e-6, atol=1e-6)
    else:
        assert cw is None, what
    ctx.sync()
    return data


def layout_indices(seed, T, K, E):
    """Fresh top-k indices for get_dispatch_layout: experts drawn at random
    (one named twice by a token now and then), -1 slots, other negatives and
    values past the experts (both count nowhere)."""
    g = _gen(seed)
    idx = torch.randint(0, E, (T, K), generator=g)
    r = torch.rand((T, K), generator=g)
    if K > 1:
        idx[:, 1:] = torch.where(r[:, 1:] < 0.05, idx[:, :-1], idx[:, 1:])
    idx = torch.where((r >= 0.05) & (r < 0.15), torch.full_like(idx, -1), idx)
    idx = torch.where((r >= 0.15) & (r < 0.18), idx + E, idx)
    return torch.where((r >= 0.18) & (r < 0.20), -idx - 2, idx)


def layout_reference(idx, E, n):
    """(num_tokens_per_rank, num_tokens_per_expert, is_token_in_rank) as DeepEP
    forms them: slots outside [0, E) count nowhere, a token once per rank."""
    L, ok = E // n, (idx >= 0) & (idx < E)
    in_rank = torch.stack([((idx // L == r) & ok).any(dim=1) for r in range(n)], dim=1) if idx.size(0) else \
        torch.zeros((0, n), dtype=torch.bool)
    per_expert = torch.bincount(idx[ok].reshape(-1), minlength=E).to(torch.int32)
    return in_rank.sum(dim=0, dtype=torch.int32), per_expert, in_rank


def case_layout(ctx, raises):
    """get_dispatch_layout against layout_reference on fresh indices: int64 and
    int32, 0 and 1 tokens, token counts off a warp's multiple, top-k 1 to 9,
    experts past one counting block (GPU); async_finish with previous_event;
    bad arguments raised before anything runs (on the CPU stand-in: no layout
    call made), the Buffer working on afterwards; on GPUs, the call captured
    in a CUDA graph and replayed with fresh indices."""
    dep, n, me = ctx.dep, ctx.n, ctx.rank
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True)
    try:
        shapes = [(0, 8, 8 * n), (1, 1, n), (33, 3, 4 * n), (70, 9, 16 * n)]
        if ctx.gpu:
            shapes += [(4096, 8, 256 if 256 % n == 0 else 64 * n), (1500, 6, 1025 * n), (999, 2, 8192)]
        for i, (T, K, E) in enumerate(shapes):
            for dtype in (torch.int64, torch.int32):
                idx = layout_indices(4000 + 17 * i + 101 * me + (dtype == torch.int32), T, K, E).to(dtype)
                what = "layout T=%d K=%d E=%d %s" % (T, K, E, dtype)
                pr, rdma, pe, ir, ev = buf.get_dispatch_layout(_dev(idx, ctx), E)
                assert rdma is None and ev.event is None, what
                want = layout_reference(idx.long(), E, n)
                eq(pr, want[0], what + ": num_tokens_per_rank")
                eq(pe, want[1], what + ": num_tokens_per_expert")
                eq(ir, want[2], what + ": is_token_in_rank")
        idx = layout_indices(4999 + me, 50, 4, 8 * n)
        pr, _, pe, ir, ev = buf.get_dispatch_layout(_dev(idx, ctx), 8 * n, previous_event=buf.capture(),
                                                    async_finish=True)
        ev.current_stream_wait()
        want = layout_reference(idx, 8 * n, n)
        eq(pr, want[0], "async layout: per rank")
        eq(pe, want[1], "async layout: per expert")
        eq(ir, want[2], "async layout: in rank")

        good = _dev(idx, ctx)
        calls = getattr(buf._engine, "calls", {}).get("layout")
        bad = [(TypeError, "topk_idx is torch.float32", (good.float(), 8 * n), {}),
               (ValueError, "2 dimensions", (good.reshape(-1), 8 * n), {}),
               (ValueError, "contiguous", (good.t(), 8 * n), {}),
               (ValueError, "not a multiple of the %d ranks" % n, (good, 8 * n + 1), {}) if n > 1 else
               (ValueError, "num_experts must be >= 1", (good, 0), {}),
               (TypeError, "num_experts must be an int", (good, 8.0 * n), {}),
               (TypeError, "previous_event must be an EventOverlap", (good, 8 * n), {"previous_event": 3}),
               (ValueError, "allocate_on_comm_stream=True needs", (good, 8 * n), {"allocate_on_comm_stream": True})]
        if ctx.gpu:
            bad.append((ValueError, "this rank runs on", (idx, 8 * n), {}))
        for exc, match, args, kw in bad:
            with raises(exc, match=re.escape(match)):
                buf.get_dispatch_layout(*args, **kw)
        assert getattr(buf._engine, "calls", {}).get("layout") == calls, "a refused layout ran"
        pr, _, pe, ir, _ = buf.get_dispatch_layout(good, 8 * n)
        eq(pr, want[0], "layout after refusals: per rank")
        eq(ir, want[2], "layout after refusals: in rank")
        if ctx.gpu:  # captured once, replayed with fresh indices
            E = 32 * n
            static = torch.zeros((300, 8), dtype=torch.int64, device=ctx.device)
            (pr, _, pe, ir, _), g = capture_graph(lambda: buf.get_dispatch_layout(static, E))
            for rep in range(3):
                idx = layout_indices(6000 + 10 * me + rep, 300, 8, E)
                static.copy_(idx)
                g.replay()
                ctx.sync()
                want = layout_reference(idx, E, n)
                eq(pr, want[0], "layout replay %d: per rank" % rep)
                eq(pe, want[1], "layout replay %d: per expert" % rep)
                eq(ir, want[2], "layout replay %d: in rank" % rep)
    finally:
        buf.destroy()


def case_layout_and_rounds(ctx, fp8, async_mode, previous):
    """DeepEP's test matrix for one x type: with and without top-k, the
    cached dispatch, num_worst_tokens, combine with weights (in symm's combine;
    wider than the top-k once, with num_worst_tokens once); a rank with no
    tokens and a rank that receives nothing."""
    n = ctx.n
    E, K, H = (16, 3, 256) if not ctx.gpu else (32, 4, 512)
    Tmax = 24 if not ctx.gpu else 200
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True)
    try:
        seed = 11 + 3 * fp8 + 5 * async_mode + 7 * previous
        for it, (with_topk, worst, avoid, empty) in enumerate(
                [(True, False, None, None), (False, False, None, None), (True, True, None, None),
                 (True, False, n - 1 if n > 1 else None, 0)]):
            Ts = [Tmax - 3 * r - it for r in range(n)]
            if empty is not None:
                Ts[empty] = 0
            ht_round(ctx, buf, seed + it, Ts, E, K, H, fp8=fp8, with_topk=with_topk, async_mode=async_mode,
                     previous=previous, alignment=1 + 3 * (it % 2), avoid=avoid, worst=worst, bias=(it == 3),
                     wide=(it == 3 or (it == 2 and fp8)))
            ctx.barrier()
    finally:
        buf.destroy()


def case_in_flight(ctx):
    """Two dispatches in flight, combined in either order; a handle combined
    twice and one whose symm handle was taken by later dispatches (both run
    the routing again, with a warning); a num_tokens above the agreed bound
    makes the ranks agree on a larger one."""
    n = ctx.n
    E, K, H = (16, 3, 256) if not ctx.gpu else (32, 4, 512)
    T = 20 if not ctx.gpu else 160
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True)
    try:
        rounds = []
        for j in range(3):
            data = batches(500 + j, n, [T - j - r for r in range(n)], E, K, H)
            d = data[ctx.rank]
            idx, w = _dev(d.idx, ctx), _dev(d.w, ctx)
            pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
            out = buf.dispatch(_dev(d.x, ctx), num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe,
                               topk_idx=idx, topk_weights=w)
            rounds.append((data, out))
        assert not buf._warned
        for j in (1, 0, 2, 0):  # 0 again: combined already; (1, 0, 2): 0's symm handle went to dispatch 2
            data, (rx, ri, rw, _, handle, _) = rounds[j]
            y = expert_out(rx.cpu(), None, ctx.rank)
            out, cw, _ = buf.combine(_dev(y, ctx), handle, topk_weights=rw * (ctx.rank + 1))
            close(out, combine_reference(data, ctx.rank, n, E), "in flight: combine of dispatch %d" % j)
            close(cw, weights_reference(data, ctx.rank, n, E), "in flight: weights of dispatch %d" % j,
                  rtol=1e-6, atol=1e-6)
        assert buf._warned, "the combines that ran a routing again did not say so"
        # more tokens than the bound agreed so far (rank 0 alone): every rank grows it
        old = buf._bound
        big = [old + 5 if r == 0 else T for r in range(n)]
        ht_round(ctx, buf, 777, big, E, K, H, cached=False)
        assert buf._bound >= old + 5 and buf._bound >= 2 * old, (old, buf._bound)
        assert all(k[1] == buf._bound for k in buf._slots if k[0] == "ht"), list(buf._slots)
        ctx.sync()
        ctx.barrier()
    finally:
        buf.destroy()


def _pool_ptrs(buf):
    return {e.storage.data_ptr() for p in buf._pools.values() for e in p.entries}


def _in_pool(t, buf):
    return t.untyped_storage().data_ptr() in _pool_ptrs(buf)


def case_recv_buffers(ctx, fp8):
    """The normal mode's receive buffers (Buffer(num_recv_buffers=2)): a
    dispatch returns x (and its scales) in a buffer of the pool that no tensor
    holds, where the peers stored the rows; tensors the caller keeps stay as
    they were through later dispatches (with every buffer held, the rows are
    copied into fresh tensors); a view alone keeps its buffer; a dropped
    buffer is used again; num_recv_buffers=0 always copies; destroy() keeps
    the buffers a tensor still holds."""
    dep, me, n = ctx.dep, ctx.rank, ctx.n
    E, K, H = (16, 3, 256) if not ctx.gpu else (32, 4, 512)
    T = 20 if not ctx.gpu else 160
    for bad in (-1, 1.5):
        try:
            ctx.make_buffer(num_nvl_bytes=1 << 20, num_recv_buffers=bad)
        except (ValueError, TypeError) as e:
            assert "num_recv_buffers" in str(e), e
        else:
            raise AssertionError("num_recv_buffers=%r was taken" % (bad,))
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True, max_num_tokens=T)
    copy = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True, max_num_tokens=T, num_recv_buffers=0)
    what = "receive buffers %s" % ("fp8" if fp8 else "bf16")

    def dispatch(b, j, handle=None):
        data = batches(1200 + j, n, [T - j - r for r in range(n)], E, K, H, fp8)
        d = data[me]
        x = _dev(d.x, ctx)
        xin = (x, _dev(d.s, ctx)) if fp8 else x
        if handle is not None:
            rx = b.dispatch(xin, handle=handle)[0]
            return (rx if fp8 else (rx, None)), handle, data
        idx, w = _dev(d.idx, ctx), _dev(d.w, ctx)
        pr, _, pe, ir, _ = b.get_dispatch_layout(idx, E)
        rx, _, _, _, h, _ = b.dispatch(xin, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe,
                                       topk_idx=idx, topk_weights=w)
        return (rx if fp8 else (rx, None)), h, data

    def check(got, data, rows, label):
        ref = ht_reference(data, me, n, E)
        eq(got[0], ref["x"][rows], "%s: %s recv_x" % (what, label))
        if fp8:
            eq(got[1], ref["s"][rows], "%s: %s scales" % (what, label))
            assert got[1].is_contiguous() and got[1].dtype == torch.float32, label

    try:
        kept = [dispatch(buf, j) for j in range(4)]
        assert len(buf._pools) == 1 and not copy._pools, (list(buf._pools), list(copy._pools))
        pool_bytes = sum(e.buf.numel() for p in buf._pools.values() for e in p.entries)
        assert pool_bytes > 0 and buf.heap_bytes() >= pool_bytes, "heap_bytes() counts the receive buffers"
        got = [_in_pool(k[0][0], buf) for k in kept]
        assert got == [True, True, False, False], "%s: in the pool: %s" % (what, got)
        if fp8:
            assert all(_in_pool(k[0][1], buf) == g for k, g in zip(kept, got)), what
        for j, (t, _, data) in enumerate(kept):
            check(t, data, slice(None), "kept dispatch %d" % j)
            assert t[0].is_contiguous() and t[0]._base is None, "%s: recv_x is a tensor of its own" % what
        c = dispatch(copy, 0)
        check(c[0], c[2], slice(None), "num_recv_buffers=0")
        assert not _in_pool(c[0][0], buf), what
        # a view of dispatch 0's rows keeps its buffer; dispatch 1's dropped: the next dispatch lands there
        R0 = kept[0][0][0].size(0)
        view = kept[0][0][0][1:3]
        ptr1 = kept[1][0][0].untyped_storage().data_ptr()
        data0 = kept[0][2]
        del kept[:2], t, got
        nxt = dispatch(buf, 4)
        assert nxt[0][0].untyped_storage().data_ptr() == ptr1, "%s: the dropped buffer was not used again" % what
        check(nxt[0], nxt[2], slice(None), "dispatch into a dropped buffer")
        # both held now: a cached dispatch copies; the view and the earlier rows stay
        cached = dispatch(buf, 4, nxt[1])
        assert not _in_pool(cached[0][0], buf), what
        check(cached[0], nxt[2], slice(None), "cached dispatch, every buffer held")
        ctx.sync()
        if R0 >= 3:
            eq(view, ht_reference(data0, me, n, E)["x"][1:3], what + ": a kept view")
        del view
        again = dispatch(buf, 4, nxt[1])
        assert _in_pool(again[0][0], buf), "%s: a buffer only a dropped view held was not used again" % what
        check(again[0], nxt[2], slice(None), "cached dispatch into a freed buffer")
        check(nxt[0], nxt[2], slice(None), "the first dispatch's rows, after cached ones")
        ctx.sync()
        ctx.barrier()
    finally:
        copy.destroy()
        buf.destroy()
    # destroy kept the buffer `again` holds (and `nxt`'s): the rows are still there
    assert len(buf._kept) == 2 and not buf._pools, (len(buf._kept), list(buf._pools))
    check(again[0], nxt[2], slice(None), "rows kept past destroy()")
    ctx.barrier()


def _count_launches(buf, seen):
    """Record in `seen` every call into the Buffer's symm handles and collectives from now on."""
    def wrap(obj, name):
        fn = getattr(obj, name)

        def counted(*a, **kw):
            seen.append(name)
            return fn(*a, **kw)
        setattr(obj, name, counted)
    for slots in buf._slots.values():
        for s in slots:
            for name in ("dispatch", "_dispatch_prepared", "combine", "_combine_checked"):
                wrap(s.h, name)
    for name in ("all_gather", "all_to_all"):
        wrap(buf._engine, name)


def _expect_refused(call, cases, what):
    """call(kw) for each (exception type, message pattern, kw) of cases must raise that
    exception with a message matching the pattern."""
    for exc, match, kw in cases:
        try:
            call(kw)
        except exc as e:
            assert re.search(match, str(e)), (match, str(e))
        else:
            raise AssertionError("%s with %s was taken" % (what, match))


def case_cached_repeat(ctx, fp8):
    """Cached dispatches and combines repeated on two handles in turn (from
    the second call with a handle, x dtype and scales dtype on, they take the
    fast path, whose checks are comparisons with what passed): every output
    right each time, the two routings, shapes and receive-buffer tensors kept
    apart; int32 scales beside float32 ones (fp8); combine plain, with
    topk_weights (per-handle index tensors), with one bias and with two; the
    same for a num_worst_tokens handle. Bad arguments to a repeated cached
    dispatch or combine raise before anything is launched, and the next
    good call is right."""
    import symm
    dep, me, n, dev = ctx.dep, ctx.rank, ctx.n, ctx.device
    E, K, H = (16, 3, 256) if not ctx.gpu else (32, 4, 512)
    T = 20 if not ctx.gpu else 160
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True, max_num_tokens=T)
    fast = {"dispatch": 0, "combine": 0}

    def counting(name, fn):
        def call(*a, **kw):
            out = fn(*a, **kw)
            fast[name] += out is not None
            return out
        return call
    buf._cached_fast = counting("dispatch", buf._cached_fast)
    buf._combine_fast = counting("combine", buf._combine_fast)
    try:
        hs = []
        for j, worst in enumerate((False, False, True)):
            data = batches(1500 + 10 * fp8 + j, n, [T - 3 * j - r for r in range(n)], E, K, H, fp8)
            d = data[me]
            x, sc, idx, w = _dev(d.x, ctx), _dev(d.s, ctx), _dev(d.idx, ctx), _dev(d.w, ctx)
            pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
            rx, _, rw, _, h, _ = buf.dispatch((x, sc) if fp8 else x, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                              num_tokens_per_expert=pe, topk_idx=idx, topk_weights=w,
                                              num_worst_tokens=n * T if worst else 0)
            hs.append(dict(data=data, x=x, s=sc, h=h, rw=rw, rows=rw.size(0), ref=ht_reference(data, me, n, E),
                           worst=worst))

        def round_(j, rep, int_scales=False, grad=False):
            c = hs[j]
            what = "cached repeat %s handle %d (worst=%s) rep %d%s" % ("fp8" if fp8 else "bf16", j, c["worst"], rep,
                                                                       " int32 scales" if int_scales else "")
            ref, rows = c["ref"], c["rows"]
            R = ref["x"].size(0)
            s = c["s"].view(torch.int32) if int_scales else c["s"]
            out = buf.dispatch((c["x"], s) if fp8 else c["x"], handle=c["h"])
            assert out[1:5] == (None, None, None, None) and out[5].event is None, what
            rx = out[0]
            if fp8:
                rx, rs = rx
                assert rs.dtype == (torch.int32 if int_scales else torch.float32), what
                assert rs.shape == (rows, ref["s"].size(1)), what
                eq(rs[:R].view(torch.float32), ref["s"], what + ": scales")
                assert rs._base is None, what
            assert rx.shape == (rows, H) and rx.is_contiguous() and rx._base is None, what
            eq(rx[:R], ref["x"], what + ": recv_x")
            y = torch.zeros((rows, H), dtype=torch.bfloat16)
            y[:R] = expert_out(ref["x"], ref["s"], me)
            kind = rep % 4  # plain, topk_weights, one bias, two biases
            g = _gen(1700 + 31 * j + rep + me)
            biases = tuple(torch.randn((c["data"][me].T, H), generator=g).to(torch.bfloat16)
                           for _ in range(kind - 1))
            cargs = dict(bias=None if not biases else
                         (_dev(biases[0], ctx) if len(biases) == 1 else tuple(_dev(b, ctx) for b in biases)))
            if kind == 1:
                cargs["topk_weights"] = (c["rw"] * (me + 1)).requires_grad_(grad)
            combined, cw, ev = buf.combine(_dev(y, ctx), c["h"], **cargs)
            assert ev.event is None, what
            close(combined, combine_reference(c["data"], me, n, E, biases).float(), what + ": combined_x")
            if kind == 1:
                close(cw, weights_reference(c["data"], me, n, E), what + ": combined_topk_weights",
                      rtol=1e-6, atol=1e-6)
            else:
                assert cw is None, what
            return (rx, rs) if fp8 else (rx,)

        kept = []
        for rep in range(5):
            for j in range(len(hs)):
                kept.append(round_(j, rep))
            del kept[:-4]  # the last four held: their buffers stay theirs, later rounds copy or take a free one
        if fp8:
            round_(0, 5, int_scales=True)
            round_(0, 6, int_scales=True)
        ctx.sync()
        # what the held tensors say is still what they received
        for (j, rep), t in zip([(1, 4), (2, 4)], kept[-2:]):
            eq(t[0][:hs[j]["ref"]["x"].size(0)], hs[j]["ref"]["x"], "cached repeat: held recv_x of handle %d" % j)
        assert fast["dispatch"] >= 4 * len(hs) and fast["combine"] >= 4 * len(hs), fast
        # none held: the next cached dispatch's rows are in a receive buffer again
        del kept, t
        again = round_(1, 9)
        assert _in_pool(again[0], buf), "cached repeat: a freed receive buffer was not used again"
        assert not again[0].is_inference(), "cached repeat: an inference tensor outside inference mode"
        del again
        # in inference mode the rows come back as inference tensors, and outside it as tensors autograd takes
        # (combine's index tensors for the weights made again there: they are kept, so they are no inference
        # tensors, which autograd would refuse for weights that require grad)
        hs[0]["h"]._route.wplan = None
        with torch.inference_mode():
            inf = round_(0, 9)
            assert inf[0].is_inference() and _in_pool(inf[0], buf), "cached repeat: inference mode"
        del inf
        plain = round_(0, 13, grad=True)
        assert not plain[0].is_inference() and _in_pool(plain[0], buf), "cached repeat: after inference mode"
        del plain

        # bad arguments to calls that took the fast path before: each raises, on every rank alike, before any launch
        c = hs[0]
        x, sc, h, rows = c["x"], c["s"], c["h"], c["rows"]
        good = (x, sc) if fp8 else x
        y = torch.zeros((rows, H), dtype=torch.bfloat16, device=dev)
        other = torch.empty((x.size(0), 2 * H), dtype=x.dtype, device=dev)[:, :H]
        bad_dispatch = [
            (ValueError, "cached handle is for %d tokens" % x.size(0),
             dict(x=(torch.cat([x, x[:1]]), torch.cat([sc, sc[:1]])) if fp8 else torch.cat([x, x[:1]]))),
            (ValueError, "must be contiguous", dict(x=(other, sc) if fp8 else other)),
            (ValueError, "is on meta", dict(x=(x.to("meta"), sc) if fp8 else x.to("meta"))),
            (TypeError, "x is torch.int32", dict(x=torch.zeros((x.size(0), H), dtype=torch.int32, device=dev))),
            (ValueError, "expert_alignment must be >= 1", dict(x=good, expert_alignment=0)),
            (TypeError, "expert_alignment must be an int", dict(x=good, expert_alignment=True)),
            (ValueError, "num_worst_tokens must be >= 0", dict(x=good, num_worst_tokens=-1)),
            (ValueError, "config.num_sms must be even", dict(x=good, config=dep.Config(5))),
            (TypeError, "config must be a symm.moe.deep_ep.Config", dict(x=good, config=24)),
            (ValueError, "takes no topk_idx", dict(x=good, topk_idx=torch.zeros((x.size(0), K), dtype=torch.int64,
                                                                                 device=dev))),
        ]
        if fp8:
            bad_dispatch += [
                (ValueError, "x scales has shape", dict(x=(x, sc[:-1]))),
                (TypeError, "x scales are torch.float64", dict(x=(x, sc.double()))),
                (ValueError, "x scales is on meta", dict(x=(x, sc.to("meta")))),
                (TypeError, "x scales must be a torch.Tensor", dict(x=(x, sc.tolist()))),
                (symm.UnsupportedError, "x scales of 3 dimensions", dict(x=(x, sc.unsqueeze(2)))),
            ]
        bad_combine = [
            (ValueError, "x has shape", dict(x=y[:-1])),
            (TypeError, "x is torch.float32", dict(x=y.float())),
            (ValueError, "x must be contiguous", dict(x=torch.zeros((rows, 2 * H), dtype=torch.bfloat16,
                                                                    device=dev)[:, :H])),
            (ValueError, "x is on meta", dict(x=y.to("meta"))),
            (ValueError, "topk_weights has shape", dict(x=y, topk_weights=c["rw"][:-1])),
            (TypeError, "topk_weights is torch.float16", dict(x=y, topk_weights=c["rw"].half())),
            (ValueError, r"bias\[0\] has shape", dict(x=y, bias=torch.zeros((x.size(0) + 1, H), dtype=torch.bfloat16,
                                                                             device=dev))),
            (TypeError, r"bias\[1\] is torch.float16", dict(x=y, bias=(torch.zeros((x.size(0), H), dtype=torch.bfloat16,
                                                                                    device=dev),
                                                                        torch.zeros((x.size(0), H), dtype=torch.float16,
                                                                                    device=dev)))),
            (ValueError, "bias is a tensor or a pair", dict(x=y, bias=(y, y, y))),
            (ValueError, "config.num_sms must be even", dict(x=y, config=dep.Config(7))),
        ]
        seen = []
        _count_launches(buf, seen)
        _expect_refused(lambda kw: buf.dispatch(handle=h, **kw), bad_dispatch, "cached dispatch")
        _expect_refused(lambda kw: buf.combine(handle=h, **kw), bad_combine, "combine")
        assert seen == [], "the refused calls launched %s" % seen
        round_(0, 7)
        round_(1, 8)
        assert seen, "the good calls after the refusals launched nothing"
        ctx.sync()
        ctx.barrier()
    finally:
        buf.destroy()


# ---------------------------------------------------------------------------
# low latency
# ---------------------------------------------------------------------------

def cast_fp8(x, round_scale):
    """DeepEP's per-token cast of bf16 to e4m3 with a float32 scale per 128,
    worked in float64 and rounded once to float32 (exact for one * or /):
    amax >= 1e-4, scale = amax x float32(1/448), x x (448 / amax); with
    round_scale scale = 2^ceil(log2(amax x float32(1/448))) (frexp), x x 2^-e."""
    T, H = x.shape
    b = x.cpu().double().view(T, H // 128, 128)
    amax = b.abs().amax(dim=2).clamp(min=torch.tensor(1e-4, dtype=torch.float32).item())
    inv = torch.tensor(1.0 / 448.0, dtype=torch.float32).double()
    scale = (amax * inv).float()
    if round_scale:
        m, e = torch.frexp(scale)
        e = e - (m == 0.5).to(e.dtype)
        scale = torch.ldexp(torch.ones_like(scale), e)
        mul = torch.ldexp(torch.ones_like(scale), -e)
    else:
        mul = (448.0 / amax).float()
    q = (b * mul.double().unsqueeze(2)).float().clamp(-448.0, 448.0)
    return q.to(torch.float8_e4m3fn).view(T, H).to(x.device), scale.to(x.device)


def ll_round(ctx, buf, seed, Ts, M, E, K, H, use_fp8, round_scale=False, ue8m0=False, hook=False, async_mode=False,
             zero_copy=False, check_handle=True):
    """low_latency_dispatch, every expert's rows checked through the handle's
    src_info / layout_range, then low_latency_combine against the weighted sum."""
    me, n = ctx.rank, ctx.n
    L = E // n
    data = batches(seed, n, Ts, E, K, H)
    d = data[me]
    what = "ll fp8=%s round=%s ue8m0=%s hook=%s async=%s zero_copy=%s seed %d" % (
        use_fp8, round_scale, ue8m0, hook, async_mode, zero_copy, seed)
    stats = torch.zeros(L, dtype=torch.int32, device=ctx.device)
    x, idx, w = _dev(d.x, ctx), _dev(d.idx, ctx), _dev(d.w, ctx)
    recv, count, handle, event, h = buf.low_latency_dispatch(
        x, idx, M, E, cumulative_local_expert_recv_stats=stats, use_fp8=use_fp8, round_scale=round_scale,
        use_ue8m0=ue8m0, async_finish=async_mode, return_recv_hook=hook)
    if hook:
        assert callable(h) and event.event is None, what
        h()
    else:
        assert h is None, what
        if async_mode:
            event.current_stream_wait()
    rows = n * M
    if use_fp8:
        rx, rs = recv
        assert rx.dtype == torch.float8_e4m3fn and rx.shape == (L, rows, H), what
        G = H // 128
        if ue8m0:
            assert rs.dtype == torch.int32 and rs.shape == (L, rows, G // 4) and rs.stride()[1:] == (1, rows), what
            packed = rs.cpu().contiguous().reshape(-1)  # (a size-1 last dimension may keep a stride)
            rs = torch.exp2((packed.view(torch.uint8).to(torch.int32) - 127).float()).view(L, rows, G)
        else:
            assert rs.dtype == torch.float32 and rs.shape == (L, rows, G) and rs.stride()[1:] == (1, rows), what
            rs = rs.cpu()
    else:
        rx, rs = recv, None
        assert rx.dtype == torch.bfloat16 and rx.shape == (L, rows, H), what
    rx = rx.cpu()
    cnt = count.cpu()
    eq(stats, cnt, what + ": cumulative_local_expert_recv_stats")
    assert len(handle) == 5 and tuple(handle[2:]) == (M, H, E), what
    src_info, layout = handle[0].cpu(), handle[1].cpu()
    assert src_info.dtype == torch.int32 and src_info.shape == (L, rows), what
    assert layout.dtype == torch.int64 and layout.shape == (L, n), what
    # DeepEP's cast, bit for bit
    sent = [tuple(None if v is None else v.cpu() for v in cast_fp8(b.x.to(ctx.device), round_scale))
            if use_fp8 else (b.x, None) for b in data]
    for l in range(L):
        e = me * L + l
        want = [(s, t) for s in range(n) for t in range(Ts[s]) if (data[s].idx[t] == e).any()]
        assert int(cnt[l]) == len(want), "%s: expert %d got %d tokens, expected %d" % (what, e, int(cnt[l]), len(want))
        if not check_handle:
            continue
        got = []
        for s in range(n):
            begin, c = int(layout[l, s]) >> 32, int(layout[l, s]) & MASK32
            ts = sorted(t for (ss, t) in want if ss == s)
            assert c == len(ts), "%s: expert %d: %d rows from rank %d, expected %d" % (what, e, c, s, len(ts))
            rows_s = list(range(begin, begin + c))
            assert sorted(int(src_info[l, r]) for r in rows_s) == ts, "%s: expert %d src_info of rank %d" % (what, e, s)
            got += rows_s
            for r in rows_s:
                t = int(src_info[l, r])
                q, sc = sent[s]
                eq(rx[l, r], q[t], "%s: expert %d row %d (rank %d token %d)" % (what, e, r, s, t))
                if use_fp8:
                    eq(rs[l, r], sc[t], "%s: expert %d row %d scales" % (what, e, r))
        assert sorted(got) == list(range(len(want))), "%s: expert %d rows %s" % (what, e, sorted(got))
        assert (src_info[l, len(want):] == -1).all(), what
    # combine: y = the expert's output (dequantised row x (1 + e % 4 / 4)), weighted sum at the source
    scale_e = 1.0 + (torch.arange(E) % 4).float() / 4
    deq = rx.float() if not use_fp8 else rx.float() * rs.repeat_interleave(128, dim=2)
    y = (deq * scale_e[me * L:(me + 1) * L].view(L, 1, 1)).to(torch.bfloat16)
    if zero_copy:
        zb = buf.get_next_low_latency_combine_buffer(handle)
        assert zb.shape == (L, rows, H) and zb.dtype == torch.bfloat16, what
        zb.copy_(_dev(y, ctx))
    out = torch.full((d.T, H), float("nan"), dtype=torch.bfloat16, device=ctx.device) if seed % 2 else None
    combined, cev, ch = buf.low_latency_combine(_dev(torch.zeros_like(y) if zero_copy else y, ctx), idx, w, handle,
                                                zero_copy=zero_copy, async_finish=async_mode,
                                                return_recv_hook=hook, out=out)
    if hook:
        ch()
    elif async_mode:
        cev.current_stream_wait()
    if out is not None:
        assert combined is out, what
    ref = torch.zeros((d.T, H), dtype=torch.float32)
    for k in range(K):
        e = d.idx[:, k]
        ok = e >= 0
        q, sc = sent[me]
        v = q.float() if not use_fp8 else q.float() * sc.repeat_interleave(128, dim=1)
        yv = (v * scale_e[e.clamp(min=0)].unsqueeze(1)).to(torch.bfloat16).float()
        ref += torch.where(ok.unsqueeze(1), d.w[:, k:k + 1] * yv, torch.zeros(()))
    close(combined, ref.to(torch.bfloat16), what + ": combined_x")
    ctx.sync()
    return handle, y, idx, w, data


def case_low_latency(ctx, use_fp8, hook):
    """DeepEP's low-latency matrix for one (fp8, hook) pair: round_scale and
    ue8m0 with fp8, async_finish without the hook, zero-copy combine, a rank
    with no tokens, two dispatches in flight, a handle combined twice."""
    n = ctx.n
    E, K, H, M = (16, 3, 512, 8) if not ctx.gpu else (32, 4, 512, 48)
    buf = ctx.make_buffer(num_rdma_bytes=1 << 20, low_latency_mode=True, num_qps_per_rank=E // n,
                          explicitly_destroy=True)
    try:
        variants = [(False, False, False)]
        if use_fp8:
            variants += [(True, False, False), (True, True, True)]
        else:
            variants += [(False, False, True)]
        for i, (round_scale, ue8m0, zero_copy) in enumerate(variants):
            Ts = [M - r for r in range(n)]
            if i == len(variants) - 1 and n > 1:
                Ts[n - 1] = 0
            ll_round(ctx, buf, 40 + i + 10 * use_fp8 + 20 * hook, Ts, M, E, K, H, use_fp8, round_scale, ue8m0,
                     hook=hook, async_mode=(not hook and i == 1), zero_copy=zero_copy)
            ctx.barrier()
        # two in flight, combined in the other order; then one combined again
        me, L = ctx.rank, E // n
        made = []
        for j in range(2):
            data = batches(90 + j, n, [M - j for _ in range(n)], E, K, H)
            d = data[me]
            idx, w = _dev(d.idx, ctx), _dev(d.w, ctx)
            recv, count, handle, _, h = buf.low_latency_dispatch(_dev(d.x, ctx), idx, M, E, use_fp8=False,
                                                                  return_recv_hook=hook)
            made.append((data, recv, handle, idx, w, h))
        assert not buf._warned
        for j in (1, 0, 1):
            data, recv, handle, idx, w, h = made[j]
            if h is not None:
                h()
                made[j] = (data, recv, handle, idx, w, None)
            scale_e = 1.0 + (torch.arange(E) % 4).float() / 4
            y = (recv.cpu().float() * scale_e[me * L:(me + 1) * L].view(L, 1, 1)).to(torch.bfloat16)
            combined, _, ch = buf.low_latency_combine(_dev(y, ctx), idx, w, handle, return_recv_hook=hook)
            if ch is not None:
                ch()
            d = data[me]
            ref = torch.zeros((d.T, H))
            for k in range(K):
                e = d.idx[:, k]
                yv = (d.x.float() * scale_e[e.clamp(min=0)].unsqueeze(1)).to(torch.bfloat16).float()
                ref += torch.where((e >= 0).unsqueeze(1), d.w[:, k:k + 1] * yv, torch.zeros(()))
            close(combined, ref.to(torch.bfloat16), "ll in flight: combine of dispatch %d" % j)
        assert buf._warned, "the combine that ran a routing again did not say so"
        # the first dispatch's handle still reads right after its symm handle was reused
        src0, lay0 = made[0][2][0].cpu(), made[0][2][1].cpu()
        assert (lay0 & MASK32).sum(dim=1).tolist() == [
            sum(int((b.idx == me * L + l).sum()) for b in made[0][0]) for l in range(L)], "reused handle's layout"
        assert src0.shape == (L, n * M)
        ctx.sync()
        ctx.barrier()
    finally:
        buf.destroy()


# ---------------------------------------------------------------------------
# errors (every rank raises the same, nothing is enqueued)
# ---------------------------------------------------------------------------

def case_errors(ctx, raises):
    """`raises(exc, match)` is pytest.raises."""
    import symm
    dep, n, dev = ctx.dep, ctx.n, ctx.device
    E, K, H = 4 * n, 2, 256
    with raises(ValueError, match="must be even"):
        dep.Buffer.set_num_sms(3)
    with raises(ValueError, match="num_max_nvl_chunked_send_tokens 8 must be below"):
        dep.Config(20, 8, 8)
    with raises(ValueError, match="at most half"):
        dep.Config(20, 6, 256, 6, 6)
    with raises(TypeError, match="num_sms must be an int"):
        dep.Config(2.5)
    assert dep.Config(24, 6, 256, 6, 128).get_rdma_buffer_size_hint(7168 * 2, n) == 0
    assert dep.Config().get_nvl_buffer_size_hint(7168 * 2, n) > 0
    with raises(symm.UnsupportedError, match="internode"):
        dep.Config().get_rdma_buffer_size_hint(7168 * 2, 16)
    with raises(ValueError, match="either 'group' or 'comm'"):
        dep.Buffer(None)
    with raises(symm.UnsupportedError, match="shrink mode"):
        ctx.make_buffer(num_nvl_bytes=1, enable_shrink=True)
    with raises(symm.UnsupportedError, match="NVLink only"):
        ctx.make_buffer(num_rdma_bytes=1, low_latency_mode=True, allow_nvlink_for_low_latency_mode=False)
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True)
    ll = ctx.make_buffer(num_rdma_bytes=1 << 20, low_latency_mode=True, explicitly_destroy=True)
    nb = ctx.make_buffer(explicitly_destroy=False)
    try:
        d = batches(5, n, [10] * n, E, K, H)[ctx.rank]
        x, idx, w = _dev(d.x, ctx), _dev(d.idx, ctx), _dev(d.w, ctx)
        pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
        good = dict(x=x, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe, topk_idx=idx,
                    topk_weights=w)
        with raises(ValueError, match="num_nvl_bytes=0"):
            nb.dispatch(**good)
        with raises(ValueError, match="explicitly_destroy=False"):
            nb.destroy()
        with raises(ValueError, match="must be given"):
            buf.dispatch(x, topk_idx=idx, topk_weights=w)
        with raises(ValueError, match="go together"):
            buf.dispatch(**dict(good, topk_weights=None))
        with raises(TypeError, match="x is torch.float64"):
            buf.dispatch(**dict(good, x=x.double()))
        with raises(ValueError, match="topk_weights has shape"):
            buf.dispatch(**dict(good, topk_weights=w[:, :1].contiguous()))
        with raises(TypeError, match="is_token_in_rank is torch.int32"):
            buf.dispatch(**dict(good, is_token_in_rank=ir.int()))
        with raises(ValueError, match="num_tokens_per_rank has shape"):
            buf.dispatch(**dict(good, num_tokens_per_rank=torch.cat([pr, pr])))
        with raises(ValueError, match="must be contiguous"):
            buf.dispatch(**dict(good, x=torch.empty((H, 10), dtype=torch.bfloat16, device=dev).t()))
        with raises(ValueError, match="scales go with an 8-bit x"):
            buf.dispatch(**dict(good, x=(x, torch.ones((10, 2), device=dev))))
        x8 = x.to(torch.float8_e4m3fn)
        with raises(symm.UnsupportedError, match="x scales with 3 columns"):
            buf.dispatch(**dict(good, x=(x8, torch.ones((10, 3), device=dev))))
        with raises(TypeError, match="a tuple of 3"):
            buf.dispatch(**dict(good, x=(x8, x8, x8)))
        with raises(ValueError, match="num_worst_tokens > 0 needs topk_idx"):
            buf.dispatch(**dict(good, topk_idx=None, topk_weights=None, num_worst_tokens=40))
        with raises(ValueError, match="allocate_on_comm_stream=True needs previous_event"):
            buf.dispatch(**dict(good, allocate_on_comm_stream=True))
        with raises(TypeError, match="previous_event must be an EventOverlap"):
            buf.dispatch(**dict(good, previous_event=object()))
        with raises(ValueError, match="config.num_sms must be even"):
            c = dep.Config(24)
            c.num_sms = 5
            buf.dispatch(**dict(good, config=c))
        with raises(TypeError, match="handle must be the DispatchHandle"):
            buf.combine(x, (1, 2, 3, 4, 5, 6))
        with raises(symm.UnsupportedError, match="internode"):
            buf.internode_dispatch(x)
        with raises(symm.UnsupportedError, match="raw NVLink"):
            buf.get_local_buffer_tensor(torch.bfloat16)
        with raises(ValueError, match="low_latency_mode=False"):
            buf.low_latency_dispatch(x, idx, 16, E)
        # a good round after the refusals: nothing was enqueued by them
        rx, ri, rw, lst, handle, _ = buf.dispatch(**good)
        with raises(ValueError, match="takes no topk_idx"):
            buf.dispatch(x, handle=handle, topk_idx=idx)
        with raises(ValueError, match="x has shape"):
            buf.combine(rx[:-1] if rx.size(0) else torch.empty((1, H), dtype=rx.dtype, device=dev), handle)
        with raises(ValueError, match="the handle comes from another Buffer"):
            ll_other = ctx.make_buffer(num_nvl_bytes=1, explicitly_destroy=True)
            try:
                ll_other.combine(rx, handle)
            finally:
                ll_other.destroy()
        out, _, _ = buf.combine(rx, handle)
        assert out.shape == (10, H)
        # low latency
        with raises(symm.UnsupportedError, match="dispatch_wait_recv_cost_stats"):
            ll.low_latency_dispatch(x, idx, 16, E, dispatch_wait_recv_cost_stats=torch.zeros(n, dtype=torch.int64,
                                                                                             device=dev))
        with raises(ValueError, match="cannot both be set"):
            ll.low_latency_dispatch(x, idx, 16, E, async_finish=True, return_recv_hook=True)
        with raises(ValueError, match="use_ue8m0 needs round_scale"):
            ll.low_latency_dispatch(x, idx, 16, E, use_ue8m0=True)
        with raises(ValueError, match="above num_max_dispatch_tokens_per_rank 8"):
            ll.low_latency_dispatch(x, idx, 8, E)
        with raises(TypeError, match="x is torch.float8_e4m3fn"):
            ll.low_latency_dispatch(x8, idx, 16, E)
        if n > 1:
            with raises(ValueError, match="num_experts %d is not a multiple" % (4 * n + 1)):
                ll.low_latency_dispatch(x, idx, 16, 4 * n + 1)
        with raises(ValueError, match="multiple of 512"):
            ll.low_latency_dispatch(x[:, :128].contiguous(), idx, 16, E, round_scale=True, use_ue8m0=True)
        recv, count, lh, _, _ = ll.low_latency_dispatch(x, idx, 16, E, use_fp8=False)
        with raises(symm.UnsupportedError, match="LogFMT"):
            ll.low_latency_combine(recv, idx, w, lh, use_logfmt=True)
        with raises(symm.UnsupportedError, match="combine_wait_recv_cost_stats"):
            ll.low_latency_combine(recv, idx, w, lh, combine_wait_recv_cost_stats=torch.zeros(
                n, dtype=torch.int64, device=dev))
        with raises(ValueError, match="x has shape"):
            ll.low_latency_combine(recv[:, :-1].contiguous(), idx, w, lh)
        with raises(ValueError, match="zero_copy=True, but get_next_low_latency_combine_buffer"):
            ll.low_latency_combine(recv, idx, w, lh, zero_copy=True)
        with raises(TypeError, match="handle must be the LowLatencyHandle"):
            ll.low_latency_combine(recv, idx, w, tuple(lh))
        with raises(symm.UnsupportedError, match="shrink mode"):
            ll.low_latency_update_mask_buffer(0, True)
        ll.clean_low_latency_buffer(16, H, E)
        combined, _, _ = ll.low_latency_combine(recv, idx, w, lh)
        assert combined.shape == (10, H)
        ctx.sync()
    finally:
        buf.destroy()
        ll.destroy()


# ---------------------------------------------------------------------------
# CUDA graphs (GPU only): the calls DeepEP allows in a graph
# ---------------------------------------------------------------------------

def capture_graph(fn):
    """fn() captured into a CUDA graph on a side stream (as torch asks), ordered
    after the current stream's work and before its next: (fn's result, graph)."""
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph, stream=s):
            out = fn()
    torch.cuda.current_stream().wait_stream(s)
    return out, graph


def case_graphs(ctx):
    """num_worst_tokens dispatch + combine (normal mode), and low-latency
    dispatch + combine, captured once and replayed with fresh data."""
    n, me, dev = ctx.n, ctx.rank, ctx.device
    E, K, H, T, M = 32, 4, 512, 96, 32
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, num_rdma_bytes=1 << 20, low_latency_mode=True,
                          explicitly_destroy=True)
    try:
        W = T * n
        sx = torch.zeros((T, H), dtype=torch.bfloat16, device=dev)
        sidx = torch.zeros((T, K), dtype=torch.int64, device=dev)
        sw = torch.zeros((T, K), dtype=torch.float32, device=dev)
        lx = torch.zeros((M, H), dtype=torch.bfloat16, device=dev)
        lidx = torch.zeros((M, K), dtype=torch.int64, device=dev)
        lw = torch.zeros((M, K), dtype=torch.float32, device=dev)
        res = {}

        def step():
            pr, _, pe, ir, _ = buf.get_dispatch_layout(sidx, E)
            rx, ri, rw, lst, handle, _ = buf.dispatch(sx, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                                      num_tokens_per_expert=pe, topk_idx=sidx, topk_weights=sw,
                                                      num_worst_tokens=W)
            y = (rx.float() * (me + 1)).to(torch.bfloat16)
            out, cw, _ = buf.combine(y, handle, topk_weights=rw * (me + 1))
            recv, count, lh, _, _ = buf.low_latency_dispatch(lx, lidx, M, E, use_fp8=False)
            L = E // n
            scale_e = 1.0 + (torch.arange(me * L, (me + 1) * L, device=dev) % 4).float() / 4
            ly = (recv.float() * scale_e.view(L, 1, 1)).to(torch.bfloat16)
            comb, _, _ = buf.low_latency_combine(ly, lidx, lw, lh)
            res.update(rx=rx, ri=ri, rw=rw, out=out, cw=cw, count=count, comb=comb)

        def load(it):
            data = batches(300 + it, n, [T] * n, E, K, H)
            ldata = batches(600 + it, n, [M] * n, E, K, H)
            d, ld = data[me], ldata[me]
            sx.copy_(d.x.to(dev))
            sidx.copy_(d.idx.to(dev))
            sw.copy_(d.w.to(dev))
            lx.copy_(ld.x.to(dev))
            lidx.copy_(ld.idx.to(dev))
            lw.copy_(ld.w.to(dev))
            return data, ldata

        load(0)
        step()  # makes the symm handles outside the capture
        torch.cuda.synchronize()
        _, graph = capture_graph(step)
        for it in range(1, 4):
            data, ldata = load(it)
            torch.cuda.synchronize()
            ctx.barrier()
            graph.replay()
            torch.cuda.synchronize()
            what = "graph replay %d" % it
            ref = ht_reference(data, me, n, E)
            R = ref["x"].size(0)
            eq(res["rx"][:R], ref["x"], what + ": recv_x")
            eq(res["ri"][:R], ref["idx"], what + ": recv_topk_idx")
            eq(res["ri"][R:], torch.full((W - R, K), -1, dtype=torch.int64), what + ": recv_topk_idx past the rows")
            eq(res["rw"][:R], ref["w"], what + ": recv_topk_weights")
            close(res["out"], combine_reference(data, me, n, E), what + ": combined_x")
            close(res["cw"], weights_reference(data, me, n, E), what + ": combined weights", rtol=1e-6, atol=1e-6)
            L = E // n
            ld = ldata[me]
            want = torch.tensor([sum(int((b.idx == me * L + l).sum()) for b in ldata) for l in range(L)],
                                dtype=torch.int32)
            eq(res["count"], want, what + ": low-latency recv_count")
            scale_e = 1.0 + (torch.arange(E) % 4).float() / 4
            lref = torch.zeros((M, H))
            for k in range(K):
                e = ld.idx[:, k]
                yv = (ld.x.float() * scale_e[e.clamp(min=0)].unsqueeze(1)).to(torch.bfloat16).float()
                lref += torch.where((e >= 0).unsqueeze(1), ld.w[:, k:k + 1] * yv, torch.zeros(()))
            close(res["comb"], lref.to(torch.bfloat16), what + ": low-latency combined_x")
        ctx.barrier()
    finally:
        buf.destroy()


def case_capture_then_eager(ctx, capture):
    """A handle's first cached dispatch and its combine with topk_weights
    made inside a CUDA graph capture, then the same handle eagerly before
    any replay, then the graph replayed. What the capture computed for the
    handle (the routing's index tensors, the weights' gather plan) holds
    values only once the graph replays, so the eager calls must make their
    own. capture(fn) runs fn while capturing and returns (fn's result, the
    graph's replay, or None where nothing can replay)."""
    n, me, dev = ctx.n, ctx.rank, ctx.device
    E, K, H, T = 32, 4, 256, 40
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True, max_num_tokens=T)
    try:
        data = batches(910, n, [T] * n, E, K, H)
        data2 = batches(911, n, [T] * n, E, K, H)
        for a, b in zip(data, data2):  # the same routing, other tokens
            b.idx, b.w = a.idx, a.w
        d = data[me]
        x, idx, w = d.x.to(dev), d.idx.to(dev), d.w.to(dev)
        x2 = data2[me].x.to(dev)
        pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
        rx, _, rw, _, handle, _ = buf.dispatch(x, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                               num_tokens_per_expert=pe, topk_idx=idx, topk_weights=w)
        y = (rx.float() * (me + 1)).to(torch.bfloat16)
        wy = rw * (me + 1)
        ctx.sync()
        ctx.barrier()

        def step():
            gx = buf.dispatch(x2, handle=handle)[0]
            out, cw, _ = buf.combine(y, handle, topk_weights=wy)
            return gx, out, cw

        (gx, gout, gcw), replay = capture(step)
        ex = buf.dispatch(x2, handle=handle)[0]
        ctx.sync()
        ref2 = ht_reference(data2, me, n, E)
        eq(ex, ref2["x"], "an eager cached dispatch after a capture")
        y2 = (ex.float() * (me + 1)).to(torch.bfloat16)
        out, cw, _ = buf.combine(y2, handle, topk_weights=wy)
        ctx.sync()
        close(out, combine_reference(data2, me, n, E), "an eager combine after a capture")
        close(cw, weights_reference(data, me, n, E), "an eager combine's weights after a capture", rtol=1e-6,
              atol=1e-6)
        if replay is not None:
            ctx.barrier()
            replay()
            ctx.sync()
            eq(gx, ref2["x"], "the captured cached dispatch, replayed")
            close(gout, combine_reference(data, me, n, E), "the captured combine, replayed")
            close(gcw, weights_reference(data, me, n, E), "the captured combine's weights, replayed", rtol=1e-6,
                  atol=1e-6)
        ctx.barrier()
    finally:
        buf.destroy()


def case_capture_keeps_the_header(ctx):
    """A num_worst_tokens dispatch captured after a synchronising one of the
    same token count, the graph replayed between synchronising dispatches:
    the graph's count row must not rewrite the header the eager dispatches
    reuse (tokens, fingerprint), or the next synchronising dispatch on a rank
    whose token count did not change would send the graph's fingerprint, and
    the ranks would be told that their calls differ. Every output checked."""
    n, me, dev = ctx.n, ctx.rank, ctx.device
    E, K, H, T = 32, 4, 256, 24
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True, max_num_tokens=T)
    try:
        sx = torch.zeros((T, H), dtype=torch.bfloat16, device=dev)
        sidx = torch.full((T, K), -1, dtype=torch.int64, device=dev)
        sw = torch.zeros((T, K), dtype=torch.float32, device=dev)
        out = {}

        def sync_round(seed, Ts):
            data = batches(seed, n, Ts, E, K, H)
            d = data[me]
            x, idx, w = d.x.to(dev), d.idx.to(dev), d.w.to(dev)
            pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
            rx, ri, rw, _, h, _ = buf.dispatch(x, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                               num_tokens_per_expert=pe, topk_idx=idx, topk_weights=w)
            ref = ht_reference(data, me, n, E)
            eq(rx, ref["x"], "synchronising dispatch %d: recv_x" % seed)
            eq(ri, ref["idx"], "synchronising dispatch %d: recv_topk_idx" % seed)
            y = (rx.float() * (me + 1)).to(torch.bfloat16)
            o, _, _ = buf.combine(y, h)
            close(o, combine_reference(data, me, n, E), "synchronising dispatch %d: combined_x" % seed)

        def worst_step():
            pr, _, pe, ir, _ = buf.get_dispatch_layout(sidx, E)
            rx, _, _, _, h, _ = buf.dispatch(sx, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                             num_tokens_per_expert=pe, topk_idx=sidx, topk_weights=sw,
                                             num_worst_tokens=n * T)
            o, _, _ = buf.combine((rx.float() * (me + 1)).to(torch.bfloat16), h)
            out.update(rx=rx, o=o)

        sync_round(920, [T] * n)
        data = batches(921, n, [T] * n, E, K, H)
        sx.copy_(data[me].x.to(dev))
        sidx.copy_(data[me].idx.to(dev))
        sw.copy_(data[me].w.to(dev))
        ctx.sync()
        ctx.barrier()
        _, graph = capture_graph(worst_step)
        sync_round(922, [T] * n)
        ctx.sync()
        ctx.barrier()
        graph.replay()
        ctx.sync()
        ref = ht_reference(data, me, n, E)
        R = ref["x"].size(0)
        eq(out["rx"][:R], ref["x"], "the captured num_worst_tokens dispatch, replayed: recv_x")
        close(out["o"], combine_reference(data, me, n, E), "the captured combine, replayed")
        ctx.barrier()
        # rank 0 keeps its token count (its header is reused), the others change theirs
        sync_round(923, [T] + [T - 2 - r for r in range(1, n)])
        ctx.sync()
        ctx.barrier()
    finally:
        buf.destroy()
