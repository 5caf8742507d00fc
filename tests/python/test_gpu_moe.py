"""symm.moe on GPUs: pplx-kernels' own test matrix and more, for AllToAll and
HighThroughput. Run under a launcher, one process per PE (PEs may share a
GPU); references are computed with torch on each PE's GPU from data every PE
generates alike, so no NCCL is needed:

    torchrun --nproc-per-node N -m pytest -q tests/python/test_gpu_moe.py

AllToAll: dp_size 1 and 2; dp_x bf16, f16 and fp8 e4m3 with float32 scales in
blocks of 128, times out_tokens bf16 and f16; 8 experts top-3 hidden 512 max
10 tokens, and 256 experts top-8 hidden 7168 max 128; bound_m below the
tokens; a DP group with no tokens; every expert's received rows and scales
compared exactly (as multisets, like pplx's test); combine against the
weighted sum; torch.compile; CUDA graph replay; 1000 calls back to back with
fresh data; send and receive halves with a matmul between them; errors.
SM budgets of 1, 2, 8, 24 and every SM for both (no kernel launches more
blocks than its budget). HighThroughput: 4096 tokens per PE (fp8 + scales,
bf16 combine): the layout, every received row in order, indices, weights,
sources, counts, the combine. The spawn-launched pplx start
(nvshmem_init over torch.distributed) is test_gpu_moe_spawn.py.
"""
import pytest

torch = pytest.importorskip("torch")
import symm  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def env(pe):
    """symm.moe over the session's PEs (conftest's pe: symm and a gloo group)."""
    import symm.moe as moe
    return moe, pe.rank, pe.world, pe.device


def expert_scale(e):
    return 1.0 + (e % 4).to(torch.float32) * 0.25


class GroupData:
    """One DP group's tokens (pplx's RankTestData, on the GPU)."""

    def __init__(self, gen, device, m, num_experts, k, hidden, in_dtype, bound=None):
        self.m = m
        self.bound = m if bound is None else bound
        self.indices = torch.rand((m, num_experts), generator=gen, device=device).argsort(dim=1)[:, :k]
        self.indices = self.indices.to(torch.int32).contiguous()
        self.weights = torch.rand((m, k), generator=gen, device=device)
        self.scale = None
        if in_dtype.itemsize == 1:
            self.x = ((torch.rand((m, hidden), generator=gen, device=device) - 0.5) * 400).to(in_dtype)
            self.scale = torch.rand((m, (hidden + 127) // 128), generator=gen, device=device)
        else:
            self.x = torch.randn((m, hidden), generator=gen, device=device).to(in_dtype)


def make_groups(seed, num_dp, device, max_tokens, num_experts, k, hidden, in_dtype, bound=False, empty=None):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = []
    for g in range(num_dp):
        m = 0 if g == empty else int(torch.randint(1, max_tokens + 1, (1,), generator=gen, device=device))
        b = int(torch.randint(max(0, m // 2), m + 1, (1,), generator=gen, device=device)) if bound else m
        out.append(GroupData(gen, device, m, num_experts, k, hidden, in_dtype, b))
    return out


def row_keys(rows_u8, device):
    w = torch.arange(1, rows_u8.size(1) + 1, device=device, dtype=torch.int64) * 2654435761 % 1000003
    return (rows_u8.to(torch.int64) * w).sum(dim=1)


def same_multiset(got_x, got_s, want_x, want_s, device, what):
    """The rows (and their scales) of got and want are the same multiset."""
    assert got_x.size(0) == want_x.size(0), "%s: %d rows, expected %d" % (what, got_x.size(0), want_x.size(0))
    if got_x.size(0) == 0:
        return
    gu, wu = got_x.contiguous().view(torch.uint8), want_x.contiguous().view(torch.uint8)
    go, wo = row_keys(gu, device).argsort(), row_keys(wu, device).argsort()
    assert torch.equal(gu[go], wu[wo]), "%s: the received rows differ from the tokens routed here" % what
    if got_s is not None:
        assert torch.equal(got_s[go], want_s[wo]), "%s: the received scales differ" % what


def check_dispatch(ata, groups, num_tokens, expert_x, expert_x_scale, me, device, what):
    L, first = ata.local_experts, ata.first_expert
    counts = num_tokens.tolist()
    for le in range(L):
        e = first + le
        want_x, want_s = [], []
        for g in groups:
            sel = (g.indices[:g.bound] == e).any(dim=1)
            want_x.append(g.x[:g.bound][sel])
            if g.scale is not None:
                want_s.append(g.scale[:g.bound][sel])
        want_x = torch.cat(want_x)
        want_s = torch.cat(want_s) if want_s else None
        n = counts[le]
        assert n == want_x.size(0), "%s: expert %d got %d tokens, expected %d" % (what, e, n, want_x.size(0))
        same_multiset(expert_x[le, :n], None if expert_x_scale is None else expert_x_scale[le, :n],
                      want_x, want_s, device, "%s expert %d" % (what, e))


def experts(ata, expert_x, y_dtype):
    """expert l's output: its input times 1 + (expert % 4) / 4."""
    s = expert_scale(torch.arange(ata.first_expert, ata.first_expert + ata.local_experts, device=expert_x.device))
    return (expert_x.to(y_dtype) * s.view(-1, 1, 1).to(y_dtype)).to(y_dtype)


def combine_ref(g, y_dtype, out_dtype):
    ys = (g.x[:g.bound].to(y_dtype).unsqueeze(1) * expert_scale(g.indices[:g.bound].long()).to(y_dtype).unsqueeze(2))
    ys = ys.to(y_dtype).float()
    ref = (ys * g.weights[:g.bound].unsqueeze(2)).sum(dim=1)
    return ref.to(out_dtype)


def assert_combined(out, ref, out_dtype, what):
    if ref.numel() == 0:
        return
    rtol = 1.6e-2 if out_dtype == torch.bfloat16 else 2e-3
    atol = 1e-3 * max(1.0, float(ref.float().abs().max()))
    torch.testing.assert_close(out.float(), ref.float(), rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))


def run_round(moe, ata, groups, me, device, in_dtype, out_dtype, y_dtype, dp_size, cfg, use_compile=False,
              split=False, use_bound=True, check=True):
    g = groups[me // dp_size]
    L, H, M = ata.local_experts, cfg["hidden"], cfg["max_tokens"]
    rows = M * (ata.world_size // dp_size)
    num = torch.empty(L, dtype=torch.int32, device=device)
    ex = torch.empty((L, rows, H), dtype=in_dtype, device=device)
    exs = torch.empty((L, rows, (H + 127) // 128), dtype=torch.float32, device=device) \
        if in_dtype.itemsize == 1 else None
    bound = torch.tensor([g.bound], dtype=torch.uint32, device=device) if use_bound else None
    idx = g.indices.to(torch.uint32)
    dispatch = torch.compile(ata.dispatch) if use_compile else ata.dispatch
    combine = torch.compile(ata.combine) if use_compile else ata.combine
    if split:
        dispatch(num, ex, exs, g.x, g.scale, idx, bound, do_send=True, do_recv=False)
        a = torch.randn((256, 256), device=device)
        a = a @ a  # work between the halves
        dispatch(num, ex, exs, g.x, g.scale, idx, bound, do_send=False, do_recv=True)
    else:
        dispatch(out_expert_num_tokens=num, out_expert_x=ex, out_expert_x_scale=exs, dp_x=g.x,
                 dp_x_scale=g.scale, indices=idx, bound_m=bound)
    y = experts(ata, ex, y_dtype)
    out = torch.full((M, H), float("nan"), dtype=out_dtype, device=device)
    if split:
        combine(out, idx, g.weights, y, bound, do_send=True, do_recv=False)
        b = torch.randn((256, 256), device=device)
        b = b @ b
        combine(out, idx, g.weights, y, bound, do_send=False, do_recv=True)
    else:
        combine(out_tokens=out, indices=idx, weights=g.weights, expert_y=y, bound_m=bound)
    torch.cuda.synchronize()
    if check:
        what = "dp%d %s->%s" % (dp_size, in_dtype, out_dtype)
        if not use_bound:
            for gg in groups:
                gg.bound = gg.m
        check_dispatch(ata, groups, num, ex, exs, me, device, what)
        assert_combined(out[:g.bound], combine_ref(g, y_dtype, out_dtype), out_dtype, what)
        assert torch.isnan(out[g.bound:].float()).all(), "%s: rows past bound_m were written" % what
    ata.check()
    return out


def make_ata(moe, n, me, cfg, in_dtype, dp_size):
    scale_bytes = 4 * ((cfg["hidden"] + 127) // 128) if in_dtype.itemsize == 1 else 0
    return moe.AllToAll.intranode(cfg["max_tokens"], cfg["experts"], cfg["topk"], me, n, dp_size, cfg["hidden"],
                                  cfg["hidden"] * in_dtype.itemsize, scale_bytes)


SMALL = {"experts": 8, "topk": 3, "hidden": 512, "max_tokens": 10}
LARGE = {"experts": 256, "topk": 8, "hidden": 7168, "max_tokens": 128}
IN_DTYPES = ["bfloat16", "float16", "float8_e4m3fn"]
OUT_DTYPES = ["bfloat16", "float16"]


def need(n, dp_size, cfg):
    if n % dp_size:
        pytest.skip("world size %d is not a multiple of dp_size %d" % (n, dp_size))
    if cfg["experts"] % n:
        pytest.skip("%d experts do not split over %d PEs" % (cfg["experts"], n))


@pytest.mark.parametrize("out_name", OUT_DTYPES)
@pytest.mark.parametrize("in_name", IN_DTYPES)
@pytest.mark.parametrize("dp_size", [1, 2])
def test_pplx_matrix(env, dp_size, in_name, out_name):
    moe, me, n, device = env
    need(n, dp_size, SMALL)
    in_dtype, out_dtype = getattr(torch, in_name), getattr(torch, out_name)
    ata = make_ata(moe, n, me, SMALL, in_dtype, dp_size)
    try:
        for it in range(3):
            groups = make_groups(123 + it, n // dp_size, device, SMALL["max_tokens"], SMALL["experts"],
                                 SMALL["topk"], SMALL["hidden"], in_dtype, bound=it > 0,
                                 empty=(n // dp_size - 1) if it == 2 and n // dp_size > 1 else None)
            run_round(moe, ata, groups, me, device, in_dtype, out_dtype, out_dtype, dp_size, SMALL,
                      split=it == 1)
    finally:
        ata.destroy()


def test_compile(env):
    """dispatch and combine under torch.compile (pplx's use_compile), with
    expert outputs in float32 and then bf16."""
    moe, me, n, device = env
    need(n, 1, SMALL)
    ata = make_ata(moe, n, me, SMALL, torch.float8_e4m3fn, 1)
    try:
        for it, y_dtype in enumerate((torch.float32, torch.bfloat16)):
            groups = make_groups(7 + it, n, device, SMALL["max_tokens"], SMALL["experts"], SMALL["topk"],
                                 SMALL["hidden"], torch.float8_e4m3fn, bound=True)
            run_round(moe, ata, groups, me, device, torch.float8_e4m3fn, torch.bfloat16, y_dtype, 1, SMALL,
                      use_compile=True)
    finally:
        ata.destroy()


@pytest.mark.parametrize("dp_size", [1, 2])
def test_large(env, dp_size):
    moe, me, n, device = env
    need(n, dp_size, LARGE)
    ata = make_ata(moe, n, me, LARGE, torch.float8_e4m3fn, dp_size)
    try:
        for it in range(2):
            groups = make_groups(99 + it, n // dp_size, device, LARGE["max_tokens"], LARGE["experts"],
                                 LARGE["topk"], LARGE["hidden"], torch.float8_e4m3fn, bound=it == 1,
                                 empty=0 if it == 1 and n // dp_size > 1 else None)
            run_round(moe, ata, groups, me, device, torch.float8_e4m3fn, torch.bfloat16, torch.bfloat16, dp_size,
                      LARGE, split=it == 1)
    finally:
        ata.destroy()


def test_graph_replay(env):
    moe, me, n, device = env
    need(n, 1, SMALL)
    cfg, M, H = SMALL, SMALL["max_tokens"], SMALL["hidden"]
    dt = torch.float8_e4m3fn
    ata = make_ata(moe, n, me, cfg, dt, 1)
    try:
        L = ata.local_experts
        x = torch.zeros((M, H), dtype=dt, device=device)
        xs = torch.zeros((M, (H + 127) // 128), device=device)
        idx = torch.empty((M, cfg["topk"]), dtype=torch.uint32, device=device)
        w = torch.zeros((M, cfg["topk"]), device=device)
        bound = torch.empty(1, dtype=torch.uint32, device=device)
        num = torch.empty(L, dtype=torch.int32, device=device)
        ex = torch.empty((L, M * n, H), dtype=dt, device=device)
        exs = torch.empty((L, M * n, (H + 127) // 128), device=device)
        out = torch.empty((M, H), dtype=torch.bfloat16, device=device)
        y = torch.empty((L, M * n, H), dtype=torch.bfloat16, device=device)

        def step():
            ata.dispatch(num, ex, exs, x, xs, idx, bound, do_send=True, do_recv=False)
            ata.dispatch(num, ex, exs, x, xs, idx, bound, do_send=False, do_recv=True)
            y.copy_(experts(ata, ex, torch.bfloat16))
            ata.combine(out, idx, w, y, bound)

        def load(it):
            """Every group's full batch for replay `it` (the graph's sizes are
            fixed at max_num_tokens; bound_m says how many tokens count)."""
            groups = []
            for p in range(n):
                gen = torch.Generator(device=device)
                gen.manual_seed(900 + it * n + p)
                groups.append(GroupData(gen, device, M, cfg["experts"], cfg["topk"], H, dt,
                                        bound=max(1, M - (it + 3 * p) % M)))
            g = groups[me]
            x.copy_(g.x)
            xs.copy_(g.scale)
            idx.copy_(g.indices.to(torch.uint32))
            w.copy_(g.weights)
            bound.copy_(torch.tensor([g.bound], dtype=torch.uint32, device=device))
            return groups

        load(0)
        step()  # warm-up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(graph, stream=s):
                step()
        torch.cuda.current_stream().wait_stream(s)
        for it in range(1, 6):
            groups = load(it)
            out.fill_(float("nan"))
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            g = groups[me]
            check_dispatch(ata, groups, num, ex, exs, me, device, "graph replay %d" % it)
            assert_combined(out[:g.bound], combine_ref(g, torch.bfloat16, torch.bfloat16), torch.bfloat16,
                            "graph replay %d" % it)
            symm.barrier()
        ata.check()
    finally:
        ata.destroy()


def test_thousand_calls(env):
    """10^3 dispatch/combine pairs back to back with fresh data each call,
    checked on the GPU (counts per expert and the combined tokens) without a
    host synchronisation until the end."""
    moe, me, n, device = env
    need(n, 1, SMALL)
    cfg, M, H, K, E = SMALL, SMALL["max_tokens"], SMALL["hidden"], SMALL["topk"], SMALL["experts"]
    ata = make_ata(moe, n, me, cfg, torch.bfloat16, 1)
    try:
        L = ata.local_experts
        num = torch.empty(L, dtype=torch.int32, device=device)
        ex = torch.empty((L, M * n, H), dtype=torch.bfloat16, device=device)
        out = torch.empty((M, H), dtype=torch.bfloat16, device=device)
        bad_counts = torch.zeros((), dtype=torch.int64, device=device)
        worst = torch.zeros((), device=device)
        gen = torch.Generator(device=device)
        for it in range(1000):
            gen.manual_seed(10_000 + it)
            idx_all = torch.rand((n, M, E), generator=gen, device=device).argsort(dim=2)[:, :, :K].to(torch.int32)
            x_all = torch.randn((n, M, H), generator=gen, device=device).to(torch.bfloat16)
            w_all = torch.rand((n, M, K), generator=gen, device=device)
            idx = idx_all[me].to(torch.uint32)
            ata.dispatch(num, ex, None, x_all[me], None, idx, None)
            want = torch.bincount(idx_all.reshape(-1).long(), minlength=E)[ata.first_expert:ata.first_expert + L]
            bad_counts += (num.long() != want).sum()
            ata.combine(out, idx, w_all[me], experts(ata, ex, torch.bfloat16), None)
            ys = (x_all[me].unsqueeze(1) * expert_scale(idx_all[me].long()).to(torch.bfloat16).unsqueeze(2))
            ref = (ys.float() * w_all[me].unsqueeze(2)).sum(dim=1)
            err = ((out.float() - ref).abs() - 2e-2 * ref.abs()).max()
            worst = torch.maximum(worst, err)
        torch.cuda.synchronize()
        assert int(bad_counts) == 0, "%d expert counts were wrong over 1000 calls" % int(bad_counts)
        assert float(worst) <= 2e-2, "a combined value was off by %g beyond the bf16 tolerance" % float(worst)
        ata.check()
    finally:
        ata.destroy()


def test_errors(env):
    moe, me, n, device = env
    need(n, 1, SMALL)
    with pytest.raises(ValueError, match="not a multiple of dp_size"):
        moe.AllToAll.intranode(10, 8, 3, me, n, n + 1, 512, 512, 16)
    with pytest.raises(ValueError, match="symm runs this process as PE"):
        moe.AllToAll.intranode(10, 8, 3, (me + 1) % (n + 1), n + 1, 1, 512, 512, 16)
    with pytest.raises(symm.InvalidArgumentError, match="hidden_dim_scale_bytes 12"):
        moe.AllToAll.intranode(10, 8, 3, me, n, 1, 512, 512, 12)
    ata = make_ata(moe, n, me, SMALL, torch.bfloat16, 1)
    try:
        L, H, M = ata.local_experts, 512, 10
        num = torch.empty(L, dtype=torch.int32, device=device)
        ex = torch.empty((L, M * n, H), dtype=torch.bfloat16, device=device)
        x = torch.randn((M, H), device=device).to(torch.bfloat16)
        idx = torch.stack([torch.randperm(8, device=device)[:3] for _ in range(M)]).to(torch.uint32)
        w = torch.rand((M, 3), device=device)
        out = torch.empty((M, H), dtype=torch.bfloat16, device=device)
        with pytest.raises(TypeError, match="out_expert_x is torch.float16"):
            ata.dispatch(num, ex.half(), None, x, None, idx, None)
        with pytest.raises(ValueError, match="must be None"):
            ata.dispatch(num, ex, torch.empty((L, M * n, 4), device=device), x, None, idx, None)
        with pytest.raises(symm.InvalidArgumentError, match="num_tokens 11 is above max_num_tokens 10"):
            ata.dispatch(num, ex, None, torch.cat([x, x[:1]]), None, torch.cat([idx, idx[:1]]), None)
        with pytest.raises(symm.InvalidArgumentError, match="out of order"):
            ata.combine(out, idx, w, ex, None)
        with pytest.raises(ValueError, match="cannot both be False"):
            ata.dispatch(num, ex, None, x, None, idx, None, do_send=False, do_recv=False)
        # an expert out of range on PE 0: skipped on the device, reported by the
        # next call (which still runs, so the PEs stay in step) or by check()
        bad = idx.to(torch.int32)  # int32 indices are taken as they are
        if me == 0:
            bad[4, 1] = 1000
        errors = []
        for fn in (lambda: ata.dispatch(num, ex, None, x, None, bad, None),
                   lambda: ata.combine(out, bad, w, ex, None), ata.check):
            try:
                fn()
            except symm.InvalidArgumentError as e:
                errors.append(str(e))
        if me == 0:
            assert len(errors) == 1 and "indices[4][1] = 1000 is outside [0, num_experts 8)" in errors[0], errors
        else:
            assert errors == []
        ata.check()
        symm.barrier()
    finally:
        ata.destroy()


def test_sm_budget(env):
    """SM budgets of 1, 2, 8, 24 and every SM (odd ranks one less, where they
    can: budgets are per PE): no kernel launches more blocks than its budget
    (as the kernels record it) and every round stays right, split halves
    included; bad budgets are refused."""
    moe, me, n, device = env
    need(n, 1, SMALL)
    share = symm.sm_share()
    ata = make_ata(moe, n, me, SMALL, torch.float8_e4m3fn, 1)
    try:
        assert ata.get_num_sms() == share
        with pytest.raises(symm.InvalidArgumentError, match="num_sms -1 is not in 0..%d" % share):
            ata.set_num_sms(-1)
        with pytest.raises(symm.InvalidArgumentError, match="symm_sm_share"):
            ata.set_num_sms(share + 1)
        with pytest.raises(TypeError, match="must be an int"):
            ata.set_num_sms(2.0)
        for i, b in enumerate((1, 2, 8, 24, 0)):
            want = b or share
            if want > share:
                continue
            if b > 1 and me % 2:
                b, want = b - 1, want - 1
            ata.set_num_sms(b)
            assert ata.get_num_sms() == want
            ata.launched_blocks()
            for it in range(2):
                groups = make_groups(300 + 10 * i + it, n, device, SMALL["max_tokens"], SMALL["experts"],
                                     SMALL["topk"], SMALL["hidden"], torch.float8_e4m3fn, bound=True)
                run_round(moe, ata, groups, me, device, torch.float8_e4m3fn, torch.bfloat16, torch.bfloat16, 1,
                          SMALL, split=it == 1)
            got = ata.launched_blocks()
            assert 1 <= got <= want, "budget %d: a kernel ran %d blocks" % (want, got)
            symm.barrier()
    finally:
        ata.destroy()
    if HT["experts"] % n:
        return
    ht = moe.HighThroughput(HT["experts"], HT["topk"], 1024, 512, x_dtype=torch.bfloat16)
    try:
        L = ht.local_experts
        for i, b in enumerate((1, 2, 24, 0)):
            want = b or share
            if want > share:
                continue
            ht.set_num_sms(b)
            ht.launched_blocks()
            gen = torch.Generator(device=device)
            gen.manual_seed(7000 + i * n + me)
            m = 512 - 37 * me
            idx = torch.rand((m, HT["experts"]), generator=gen, device=device).argsort(dim=1)[:, :HT["topk"]]
            x = torch.randn((m, 1024), generator=gen, device=device).to(torch.bfloat16)
            rx, _, ridx, rw, rsrc, nrecv, nper = ht.dispatch(x, idx, None, do_send=True, do_recv=(i % 2 == 0))
            if i % 2:
                ht.dispatch(x, idx, None, do_send=False, do_recv=True)
            y = rx.clone()
            out = ht.combine(y)
            torch.cuda.synchronize()
            on = torch.stack([((torch.div(idx, L, rounding_mode="floor") == r)).any(dim=1) for r in range(n)], 1)
            ref = (x.float() * on.sum(dim=1, keepdim=True)).to(torch.bfloat16)
            assert_combined(out, ref, torch.bfloat16, "high throughput, budget %d" % want)
            got = ht.launched_blocks()
            assert 1 <= got <= want, "budget %d: a high-throughput kernel ran %d blocks" % (want, got)
            ht.check()
            symm.barrier()
    finally:
        ht.destroy()


# ---------------------------------------------------------------------------
# High throughput
# ---------------------------------------------------------------------------

HT = {"experts": 256, "topk": 8, "hidden": 7168, "tokens": 4096}


def ht_data(seed, p, device, m, cfg, drop=True):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed * 131 + p)
    E, K, H = cfg["experts"], cfg["topk"], cfg["hidden"]
    idx = torch.rand((m, E), generator=gen, device=device).argsort(dim=1)[:, :K].to(torch.int64).contiguous()
    if drop:
        idx[::13, -1] = -1  # masked slots, as DeepEP's top-k gives them
    w = torch.rand((m, K), generator=gen, device=device)
    x = ((torch.rand((m, H), generator=gen, device=device) - 0.5) * 400).to(torch.float8_e4m3fn)
    s = torch.rand((m, (H + 127) // 128), generator=gen, device=device)
    return x, s, idx, w


def ht_wsum(idx, w, L, r):
    on = (idx >= 0) & (torch.div(idx, L, rounding_mode="floor") == r)
    return (torch.where(on, w * expert_scale(idx.clamp(min=0)), torch.zeros_like(w))).sum(dim=1), on.any(dim=1)


@pytest.mark.parametrize("split", [False, True])
def test_high_throughput(env, split):
    moe, me, n, device = env
    if HT["experts"] % n:
        pytest.skip("256 experts do not split over %d PEs" % n)
    cfg, H, K = HT, HT["hidden"], HT["topk"]
    ht = moe.HighThroughput(cfg["experts"], K, H, cfg["tokens"], x_dtype=torch.float8_e4m3fn, scales=True)
    try:
        L, first = ht.local_experts, ht.first_expert
        for it in range(2):
            ms = [cfg["tokens"] - (0 if it == 0 else 97 * p) for p in range(n)]
            if it == 1 and n > 1:
                ms[n - 1] = 0  # a PE with no tokens
            data = [ht_data(40 + it, p, device, ms[p], cfg) for p in range(n)]
            x, s, idx, w = data[me]
            per_rank, per_expert, in_rank = ht.get_dispatch_layout(idx)
            dest = torch.div(idx, L, rounding_mode="floor")
            want_in = torch.stack([((dest == r) & (idx >= 0)).any(dim=1) for r in range(n)], dim=1)
            assert torch.equal(in_rank, want_in), "layout: is_token_in_rank"
            assert torch.equal(per_rank.long(), want_in.sum(dim=0)), "layout: tokens per rank"
            assert torch.equal(per_expert.long(), torch.bincount(idx[idx >= 0], minlength=cfg["experts"])), \
                "layout: tokens per expert"
            rx, rs, ridx, rw, rsrc, nrecv, nper = ht.dispatch(x, idx, w, x_scale=s, do_send=True,
                                                              do_recv=not split)
            if split:
                a = torch.randn((512, 512), device=device)
                a = a @ a
                ht.dispatch(x, idx, w, x_scale=s, do_send=False, do_recv=True)
            # the expert computation: bf16(x * sum over local slots of w * scale)
            ws = (torch.where(ridx >= 0, rw * expert_scale((ridx + first).clamp(min=0)), torch.zeros_like(rw))
                  ).sum(dim=1)
            y = (rx.to(torch.bfloat16).float() * ws.unsqueeze(1)).to(torch.bfloat16)
            # call 1: with the side channel, every column but the last of the received weights (a strided
            # view), scaled by 2^(11 (PE % 3)) so that the sum's bits depend on its order
            wv = (rw * float(1 << (11 * (me % 3))))[:, :K - 1] if it == 1 else None
            got_w = ht.combine(y, do_send=True, do_recv=not split, weights=wv)
            out, cw = got_w if wv is not None else (got_w, None)
            if split:
                ht.combine(y, out=out, do_send=False, do_recv=True, weights=wv, out_weights=cw)
            torch.cuda.synchronize()
            # every received row, in order (source PE, then token)
            wx, ws_, wi, ww, wsrc = [], [], [], [], []
            for p in range(n):
                px, ps, pi, pw = data[p]
                sel = ((torch.div(pi, L, rounding_mode="floor") == me) & (pi >= 0)).any(dim=1)
                t = sel.nonzero().flatten()
                wx.append(px[t]), ws_.append(ps[t]), ww.append(pw[t])
                loc = torch.where((torch.div(pi[t], L, rounding_mode="floor") == me) & (pi[t] >= 0), pi[t] - first,
                                  torch.full_like(pi[t], -1))
                wi.append(loc.to(torch.int32))
                wsrc.append(torch.stack([torch.full_like(t, p), t], dim=1).to(torch.int32))
            got = int(nrecv.item())
            want_n = sum(v.size(0) for v in wx)
            what = "high throughput call %d" % it
            assert got == want_n, "%s: received %d rows, expected %d" % (what, got, want_n)
            assert torch.equal(rx[:got].view(torch.uint8), torch.cat(wx).view(torch.uint8)), "%s: rows" % what
            assert torch.equal(rs[:got], torch.cat(ws_)), "%s: scales" % what
            assert torch.equal(ridx[:got], torch.cat(wi)), "%s: mapped indices" % what
            assert torch.equal(rw[:got], torch.cat(ww)), "%s: weights" % what
            assert torch.equal(rsrc[:got], torch.cat(wsrc)), "%s: sources" % what
            allidx = torch.cat([d[2] for d in data])
            mine = allidx[(allidx >= 0) & (torch.div(allidx, L, rounding_mode="floor") == me)] - first
            assert torch.equal(nper.long(), torch.bincount(mine, minlength=L)), "%s: tokens per expert" % what
            # combine: the sum over PEs of what each returned
            ref = torch.zeros((ms[me], H), device=device)
            for r in range(n):
                wr, on = ht_wsum(idx, w, L, r)
                part = (x.to(torch.bfloat16).float() * wr.unsqueeze(1)).to(torch.bfloat16).float()
                ref += torch.where(on.unsqueeze(1), part, torch.zeros_like(part))
            assert out.shape == (ms[me], H)
            assert_combined(out, ref.to(torch.bfloat16), torch.bfloat16, what)
            if cw is not None:  # the PEs' values in PE order, added in float32 from 0
                wref = torch.zeros((ms[me], K - 1), device=device)
                for r in range(n):
                    _, on = ht_wsum(idx, w, L, r)
                    part = w[:, :K - 1] * float(1 << (11 * (r % 3)))
                    wref = wref + torch.where(on.unsqueeze(1), part, torch.zeros_like(part))
                assert cw.shape == (ms[me], K - 1) and cw.dtype == torch.float32
                assert torch.equal(cw, wref), "%s: combined weights (%d differ)" % (what, int((cw != wref).sum()))
            ht.check()
            symm.barrier()
    finally:
        ht.destroy()
