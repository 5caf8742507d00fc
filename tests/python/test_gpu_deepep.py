"""symm.moe.deep_ep (DeepEP's Buffer over symm) on GPUs, one process per
rank (PEs may share a GPU; more than two per GPU need MPS, see conftest):

    torchrun --nproc-per-node N -m pytest -q tests/python/test_gpu_deepep.py

The cases are deepep_cases.py's, which the CPU run (test_moe_deepep.py) also
runs over a stand-in for symm: every tensor each call returns is compared with
a torch reference every rank builds from every rank's seeded data. The layout
(get_dispatch_layout): fresh indices, int64 and int32, -1 and values outside the
experts, 0 tokens, several counting blocks, captured and replayed. Normal mode:
bf16 and fp8 (+ scales), with and without top-k, cached handles,
num_worst_tokens, expert alignment, bias, combined top-k weights, a rank with
no tokens and a rank that receives nothing, async_finish with events,
previous_event; two dispatches in flight, a handle combined twice, the token
bound growing; cached dispatches and combines repeated on interleaved handles
(the checked short path), bad arguments to them refused before any launch. Low latency: bf16 and fp8, round_scale, UE8M0 scales, with and
without the receive hook, async_finish, zero-copy combine, two in flight. CUDA
graphs: num_worst_tokens dispatch + combine and low-latency dispatch + combine
captured and replayed with fresh data; a handle's first cached dispatch and
weighted combine captured, the handle then used eagerly before any replay; a
captured num_worst_tokens dispatch replayed between synchronising ones. Bad inputs raise on every rank. The
normal kernels launch at most the Config's SMs.
"""
import pytest

torch = pytest.importorskip("torch")
import symm  # noqa: E402
import deepep_cases as cases  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:.*dispatched again.*:UserWarning")]


@pytest.fixture(scope="module")
def ctx(pe):
    import torch.distributed as dist
    import symm.moe.deep_ep as dep

    def make(**kw):
        return dep.Buffer(dist.group.WORLD, **kw)
    return cases.Ctx(dep, pe.rank, pe.world, pe.device, True, make, torch.cuda.synchronize, symm.barrier)


@pytest.mark.parametrize("fp8", [False, True])
def test_normal(ctx, fp8):
    cases.case_layout_and_rounds(ctx, fp8, False, False)


@pytest.mark.parametrize("async_mode,previous", [(True, False), (True, True), (False, True)])
def test_normal_events(ctx, async_mode, previous):
    cases.case_layout_and_rounds(ctx, True, async_mode, previous)


def test_layout(ctx):
    """get_dispatch_layout (symm_moe_layout) against a torch reference."""
    cases.case_layout(ctx, pytest.raises)


def test_in_flight(ctx):
    cases.case_in_flight(ctx)


@pytest.mark.parametrize("fp8", [False, True])
def test_recv_buffers(ctx, fp8):
    cases.case_recv_buffers(ctx, fp8)


@pytest.mark.parametrize("fp8", [False, True])
def test_cached_repeat(ctx, fp8):
    cases.case_cached_repeat(ctx, fp8)


@pytest.mark.parametrize("use_fp8", [False, True])
@pytest.mark.parametrize("hook", [False, True])
def test_low_latency(ctx, use_fp8, hook):
    cases.case_low_latency(ctx, use_fp8, hook)


def test_errors(ctx):
    cases.case_errors(ctx, pytest.raises)


def test_graphs(ctx):
    cases.case_graphs(ctx)


def test_capture_then_eager(ctx):
    """A handle's first cached dispatch and weighted combine captured into a
    graph, the handle used eagerly before any replay, then the graph replayed."""
    def capture(fn):
        out, g = cases.capture_graph(fn)
        return out, g.replay
    cases.case_capture_then_eager(ctx, capture)


def test_capture_keeps_the_header(ctx):
    """A captured num_worst_tokens dispatch replayed between synchronising ones."""
    cases.case_capture_keeps_the_header(ctx)


def test_sm_budget(ctx):
    """Config(num_sms) caps the normal kernels' blocks (recorded on the device)."""
    dep, n, me = ctx.dep, ctx.n, ctx.rank
    E, K, H, T = 32, 4, 512, 128
    buf = ctx.make_buffer(num_nvl_bytes=1 << 20, explicitly_destroy=True)
    try:
        share = symm.sm_share()
        for i, sms in enumerate((2, 8, 24)):
            data = cases.batches(900 + i, n, [T] * n, E, K, H)
            d = data[me]
            idx, w = d.idx.to(ctx.device), d.w.to(ctx.device)
            pr, _, pe, ir, _ = buf.get_dispatch_layout(idx, E)
            cfg = dep.Config(sms)
            rx, ri, rw, _, handle, _ = buf.dispatch(d.x.to(ctx.device), num_tokens_per_rank=pr, is_token_in_rank=ir,
                                                    num_tokens_per_expert=pe, topk_idx=idx, topk_weights=w,
                                                    config=cfg)
            y = cases.expert_out(rx.cpu(), None, me).to(ctx.device)
            out, _, _ = buf.combine(y, handle, config=cfg)
            cases.close(out, cases.combine_reference(data, me, n, E), "budget %d: combined_x" % sms)
            slots = [s for v in buf._slots.values() for s in v if s.route is handle._route]
            assert len(slots) == 1
            got = slots[0].h.launched_blocks()
            assert 1 <= got <= min(sms, share), "Config(num_sms=%d): a kernel ran %d blocks" % (sms, got)
            symm.barrier()
    finally:
        buf.destroy()


@pytest.mark.parametrize("fp8", [False, True])
def test_ht_dispatch_into(ctx, fp8):
    """symm.moe.HighThroughput.dispatch(recv_x=, recv_x_scale=) (symm_moe_ht_dispatch_into):
    the rows land in the caller's symmetric tensors, equal to what the object's
    own buffers receive for the same call; bad buffers (dtype, shape, device,
    outside the heap, misaligned, scales without them) raise before anything
    runs, on every rank alike, and the object works on afterwards."""
    import symm.moe as moe
    n, me, dev = ctx.n, ctx.rank, ctx.device
    E, K, H, T = 32, 4, 512, 96
    x_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    ht = moe.HighThroughput(E, K, H, T, x_dtype=x_dtype, scales=fp8)
    cap, cols = ht.capacity, (H + 127) // 128
    esz = torch.empty((), dtype=x_dtype).element_size()
    s_at = (cap * H * esz + 255) // 256 * 256
    pool = symm.tensor((s_at + cap * cols * 4,), torch.uint8)
    rx = pool[:cap * H * esz].view(x_dtype).view(cap, H)
    rs = pool[s_at:].view(torch.float32).view(cap, cols) if fp8 else None
    try:
        data = cases.batches(4242, n, [T - 3 * r for r in range(n)], E, K, H, fp8)
        d = data[me]
        x, s = d.x.to(dev), (d.s.to(dev) if fp8 else None)
        idx, w = d.idx.to(dev), d.w.to(dev)
        ref = cases.ht_reference(data, me, n, E)
        R = ref["x"].size(0)
        # the object's own buffers, then the caller's, for the same call
        own = [v.clone() if v is not None else None for v in ht.dispatch(x, idx, w, x_scale=s)]
        got = ht.dispatch(x, idx, w, x_scale=s, recv_x=rx, recv_x_scale=rs)
        assert got[0] is rx and got[1] is rs
        torch.cuda.synchronize()
        cases.eq(rx[:R], ref["x"], "into: recv_x")
        cases.eq(own[0][:R], ref["x"], "own: recv_x")
        if fp8:
            cases.eq(rs[:R], ref["s"], "into: scales")
        for i in (2, 3, 4, 5, 6):  # indices, weights, sources, counts: the object's, as before
            cases.eq(got[i], own[i].cpu(), "into: output %d" % i)
        # bad buffers: raised before any launch, on every rank (the order stays a dispatch's)
        other = torch.float8_e5m2 if fp8 else torch.float16
        bad = [(TypeError, "recv_x is", dict(recv_x=rx.view(other))),
               (ValueError, "at least", dict(recv_x=rx[:cap - 1])),
               (ValueError, "this PE runs on", dict(recv_x=torch.empty((cap, H), dtype=x_dtype)))]
        bad.append((symm.SymmError, "symmetric heap", dict(recv_x=torch.empty((cap, H), dtype=x_dtype, device=dev))))
        if esz == 2:
            skew = pool[8:8 + cap * H * esz].view(x_dtype).view(cap, H)
            bad.append((symm.SymmError, "16-byte aligned", dict(recv_x=skew)))
        if fp8:
            bad.append((ValueError, "at least", dict(recv_x=rx, recv_x_scale=rs[:cap - 1])))
        else:
            bad.append((ValueError, "without scales", dict(recv_x=rx, recv_x_scale=rx.view(torch.float32))))
        for exc, match, kw in bad:
            with pytest.raises(exc, match=match):
                ht.dispatch(x, idx, w, x_scale=s, **kw)
        # still in order: a dispatch into the caller's buffers, then a combine of it
        ht.dispatch(x, idx, w, x_scale=s, recv_x=rx, recv_x_scale=rs)
        y = cases.expert_out(rx[:ht.capacity].cpu(), rs.cpu() if fp8 else None, me).to(dev)
        y[R:] = 0
        out = ht.combine(y)
        cases.close(out, cases.combine_reference(data, me, n, E), "into: combine after")
        torch.cuda.synchronize()
        symm.barrier()
    finally:
        ht.destroy()
        symm.free_tensor(pool)


def test_ht_recv_copy(ctx):
    """symm.moe.HighThroughput.recv_copy (symm_moe_ht_recv_copy): after a
    dispatch, the sources, indices (int32, int64), weights and counts equal
    the object's receive buffers' (weights 0 where the index is -1; rows past
    num_recv -1 / -1 / 0); bad tensors raise before anything runs."""
    import symm.moe as moe
    n, me, dev = ctx.n, ctx.rank, ctx.device
    E, K, H, T = 8 * n, 3, 256, 90
    ht = moe.HighThroughput(E, K, H, T)
    try:
        data = cases.batches(777, n, [T - 5 * r for r in range(n)], E, K, H)
        d = data[me]
        views = ht.dispatch(d.x.to(dev), d.idx.to(dev), d.w.to(dev))
        _, _, ridx, rw, rsrc, nrecv, nper = views
        R, cap, L = int(nrecv.item()), ht.capacity, ht.local_experts
        assert R == cases.ht_reference(data, me, n, E)["x"].size(0)
        for dtype in (torch.int64, torch.int32):
            rows = min(R + 7, cap)
            src = torch.full((cap,), 99, dtype=torch.int32, device=dev)
            idx = torch.full((cap, K), 99, dtype=dtype, device=dev)
            w = torch.full((cap, K), 99.0, device=dev)
            counts = torch.full((1 + L + 2,), 99, dtype=torch.int32, device=dev)
            ht.recv_copy(rows, src, idx, w, counts)
            torch.cuda.synchronize()
            want_idx = ridx[:R].to(dtype)
            cases.eq(src[:R], rsrc[:R, 1].cpu(), "recv_copy: sources")
            cases.eq(idx[:R], want_idx.cpu(), "recv_copy: indices %s" % dtype)
            cases.eq(w[:R], torch.where(ridx[:R] >= 0, rw[:R], 0.0).cpu(), "recv_copy: weights")
            cases.eq(counts, torch.cat((nrecv, nper, torch.full((2,), 99, dtype=torch.int32, device=dev))).cpu(),
                     "recv_copy: counts")
            cases.eq(src[R:rows], torch.full((rows - R,), -1, dtype=torch.int32), "recv_copy: sources past num_recv")
            cases.eq(idx[R:rows], torch.full((rows - R, K), -1, dtype=dtype), "recv_copy: indices past num_recv")
            cases.eq(w[R:rows], torch.zeros((rows - R, K)), "recv_copy: weights past num_recv")
            cases.eq(idx[rows:], torch.full((cap - rows, K), 99, dtype=dtype), "recv_copy: rows past `rows`")
        good = torch.zeros((cap, K), dtype=torch.int64, device=dev)
        for exc, match, kw in ((TypeError, "topk_idx is torch.float32", dict(topk_idx=good.float())),
                               (ValueError, "below rows", dict(topk_idx=good[:R], rows=R + 1)),
                               (ValueError, r"shape \(%d, %d\)" % (cap, K + 1),
                                dict(topk_idx=torch.zeros((cap, K + 1), dtype=torch.int64, device=dev))),
                               (ValueError, "contiguous", dict(topk_weights=torch.zeros((K, cap), device=dev).t())),
                               (ValueError, "this PE runs on", dict(src_token=torch.zeros(cap, dtype=torch.int32))),
                               (ValueError, "below 1 \\+ %d local experts" % L,
                                dict(counts=torch.zeros(L, dtype=torch.int32, device=dev))),
                               (TypeError, "rows must be an int", dict(rows=-1))):
            rows = kw.pop("rows", R)
            with pytest.raises(exc, match=match):
                ht.recv_copy(rows, **kw)
        with pytest.raises(symm.SymmError, match="above the receive capacity"):
            ht.recv_copy(cap + 1)
        torch.cuda.synchronize()
        symm.barrier()
    finally:
        ht.destroy()
