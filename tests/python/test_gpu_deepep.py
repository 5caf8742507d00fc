"""symm.moe.deep_ep (DeepEP's Buffer over symm) on GPUs, one process per
rank (PEs may share a GPU; more than two per GPU need MPS, see conftest):

    torchrun --nproc-per-node N -m pytest -q tests/python/test_gpu_deepep.py

The cases are deepep_cases.py's, which the CPU run (test_moe_deepep.py) also
runs over a stand-in for symm: every tensor each call returns is compared with
a torch reference every rank builds from every rank's seeded data. Normal mode:
bf16 and fp8 (+ scales), with and without top-k, cached handles,
num_worst_tokens, expert alignment, bias, combined top-k weights, a rank with
no tokens and a rank that receives nothing, async_finish with events,
previous_event; two dispatches in flight, a handle combined twice, the token
bound growing. Low latency: bf16 and fp8, round_scale, UE8M0 scales, with and
without the receive hook, async_finish, zero-copy combine, two in flight. CUDA
graphs: num_worst_tokens dispatch + combine and low-latency dispatch + combine
captured and replayed with fresh data. Bad inputs raise on every rank. The
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


def test_in_flight(ctx):
    cases.case_in_flight(ctx)


@pytest.mark.parametrize("fp8", [False, True])
def test_recv_buffers(ctx, fp8):
    cases.case_recv_buffers(ctx, fp8)


@pytest.mark.parametrize("use_fp8", [False, True])
@pytest.mark.parametrize("hook", [False, True])
def test_low_latency(ctx, use_fp8, hook):
    cases.case_low_latency(ctx, use_fp8, hook)


def test_errors(ctx):
    cases.case_errors(ctx, pytest.raises)


def test_graphs(ctx):
    cases.case_graphs(ctx)


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
