"""symm tensors, peer tensors, frees and the stream collectives on GPUs.

Run: torchrun --nproc-per-node N -m pytest tests/python  (N = 1, 2, 4...).
Every PE runs every test in the same order (they are collective); fresh
random data each iteration, sizes that are not multiples of 16 bytes, views
with offsets. References come from the data's seeds (torch on the host).
"""
import pytest

import symm
from gpu_util import rand

pytestmark = pytest.mark.gpu

DTYPES = ["float32", "bfloat16", "float16", "int64", "int32", "uint8"]
SIZES = [1, 7, 1000, 4099, 1 << 16]


def test_tensor_basics(pe):
    torch = pe.torch
    for name in DTYPES:
        dtype = getattr(torch, name)
        for n in SIZES:
            t = symm.tensor((n,), dtype)
            assert t.shape == (n,) and t.dtype == dtype and t.device == pe.device
            assert symm.is_symmetric(t) and symm.is_symmetric(t[1:])
            symm.free_tensor(t)
            assert t.numel() == 0 and not symm.is_symmetric(t)
    z = symm.zeros((3, 5, 7), torch.float16)
    assert z.shape == (3, 5, 7) and bool((z == 0).all())
    e = symm.tensor((0, 4), torch.float32)
    assert e.numel() == 0
    symm.free_tensor(e)
    symm.free_tensor(z)


def test_gpu_sharing_is_seen(pe):
    torch = pe.torch
    import torch.distributed as dist
    bus = str(torch.cuda.get_device_properties(pe.device).uuid)
    buses = [None] * pe.world
    dist.all_gather_object(buses, bus)
    assert symm.gpu_pes() == buses.count(bus)
    share = symm.sm_share()
    sms = torch.cuda.get_device_properties(pe.device).multi_processor_count
    assert 1 <= share <= sms // symm.gpu_pes()
    shares = [None] * pe.world
    dist.all_gather_object(shares, share)
    assert shares == [share] * pe.world


def test_peer_tensors_see_every_pe(pe):
    torch = pe.torch
    for it in range(3):
        seed = pe.next_seed()
        for name in ("float32", "bfloat16", "int64", "uint8"):
            dtype = getattr(torch, name)
            n = 4099 + it
            t = symm.tensor((n,), dtype)
            t.copy_(rand(torch, (n,), dtype, seed + pe.rank))
            symm.barrier()
            for q in range(pe.world):
                peer = symm.get_peer_tensor(t, q)
                assert peer.device == pe.device and peer.shape == t.shape
                want = rand(torch, (n,), dtype, seed + q).to(pe.device)
                assert torch.equal(peer, want), "PE %d's copy differs (dtype %s)" % (q, name)
            # a strided view with an offset maps to the same view on the peer
            view = t[3::5]
            nxt = (pe.rank + 1) % pe.world
            pv = symm.get_peer_tensor(view, nxt)
            want = rand(torch, (n,), dtype, seed + nxt)[3::5].to(pe.device)
            assert pv.stride() == view.stride() and torch.equal(pv, want)
            symm.barrier()
            symm.free_tensor(t)
            assert pv.numel() == 0  # peer tensors are emptied with the memory


def test_store_into_next_pe(pe):
    torch = pe.torch
    n = 1000 * 1000 + 3
    dst = symm.zeros((n,), torch.float32)
    src = torch.empty((n,), dtype=torch.float32, device=pe.device)
    for _ in range(3):
        seed = pe.next_seed()
        src.copy_(rand(torch, (n,), torch.float32, seed + pe.rank))
        nxt = (pe.rank + 1) % pe.world
        prv = (pe.rank - 1) % pe.world
        symm.barrier()  # nobody still reads dst from the last round
        symm.get_peer_tensor(dst, nxt).copy_(src)  # NVLink stores, on the current stream
        symm.barrier_on_stream()                   # stream-ordered, no host wait
        got = dst.clone()                          # queued after the barrier
        want = rand(torch, (n,), torch.float32, seed + prv).to(pe.device)
        assert torch.equal(got, want)
    symm.barrier()
    symm.free_tensor(dst)


def test_scope_and_finalize_free(pe):
    torch = pe.torch
    with symm.scope():
        a = symm.tensor((100,), torch.float32)
        b = symm.tensor((7,), torch.int32)
        symm.free_tensor(b)
    assert a.numel() == 0 and b.numel() == 0
    keep = symm.tensor((64,), torch.float32)
    peer = symm.get_peer_tensor(keep, (pe.rank + 1) % pe.world)
    mapped_before = symm.heap_info()[0]
    symm.finalize()              # frees what is still alive...
    assert keep.numel() == 0 and peer.numel() == 0
    # ...and symm starts again, this time with a unique id broadcast over the
    # torch.distributed group instead of the launcher's environment
    import torch.distributed as dist
    symm.init(group=dist.group.WORLD)
    assert symm.heap_info()[0] <= mapped_before
    assert symm.my_pe() == pe.rank and symm.n_pes() == pe.world


def test_tensor_failing_on_one_pe_fails_on_every_pe(pe, monkeypatch):
    """symm.tensor() allocates (collective), then wraps the memory locally: a
    wrap that fails on the last PE only must free the memory on every PE
    (a free there alone would be a collective nobody joins) and raise on
    every PE; the next tensor() works."""
    torch = pe.torch
    from symm import _tensor
    real = _tensor._wrap
    if pe.rank == pe.world - 1:
        def broken(*a, **k):
            raise RuntimeError("test: wrapping failed here")
        monkeypatch.setattr(_tensor, "_wrap", broken)
    live = len(symm._runtime._allocs)
    with pytest.raises((RuntimeError, symm.SymmError)) as info:
        symm.tensor((1000,), torch.float32)
    if pe.rank != pe.world - 1:
        assert "PE(s) %d" % (pe.world - 1) in str(info.value)
    assert len(symm._runtime._allocs) == live
    monkeypatch.setattr(_tensor, "_wrap", real)
    t = symm.tensor((1000,), torch.float32)
    symm.barrier()
    symm.free_tensor(t)


def test_wrong_arguments_raise_before_anything_runs(pe):
    torch = pe.torch
    with pytest.raises(ValueError):
        symm.tensor((-1,), torch.float32)
    with pytest.raises(TypeError):
        symm.tensor((4,), "float32")
    with pytest.raises(TypeError):
        symm.tensor((4,), torch.complex64)
    plain = torch.zeros(16, device=pe.device)
    with pytest.raises(ValueError, match="not in symmetric memory"):
        symm.get_peer_tensor(plain, 0)
    with pytest.raises(ValueError, match="not in symmetric memory"):
        symm.free_tensor(plain)
    t = symm.tensor((16,), torch.float32)
    with pytest.raises(ValueError, match="outside"):
        symm.get_peer_tensor(t, pe.world)
    with pytest.raises(symm.UnsupportedError, match="multicast"):
        symm.get_multicast_tensor(t)
    cpu = torch.zeros(16)
    with pytest.raises(ValueError, match="cuda"):
        symm.all_reduce(cpu)
    with pytest.raises(ValueError, match="contiguous"):
        symm.all_reduce(t[::2])
    with pytest.raises(TypeError, match="needs an integer dtype"):
        symm.all_reduce(t, op="bxor")
    with pytest.raises(ValueError, match="op"):
        symm.all_reduce(t, op="mean")
    with pytest.raises(ValueError, match="n_pes"):
        symm.all_gather(t, t[:15])
    with pytest.raises(TypeError, match="must match"):
        symm.all_gather(torch.zeros(16 * pe.world, dtype=torch.float16, device=pe.device), t)
    with pytest.raises(ValueError, match="root"):
        symm.broadcast(t, pe.world)
    symm.free_tensor(t)


def _inputs(pe, shape, dtype, seed):
    """Every PE's input under `seed` (PE p's is rand(seed + p)), on the CPU."""
    return [rand(pe.torch, shape, dtype, seed + p) for p in range(pe.world)]


def _reduce(torch, parts, op):
    """The reduction of the PEs' parts, accumulated in float64 for floats
    (the tests compare floats with a tolerance, integers exactly)."""
    if parts[0].dtype.is_floating_point:
        stack = torch.stack([p.double() for p in parts])
    else:
        stack = torch.stack(parts)
    red = {"sum": lambda t: t.sum(0), "min": lambda t: t.min(0).values,
           "max": lambda t: t.max(0).values}[op](stack)
    return red.to(parts[0].dtype)


def _assert_reduced(pe, got, want, dtype):
    torch = pe.torch
    want = want.to(got.device)
    if dtype.is_floating_point:
        tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * pe.world)
    else:
        assert torch.equal(got, want)


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "plain"])
def test_stream_collectives_match_torch(pe, symmetric):
    """Every stream collective against a reference rebuilt with torch from
    every PE's seeded input (no NCCL: it refuses PEs that share a GPU)."""
    torch = pe.torch
    make = (lambda shape, dtype: symm.zeros(shape, dtype)) if symmetric else \
        (lambda shape, dtype: torch.zeros(shape, dtype=dtype, device=pe.device))
    made = []
    w, r = pe.world, pe.rank

    def buf(shape, dtype):
        t = make(shape, dtype)
        made.append(t)
        return t

    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for n in (7, 4099, 1 << 18):
            seed = pe.next_seed()
            xs = _inputs(pe, (n,), dtype, seed)
            x = buf((n,), dtype)
            x.copy_(xs[r])
            for op, algo in (("sum", "auto"), ("max", "auto"), ("sum", "push")):
                out = buf((n,), dtype)
                symm.all_reduce(x, op, out=out, algo=algo)
                _assert_reduced(pe, out, _reduce(torch, xs, op), dtype)
            # all_gather
            g = buf((w * n,), dtype)
            symm.all_gather(g, x)
            assert torch.equal(g.cpu(), torch.cat(xs))
            # reduce_scatter (exact for integers; floats with a tolerance)
            bigs = _inputs(pe, (w * n,), dtype, seed + 100)
            big = buf((w * n,), dtype)
            big.copy_(bigs[r])
            want = _reduce(torch, [b[r * n:(r + 1) * n] for b in bigs], "sum")
            for algo in ("auto", "push"):
                rs = buf((n,), dtype)
                symm.reduce_scatter(rs, big, algo=algo)
                _assert_reduced(pe, rs, want, dtype)
            # all_to_all: block p of PE p's input lands at block p here
            a2a = buf((w * n,), dtype)
            symm.all_to_all(a2a, big)
            assert torch.equal(a2a.cpu(), torch.cat([b[r * n:(r + 1) * n] for b in bigs]))
            # broadcast from the last PE, in place
            root = w - 1
            b = buf((n,), dtype)
            b.copy_(x)
            symm.broadcast(b, root)
            assert torch.equal(b.cpu(), xs[root])
    # all_to_allv with uneven splits: PE q sends q + p + 1 rows of 3 to PE p
    send_sizes = [r + p + 1 for p in range(w)]
    recv_sizes = [p + r + 1 for p in range(w)]
    seed = pe.next_seed()
    ins = [rand(torch, (sum(q + p + 1 for p in range(w)), 3), torch.float32, seed + q) for q in range(w)]
    # A symmetric allocation has the same size on every PE: take the largest
    # row count any PE needs (PE w-1 sends and receives the most) and slice.
    most = w * (w - 1) + w * (w + 1) // 2
    inp = buf((most, 3), torch.float32)[:sum(send_sizes)]
    inp.copy_(ins[r])
    out = buf((most, 3), torch.float32)[:sum(recv_sizes)]
    symm.all_to_allv(out, inp, recv_sizes, send_sizes)
    want = torch.cat([ins[q][sum(q + p + 1 for p in range(r)):][:q + r + 1] for q in range(w)])
    assert torch.equal(out.cpu(), want)
    torch.cuda.synchronize()
    symm.barrier()
    if symmetric:
        for t in reversed(made):
            symm.free_tensor(t)


def test_collectives_back_to_back_and_in_graphs(pe):
    torch = pe.torch
    n = 4099
    x = symm.tensor((n,), torch.float32)
    out = symm.tensor((n,), torch.float32)
    for i in range(2000):
        x.fill_(float(pe.rank + i))
        symm.all_reduce(x, out=out)
    want = sum(float(p + 1999) for p in range(pe.world))
    assert bool((out == want).all())
    # CUDA graph capture of a collective, replayed with fresh data
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        symm.all_reduce(x, out=out)  # warm-up outside capture (allocates staging)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        symm.all_reduce(x, out=out)
    for it in range(5):
        seed = pe.next_seed()
        x.copy_(rand(torch, (n,), torch.float32, seed + pe.rank))
        g.replay()
        want = sum(rand(torch, (n,), torch.float32, seed + p) for p in range(pe.world)).to(pe.device)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5 * pe.world)
    torch.cuda.synchronize()
    symm.barrier()
    symm.free_tensor(out)
    symm.free_tensor(x)
