"""symm.moe.deep_ep without a GPU: DeepEP's names and signatures, the
argument checks and errors, and every case of deepep_cases.py (what the GPU
run checks, tensor by tensor against torch references) on 1, 2 and 4 ranks
as threads over a CPU stand-in for symm's MoE handles and collectives
(deepep_fake.py); the Buffer over the host backend says it needs GPUs.
Skips without torch."""
import inspect
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, have_library, run_pes  # noqa: E402

sys.path.insert(0, PYTHON_DIR)

torch = pytest.importorskip("torch")
import deepep_cases as cases  # noqa: E402
from deepep_fake import FakeCuda, fake_capture, install, run_ranks  # noqa: E402

needs_lib = pytest.mark.skipif(not have_library(), reason="libsymm.so not built (set SYMM_LIBRARY)")
# the combines that run a routing again say so; the cases check that they did
pytestmark = pytest.mark.filterwarnings("ignore:.*dispatched again.*:UserWarning")


def _run(monkeypatch, n, case, *args):
    dep = install(monkeypatch)

    def body(group):
        ctx = cases.Ctx(dep, group.rank(), n, torch.device("cpu"), False,
                        lambda **kw: dep.Buffer(group, **kw), lambda: None, lambda: None)
        return case(ctx, *args)
    return run_ranks(n, body)


# ---------------------------------------------------------------------------
# DeepEP's public names and signatures (deep_ep V1, the last commit before EPv2)
# ---------------------------------------------------------------------------

SIGNATURES = {
    "Buffer.__init__": "self group num_nvl_bytes=0 num_rdma_bytes=0 low_latency_mode=False num_qps_per_rank=24 "
                       "allow_nvlink_for_low_latency_mode=True allow_mnnvl=False use_fabric=False "
                       "explicitly_destroy=False enable_shrink=False comm=None",
    "Buffer.get_dispatch_layout": "self topk_idx num_experts previous_event=None async_finish=False "
                                  "allocate_on_comm_stream=False",
    "Buffer.dispatch": "self x handle=None num_tokens_per_rank=None num_tokens_per_rdma_rank=None "
                       "is_token_in_rank=None num_tokens_per_expert=None topk_idx=None topk_weights=None "
                       "expert_alignment=1 num_worst_tokens=0 config=None previous_event=None async_finish=False "
                       "allocate_on_comm_stream=False",
    "Buffer.combine": "self x handle topk_weights=None bias=None config=None previous_event=None async_finish=False "
                      "allocate_on_comm_stream=False",
    "Buffer.low_latency_dispatch": "self x topk_idx num_max_dispatch_tokens_per_rank num_experts "
                                   "cumulative_local_expert_recv_stats=None dispatch_wait_recv_cost_stats=None "
                                   "use_fp8=True round_scale=False use_ue8m0=False async_finish=False "
                                   "return_recv_hook=False",
    "Buffer.low_latency_combine": "self x topk_idx topk_weights handle use_logfmt=False zero_copy=False "
                                  "async_finish=False return_recv_hook=False out=None "
                                  "combine_wait_recv_cost_stats=None",
    "Buffer.clean_low_latency_buffer": "self num_max_dispatch_tokens_per_rank hidden num_experts",
    "Buffer.get_next_low_latency_combine_buffer": "self handle",
    "Buffer.get_low_latency_rdma_size_hint": "num_max_dispatch_tokens_per_rank hidden num_ranks num_experts",
    "Buffer.set_num_sms": "new_num_sms",
    "Buffer.get_dispatch_config": "num_ranks",
    "Buffer.get_combine_config": "num_ranks",
    "Buffer.capture": "",
    "Buffer.is_sm90_compiled": "",
    "Buffer.get_comm_stream": "self",
    "Buffer.destroy": "self",
    "Config.__init__": "self num_sms=20 num_max_nvl_chunked_send_tokens=6 num_max_nvl_chunked_recv_tokens=256 "
                       "num_max_rdma_chunked_send_tokens=6 num_max_rdma_chunked_recv_tokens=256",
    "Config.get_nvl_buffer_size_hint": "self hidden_bytes num_ranks",
    "Config.get_rdma_buffer_size_hint": "self hidden_bytes num_ranks",
    "EventOverlap.__init__": "self event=None extra_tensors=None",
    "EventOverlap.current_stream_wait": "self",
}


def _params(fn):
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind == p.KEYWORD_ONLY:
            continue  # symm's additions come after DeepEP's, keyword-only
        out.append(p.name if p.default is p.empty else "%s=%r" % (p.name, p.default))
    return " ".join(out)


def test_deepep_names_and_signatures():
    import symm.moe.deep_ep as dep
    for name, want in SIGNATURES.items():
        cls, meth = name.split(".")
        assert _params(getattr(getattr(dep, cls), meth)) == want, name
    assert dep.topk_idx_t is torch.int64
    assert dep.Buffer.num_sms == 20
    for name in ("low_latency_update_mask_buffer", "low_latency_query_mask_buffer", "low_latency_clean_mask_buffer",
                 "get_local_buffer_tensor", "internode_dispatch", "internode_combine"):
        assert callable(getattr(dep.Buffer, name)), name
    # the package keeps its other names
    from symm.moe import AllToAll, HighThroughput, nvshmem_init  # noqa: F401


def test_static_calls():
    import symm.moe.deep_ep as dep
    from symm import UnsupportedError
    old = dep.Buffer.num_sms
    try:
        dep.Buffer.set_num_sms(24)
        assert dep.Buffer.get_dispatch_config(4).num_sms == 24 and dep.Buffer.get_combine_config(8).num_sms == 24
        with pytest.raises(ValueError, match="must be even"):
            dep.Buffer.set_num_sms(23)
        assert dep.Buffer.num_sms == 24
    finally:
        dep.Buffer.num_sms = old
    c = dep.Config(24, 6, 256, 6, 100)
    assert c.num_max_rdma_chunked_recv_tokens == 102  # rounded up to a multiple of the send chunk, as DeepEP does
    # DeepEP's size hint: 10 channels x 8 ranks x (5 head/tail ints + 256 tokens x (row + 8-byte source
    # record + 128 x int64 index + 128 x float weight + 128 x float scale)), rounded up to 128 bytes
    want = 10 * 8 * (5 * 4 + 256 * (7168 * 2 + 8 + 128 * 8 + 128 * 4 + 128 * 4))
    assert dep.Config().get_nvl_buffer_size_hint(7168 * 2, 8) == (want + 127) // 128 * 128
    assert dep.Config().get_rdma_buffer_size_hint(7168 * 2, 8) == 0
    # DeepEP's recommended chunk sizes on one node (rdma recv 128 rounded up to a multiple of 6, as DeepEP's Config)
    chunks = lambda c: (c.num_max_nvl_chunked_send_tokens, c.num_max_nvl_chunked_recv_tokens,  # noqa: E731
                        c.num_max_rdma_chunked_send_tokens, c.num_max_rdma_chunked_recv_tokens)
    for n, d, c in ((2, 24, 10), (4, 6, 9), (8, 6, 4)):
        assert chunks(dep.Buffer.get_dispatch_config(n)) == (d, 256, 6, 132), n
        assert chunks(dep.Buffer.get_combine_config(n)) == (c, 256, 6, 132), n
        assert dep.Buffer.get_dispatch_config(n).num_sms == dep.Buffer.num_sms
    assert chunks(dep.Config()) == (6, 256, 6, 258) and dep.Config().num_sms == 20
    for f in (dep.Buffer.get_dispatch_config, dep.Buffer.get_combine_config):
        with pytest.raises(UnsupportedError, match="one node"):
            f(16)
        with pytest.raises(ValueError, match="num_ranks"):
            f(0)
    assert dep.Buffer.is_sm90_compiled() is True


@pytest.mark.parametrize("round_scale", [False, True])
def test_fp8_cast_is_deepeps(round_scale):
    """The low-latency cast against DeepEP's arithmetic, bit for bit: blocks
    of every magnitude, all-zero and tiny blocks (amax clamped to 1e-4), and
    block maxima at and just above 448 x a power of two."""
    import symm.moe.deep_ep as dep
    g = torch.Generator().manual_seed(7)
    T, H = 64, 1024
    x = torch.randn(T, H, generator=g) * torch.exp2(torch.randint(-30, 30, (T, H // 128, 1), generator=g).float()
                                                     ).repeat_interleave(128, dim=1).view(T, H)
    x[0] = 0
    x[1] = 1e-6
    for t in range(2, 10):  # maxima 448 x 2^k, and the next bf16 above
        x[t, 0::128] = 448.0 * 2.0 ** (t - 6)
        x[t, 1::128] = -x[t, 0::128]
        x[t + 8, 0::128] = torch.tensor(448.0 * 2.0 ** (t - 6), dtype=torch.bfloat16).float() * (1 + 2 ** -7)
    x = x.to(torch.bfloat16)
    q, s = dep.Buffer._cast_fp8(x, round_scale)
    wq, ws = cases.cast_fp8(x, round_scale)
    cases.eq(s, ws, "scales")
    cases.eq(q, wq, "values")
    assert not q.float().isnan().any()
    if round_scale:
        assert (torch.frexp(s)[0] == 0.5).all(), "scales are powers of two"


@needs_lib
def test_low_latency_size_hint():
    import symm.moe.deep_ep as dep
    a = dep.Buffer.get_low_latency_rdma_size_hint(128, 7168, 8, 256)
    b = dep.Buffer.get_low_latency_rdma_size_hint(256, 7168, 8, 256)
    assert 0 < a < b
    with pytest.raises(ValueError, match="not a multiple"):
        dep.Buffer.get_low_latency_rdma_size_hint(128, 7168, 8, 250)


HOST_BUFFER = r"""
import symm, symm.moe.deep_ep as dep
class G:
    def rank(self): return symm.my_pe()
    def size(self): return symm.n_pes()
symm.init()
try:
    dep.Buffer(G(), int(1e9))
except symm.UnsupportedError as e:
    print("UNSUPPORTED", e)
class Bad(G):
    def size(self): return symm.n_pes() + 1
try:
    dep.Buffer(Bad(), int(1e9))
except ValueError as e:
    print("GROUP", e)
symm.finalize()
print("DONE")
"""


@needs_lib
def test_buffer_on_the_host_backend():
    r = run_pes(HOST_BUFFER, 1)[0]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "UNSUPPORTED" in r.stdout and "without a GPU" in r.stdout, r.stdout
    assert "GROUP Buffer: the group has 2 ranks (this is rank 0), but symm runs 1 PEs" in r.stdout, r.stdout
    assert r.stdout.strip().endswith("DONE"), r.stdout


# ---------------------------------------------------------------------------
# the cases, on ranks as threads
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("fp8", [False, True])
def test_normal(monkeypatch, n, fp8):
    _run(monkeypatch, n, cases.case_layout_and_rounds, fp8, False, False)


@pytest.mark.parametrize("async_mode,previous", [(True, False), (True, True), (False, True)])
def test_normal_events(monkeypatch, async_mode, previous):
    _run(monkeypatch, 2, cases.case_layout_and_rounds, False, async_mode, previous)


@pytest.mark.parametrize("n", [2, 4])
def test_in_flight(monkeypatch, n):
    _run(monkeypatch, n, cases.case_in_flight)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("fp8", [False, True])
def test_recv_buffers(monkeypatch, n, fp8):
    _run(monkeypatch, n, cases.case_recv_buffers, fp8)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("fp8", [False, True])
def test_cached_repeat(monkeypatch, n, fp8):
    _run(monkeypatch, n, cases.case_cached_repeat, fp8)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("use_fp8", [False, True])
@pytest.mark.parametrize("hook", [False, True])
def test_low_latency(monkeypatch, n, use_fp8, hook):
    _run(monkeypatch, n, cases.case_low_latency, use_fp8, hook)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_layout(monkeypatch, n):
    _run(monkeypatch, n, cases.case_layout, pytest.raises)


@pytest.mark.parametrize("n", [1, 2])
def test_errors(monkeypatch, n):
    _run(monkeypatch, n, cases.case_errors, pytest.raises)


def test_ranks_that_disagree_are_told(monkeypatch):
    """Different x dtypes on two ranks: both refuse before anything moves."""
    dep = install(monkeypatch)
    E, K, H = 8, 2, 128

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, explicitly_destroy=True)
        d = cases.batches(3, 2, [6, 6], E, K, H)[group.rank()]
        x = d.x if group.rank() == 0 else d.x.half()
        pr, _, pe, ir, _ = buf.get_dispatch_layout(d.idx, E)
        with pytest.raises(ValueError, match="ranks' dispatches differ"):
            buf.dispatch(x, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe, topk_idx=d.idx,
                         topk_weights=d.w)
        assert buf._slots == {}
        buf.destroy()
    run_ranks(2, body)


def test_wrong_counts_are_reported_by_the_next_dispatch(monkeypatch):
    """num_tokens_per_rank that does not match topk_idx: the outputs are sized
    by it (as DeepEP's), and the next synchronising dispatch raises on every rank."""
    dep = install(monkeypatch)
    E, K, H = 8, 2, 128

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, explicitly_destroy=True)
        d = cases.batches(4, 2, [6, 6], E, K, H)[group.rank()]
        pr, _, pe, ir, _ = buf.get_dispatch_layout(d.idx, E)
        args = dict(x=d.x, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe, topk_idx=d.idx,
                    topk_weights=d.w)
        rx, _, _, _, h, _ = buf.dispatch(**dict(args, num_tokens_per_rank=pr + (1 if group.rank() == 1 else 0)))
        buf.combine(torch.zeros((rx.size(0), H), dtype=torch.bfloat16), h)
        with pytest.raises(RuntimeError, match=r"earlier dispatch on rank\(s\) \[0, 1\] received other counts"):
            buf.dispatch(**args)
        buf.dispatch(**args)  # reported once; the Buffer goes on
        buf.destroy()
    run_ranks(2, body)


def test_no_new_handle_during_capture(monkeypatch):
    dep = install(monkeypatch)
    E, K, H = 8, 2, 128

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, num_rdma_bytes=1, low_latency_mode=True, explicitly_destroy=True)
        d = cases.batches(5, 2, [6, 6], E, K, H)[group.rank()]
        buf._cuda.capturing_now = True
        with pytest.raises(RuntimeError, match="during CUDA graph capture"):
            buf.low_latency_dispatch(d.x, d.idx, 8, E, use_fp8=False)
        pr, _, pe, ir, _ = buf.get_dispatch_layout(d.idx, E)
        with pytest.raises(RuntimeError, match="needs a token bound of 6, above the 0 agreed so far"):
            buf.dispatch(d.x, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe,
                         topk_idx=d.idx, topk_weights=d.w, num_worst_tokens=12)
        buf._cuda.capturing_now = False
        buf.destroy()
    run_ranks(2, body)


@pytest.mark.parametrize("n", [1, 2])
def test_capture_then_eager(monkeypatch, n):
    """A handle's first cached dispatch and weighted combine inside a capture
    (the stand-in's: deep_ep's own torch work there runs at no point), then
    eager calls of that handle: they must not use what the capture made."""
    dep = install(monkeypatch)

    def body(group):
        made = []

        def make_buffer(**kw):
            made.append(dep.Buffer(group, **kw))
            return made[-1]

        def capture(fn):
            with fake_capture(made[-1]):
                return fn(), None
        ctx = cases.Ctx(dep, group.rank(), n, torch.device("cpu"), False, make_buffer, lambda: None, lambda: None)
        cases.case_capture_then_eager(ctx, capture)
    run_ranks(n, body)


def test_low_latency_handle_unread_across_a_capture(monkeypatch):
    """A low-latency handle still unread when a later dispatch over its symm
    handle is captured: its routes cannot be copied then (the copy would run
    at replay, after they changed), so reading it raises, naming the capture."""
    dep = install(monkeypatch)
    E, K, H, M = 8, 2, 128, 8

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, num_rdma_bytes=1, low_latency_mode=True, explicitly_destroy=True)
        d = cases.batches(7, 2, [6, 6], E, K, H)[group.rank()]
        _, _, h1, _, _ = buf.low_latency_dispatch(d.x, d.idx, M, E, use_fp8=False)
        buf.low_latency_combine(torch.zeros((E // 2, 2 * M, H), dtype=torch.bfloat16), d.idx, d.w, h1)
        with fake_capture(buf):
            buf.low_latency_dispatch(d.x, d.idx, M, E, use_fp8=False)
        with pytest.raises(RuntimeError, match="captured into a CUDA graph before this handle was read"):
            h1[0]
        buf.destroy()
    run_ranks(2, body)


@pytest.mark.parametrize("n", [2, 4])
def test_combine_weights_side_channel_and_wide_plan(monkeypatch, n):
    """combine's topk_weights: up to the handle's top-k columns they ride in
    symm's combine (its side channel: no plan, no exchange of their own);
    wider ones take the all-to-all path, whose plan (buffer, counts, gather
    index) is kept per handle and per width. Two handles of other routings,
    token counts and top-k (3 and 4), widths below, at and above each,
    interleaved; every combined weight checked (each rank returns, for the row
    of token t, (rank + 1) x (t + 1) + column / 2, so a wrong row, rank or
    plan gives other sums); a kept plan is used again as it is."""
    dep = install(monkeypatch)
    E, H = 8 * n, 128

    def body(group):
        me = group.rank()
        L = E // n
        buf = dep.Buffer(group, num_nvl_bytes=1, explicitly_destroy=True)
        hs = []
        for seed, T, K in ((21, 10, 3), (22, 7, 4)):
            data = cases.batches(seed, n, [T + r for r in range(n)], E, K, H)
            d = data[me]
            pr, _, pe, ir, _ = buf.get_dispatch_layout(d.idx, E)
            rx, _, _, _, h, _ = buf.dispatch(d.x, num_tokens_per_rank=pr, is_token_in_rank=ir,
                                             num_tokens_per_expert=pe, topk_idx=d.idx, topk_weights=d.w)
            hs.append((h, d, rx.size(0), K))
        last = {}  # handle -> (width, plan) of its last combine on the wide path
        for j, width in ((0, 3), (1, 4), (0, 5), (1, 4), (0, 3), (0, 5), (1, 2), (1, 6), (0, 5), (1, 6), (0, 1)):
            h, d, rows, K = hs[j]
            buf.dispatch(d.x, handle=h)
            t = h[3].to(torch.float32).view(-1, 1)  # recv_src: each row's token on its source
            w = (me + 1) * (t + 1) + torch.arange(width, dtype=torch.float32).view(1, -1) / 2
            before = h._route.wplan
            _, cw, _ = buf.combine(torch.zeros((rows, H), dtype=torch.bfloat16), h, topk_weights=w)
            on = cases.in_ranks(d.idx, L, n).float()  # [tokens, ranks]: the ranks token t went to
            tok = torch.arange(d.T, dtype=torch.float32).view(-1, 1)
            want = (on * torch.arange(1, n + 1, dtype=torch.float32)).sum(1, keepdim=True) * (tok + 1) + \
                on.sum(1, keepdim=True) * torch.arange(width, dtype=torch.float32).view(1, -1) / 2
            cases.close(cw, want, "handle %d, width %d: combined_topk_weights" % (j, width), rtol=0, atol=0)
            plan = h._route.wplan
            if width <= K:  # the side channel: no plan made
                assert plan is before, "handle %d, width %d: a plan was made for the side channel" % (j, width)
                continue
            assert plan is not None and plan[0] == width, plan
            if j in last and last[j][0] == width:  # the same width on this handle as its last wide combine
                assert plan is last[j][1], "handle %d, width %d: the kept plan was made again" % (j, width)
            last[j] = (width, plan)
        assert hs[0][0]._route.wplan is not hs[1][0]._route.wplan
        buf.destroy()
    run_ranks(n, body)


def test_low_latency_handle_first_read_in_a_capture(monkeypatch):
    """A low-latency handle first read inside a capture: what the capture
    computed is not what a later eager read returns (it holds values only
    once the graph replays); the eager read decodes the routes itself."""
    dep = install(monkeypatch)
    E, K, H, M = 8, 2, 128, 8

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, num_rdma_bytes=1, low_latency_mode=True, explicitly_destroy=True)
        d = cases.batches(8, 2, [6, 6], E, K, H)[group.rank()]
        _, _, h, _, _ = buf.low_latency_dispatch(d.x, d.idx, M, E, use_fp8=False)
        with fake_capture(buf):
            h[0], h[1]
        want = buf._ll_decode(h._route)
        cases.eq(h[0], want[0], "src_info read after a capture")
        cases.eq(h[1], want[1], "layout_range read after a capture")
        buf.destroy()
    run_ranks(2, body)


def test_sm_budget_follows_the_config(monkeypatch):
    dep = install(monkeypatch)
    E, K, H = 8, 2, 128

    def body(group):
        buf = dep.Buffer(group, num_nvl_bytes=1, explicitly_destroy=True)
        d = cases.batches(6, 2, [6, 6], E, K, H)[group.rank()]
        pr, _, pe, ir, _ = buf.get_dispatch_layout(d.idx, E)
        args = dict(x=d.x, num_tokens_per_rank=pr, is_token_in_rank=ir, num_tokens_per_expert=pe, topk_idx=d.idx,
                    topk_weights=d.w)
        for sms, want in ((8, 8), (40, 16), (0, 16)):  # the stand-in's share is 16 SMs
            rx, _, _, _, h, _ = buf.dispatch(**dict(args, config=dep.Config(sms)))
            slots = [s for v in buf._slots.values() for s in v]
            assert [s.h.get_num_sms() for s in slots if s.route is h._route] == [want], (sms, want)
            buf.combine(torch.zeros((rx.size(0), H), dtype=torch.bfloat16), h, config=dep.Config(sms))
        buf.destroy()
    run_ranks(2, body)


def test_event_overlap():
    import symm.moe.deep_ep as dep
    e = dep.EventOverlap(None)
    with e:
        pass
    with pytest.raises(ValueError, match="no event"):
        e.current_stream_wait()
    ev = dep.EventHandle(FakeCuda())
    seen = dep.EventOverlap(ev, (torch.zeros(1),))
    seen.current_stream_wait()
    assert seen.extra_tensors[0].shape == (1,)


def test_bench_script_measures_every_row(monkeypatch):
    """bench/moe/deepep_api_bench.py's measurement and tables on the stand-in
    (events that say 1 ms): every path and SM budget gets its row in both
    timings (back to back, idle GPU), the ratio tables and the equality check
    come out."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench", "moe",
                        "deepep_api_bench.py")
    spec = importlib.util.spec_from_file_location("deepep_api_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    dep = install(monkeypatch)
    E, K, H, T = 8, 2, 256, 12

    class Ev:
        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 1.0

    def body(group):
        from deepep_fake import FakeEngine
        eng = FakeEngine(group)
        d = cases.batches(8, 2, [T, T], E, K, H)[group.rank()]
        x8, s8 = bench.fp8_rows(torch, d.x)
        clock = bench.Clock(Ev, lambda: None, lambda: None, reps=3, warmup=1, flush=lambda: None)
        results, check = bench.measure(
            torch, dep, lambda dt, sc: eng.ht(E, K, H, T, dt, sc),
            lambda how: dep.Buffer(group, 1 << 20, explicitly_destroy=True, max_num_tokens=T,
                                   num_recv_buffers=0 if how == "copy" else 2, zero_copy_recv=how == "views"),
            (d.x, x8, s8, d.idx, d.w, E), 2, [8, 0], eng.share, clock)
        return results, check, bench.table(results, H, check)

    (results, check, text), _ = run_ranks(2, body)
    assert check is True
    assert [(p.split()[0] + " " + p.split()[1], sms) for p, sms, _, _ in results] == [
        ("own (symm.moe.HighThroughput)", 8), ("api cached", 8), ("api copy", 8), ("api views", 8), ("api full", 8),
        ("own (symm.moe.HighThroughput)", 16), ("api cached", 16), ("api copy", 16), ("api views", 16),
        ("api full", 16)]
    assert "| api cached (symm.moe.deep_ep) | 16 |" in text and "received rows of the API = the own API's" in text
    assert "#### back to back" in text and "#### idle GPU" in text
    assert text.count("| 1.00 | 1.00 |") >= 8, text


def _record_c_calls(monkeypatch, owner, attr):
    """owner.attr (a C-function lookup by name) replaced by one that records
    each name looked up and each call's arguments; every call returns
    status[0]. Returns (calls, status, looked)."""
    calls, status, looked = [], [0], []

    def fn_for(name):
        looked.append(name)

        def f(*a):
            calls.append((name,) + a)
            return status[0]
        return f
    monkeypatch.setattr(owner, attr, fn_for)
    return calls, status, looked


def _bare_engine(monkeypatch, n, device):
    """A deep_ep GPU engine of n ranks on device with nothing set up, its
    stream i reported as 1000 + i."""
    import symm.moe.deep_ep as dep
    monkeypatch.setattr(dep, "_raw_stream", lambda i: 1000 + i)
    eng = object.__new__(dep._SymmEngine)
    eng.n, eng.device, eng._colls, eng._codes = n, device, {}, {}
    return eng


@needs_lib
def test_engine_collectives_pass_what_symm_coll_passes(monkeypatch):
    """The GPU engine's all_gather / all_to_all (over the Buffer's own
    tensors) call symm's C collectives with the arguments symm.all_gather /
    symm.all_to_all pass (send, recv, elements per PE, dtype code, team, the
    current stream), the functions looked up once; a failing status raises."""
    import symm
    import symm._coll as coll
    calls, status, looked = _record_c_calls(monkeypatch, coll, "_fn")
    eng = _bare_engine(monkeypatch, 2, torch.device("cuda", 3))
    inp, out = torch.zeros(6, dtype=torch.int32), torch.zeros(12, dtype=torch.int32)
    f_in, f_out = torch.zeros(8), torch.zeros(8)
    for _ in range(2):
        eng.all_gather(out, inp)
        eng.all_to_all(f_out, f_in)
    want = [("symm_all_gather", inp.data_ptr(), out.data_ptr(), 6, coll._DTYPE_CODES["int32"], None, 1003),
            ("symm_all_to_all", f_in.data_ptr(), f_out.data_ptr(), 4, coll._DTYPE_CODES["float32"], None, 1003)]
    assert calls == want * 2, calls
    assert looked == ["symm_all_gather", "symm_all_to_all"], looked
    status[0] = symm.InvalidArgumentError.status
    with pytest.raises(symm.InvalidArgumentError):
        eng.all_to_all(f_out, f_in)


def test_engine_layout_passes_what_symm_moe_layout_takes(monkeypatch):
    """The GPU engine's layout calls symm_moe_layout with the indices (address,
    dtype code, tokens, top-k), the experts, the ranks, the three outputs and
    the current stream, the function looked up once; a failing status raises."""
    import symm
    import symm._coll as coll
    import symm.moe.deep_ep as dep
    calls, status, looked = _record_c_calls(monkeypatch, dep, "_moe_fn")
    eng = _bare_engine(monkeypatch, 4, torch.device("cuda", 1))
    pr, pe = torch.zeros(4, dtype=torch.int32), torch.zeros(32, dtype=torch.int32)
    ir = torch.zeros((6, 4), dtype=torch.bool)
    want = []
    for dtype in (torch.int64, torch.int32):
        idx = torch.zeros((6, 3), dtype=dtype)
        eng.layout(idx, 32, ir, pr, pe)
        want.append(("symm_moe_layout", idx.data_ptr(), coll._DTYPE_CODES[str(dtype)[6:]], 6, 3, 32, 4,
                     pr.data_ptr(), pe.data_ptr(), ir.data_ptr(), 1001))
    assert calls == want, calls
    assert looked == ["symm_moe_layout"], looked
    status[0] = symm.InvalidArgumentError.status
    with pytest.raises(symm.InvalidArgumentError):
        eng.layout(idx, 32, ir, pr, pe)


@needs_lib
def test_symm_moe_layout_refuses_before_anything_runs():
    """symm_moe_layout through its ctypes prototype: wrong arguments come back
    as InvalidArgumentError naming them, with no GPU (nothing was launched)."""
    import symm
    import symm._coll as coll
    import symm._runtime as rt
    from symm.moe import _fn
    f = _fn("symm_moe_layout")
    idx = torch.zeros((4, 2), dtype=torch.int64)
    pr, pe, ir = torch.zeros(2, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.bool)
    i64, f32 = coll._DTYPE_CODES["int64"], coll._DTYPE_CODES["float32"]
    p, r, e, t = idx.data_ptr(), pr.data_ptr(), pe.data_ptr(), ir.data_ptr()
    for args, match in (((p, i64, 4, 2, 9, 2, r, e, t), "num_experts 9"), ((p, f32, 4, 2, 8, 2, r, e, t), "dtype"),
                        ((p, i64, 4, 2, 8, 65, r, e, t), "num_ranks 65"),
                        ((None, i64, 4, 2, 8, 2, r, e, t), "indices is NULL"),
                        ((p + 4, i64, 4, 2, 8, 2, r, e, t), "not aligned"),
                        ((p, i64, 4, 2, 8, 2, r, e, None), "is_token_in_rank")):
        with pytest.raises(symm.InvalidArgumentError, match=match):
            rt._check("symm_moe_layout", f(*args, None))


def test_host_cpu_bench_runs_the_real_python_path():
    """bench/moe/deepep_host_cpu.py (the Buffer over symm.moe.HighThroughput's
    own Python, C calls stubbed): every path runs, and the torch ops beside
    symm's stay what they have to be: none for cached dispatches and a plain
    combine, one for a bias, none for combine's weights (symm's combine carries them), the full dispatch's
    seven and its one sum on the host; the stubs are undone."""
    import importlib.util
    import symm.moe as moe
    import symm.moe.deep_ep as dep
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench", "moe",
                        "deepep_host_cpu.py")
    spec = importlib.util.spec_from_file_location("deepep_host_cpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    saved = (moe._fn, moe._stream, dep._engine_factory)
    got = bench.main(["--calls", "20", "--tokens", "16", "--experts", "32"])
    assert (moe._fn, moe._stream, dep._engine_factory) == saved
    assert sorted(got) == sorted(["cached bf16", "cached fp8", "pair bf16", "pair + weights", "pair + bias",
                                  "full bf16"]), sorted(got)
    ops = {name: sorted(o) for name, (_, o) in got.items()}
    assert ops["cached bf16"] == ops["cached fp8"] == ops["pair bf16"] == [], ops
    assert ops["pair + bias"] == ["add_"], ops
    assert ops["pair + weights"] == [], ops
    # the count row and the rank prefix's copy (the host forms it; sources, indices, weights and what was
    # received: symm's one copy kernel); on the host, one sum of the per-expert counts (the rest of the counts
    # are read as lists)
    assert ops["full bf16"] == sorted(["cat", "copy_", "sum"]), ops


def test_overhead_bench_counts_what_the_wrapper_adds():
    """bench/moe/deepep_overhead.py on the CPU stand-in: every path gets its
    row, and what the wrapper launches besides symm's own calls stays what it
    has to be: nothing for cached dispatches (their rows land in a receive
    buffer of the pool, or are viewed) and a plain combine, one copy per
    returned tensor for cached dispatches without a free receive buffer, and
    for the non-cached dispatch the count row and the copy of the rank prefix
    (formed on the host from the counts it read; the sources, indices,
    weights and what it keeps for the next dispatch's check come from symm's
    one copy kernel; one host synchronisation, DeepEP's notify step)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench", "moe",
                        "deepep_overhead.py")
    spec = importlib.util.spec_from_file_location("deepep_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import symm.moe.deep_ep as dep
    factory = dep._engine_factory
    text, rows = bench.run_cpu(bench.parse(["--cpu", "--reps", "2", "--tokens", "16", "--experts", "32"]))
    assert dep._engine_factory is factory
    got = {name: (symm, other, syncs, ops) for name, symm, other, syncs, _, _, ops in rows}
    assert sorted(got) == sorted(["own dispatch bf16", "own dispatch fp8", "api full bf16", "api full fp8",
                                  "api cached bf16", "api cached fp8", "api views bf16", "api views fp8",
                                  "api cached copy bf16", "api cached copy fp8",
                                  "own combine", "api combine", "api combine + topk_weights", "own layout",
                                  "api layout"])
    for kind, copies in (("bf16", ["copy_"]), ("fp8", ["copy_", "copy_"])):
        assert got["own dispatch " + kind] == (1, 0, 0, [])
        assert got["api views " + kind] == (1, 0, 0, [])
        assert got["api cached " + kind] == (1, 0, 0, [])
        assert got["api cached copy " + kind] == (1, len(copies), 0, copies)
        symm, other, syncs, ops = got["api full " + kind]
        # the count exchange, the dispatch and the copy of what it received; the host reads the counts
        assert (symm, syncs) == (3, 1)
        assert sorted(ops) == sorted(["cat", "copy_"]), ops  # the count row, the rank prefix (formed on the host)
    assert got["api combine"] == (1, 0, 0, [])
    # the layout is symm_moe_layout's one kernel, as the own API's is one
    assert got["own layout"] == (1, 0, 0, []) and got["api layout"] == (1, 0, 0, []), got["api layout"]
    # the weights ride in symm's combine: one call, nothing beside it
    assert got["api combine + topk_weights"] == (1, 0, 0, []), got["api combine + topk_weights"]
    assert "| api full bf16 |" in text and "other launches, per path" in text
