"""Every symm.triton function in a real Triton kernel, on GPUs, against a
reference rebuilt from the data's seeds (or NCCL).

Run: torchrun --nproc-per-node N -m pytest tests/python  (N = 1, 2, 4...).
The kernels are in gpu_kernels.py. Data is fresh each iteration; byte
counts are not multiples of 16 and offsets are unaligned. Each test makes all
its collective calls before it asserts, so one PE's failure does not leave the
others waiting.
"""
import pytest

import symm
import symm.triton as st
from gpu_util import rand, storage_dtype, to_signed

pytestmark = pytest.mark.gpu

RMA = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"]
LDST = ["i32", "i64", "u32", "u64", "f32", "f64"]
AMO = ["i32", "i64", "u32", "u64"]
BITS = {"i32": 32, "u32": 32, "i64": 64, "u64": 64}
NT = 128  # threads of a program with the default num_warps=4


@pytest.fixture(scope="module")
def K(pe):
    import gpu_kernels
    return gpu_kernels


def ring(pe):
    return (pe.rank + 1) % pe.world, (pe.rank - 1) % pe.world


def sync():
    import torch
    torch.cuda.synchronize()
    symm.barrier()


def launch(kernel, grid, *args, **kw):
    st.launch(kernel, grid, *args, **kw)


def test_ctx(pe, K):
    torch = pe.torch
    out = torch.zeros(2, dtype=torch.int32, device=pe.device)
    buf = symm.zeros((64,), torch.float32)
    addr = torch.zeros(1, dtype=torch.int64, device=pe.device)
    launch(K.k_ctx, (1,), symm.ctx(), out, buf, addr)
    sync()
    nxt, _ = ring(pe)
    assert out.tolist() == [pe.rank, pe.world]
    assert addr.item() == symm.peer_ptr(buf.data_ptr(), nxt)
    symm.free_tensor(buf)


@pytest.mark.parametrize("t", RMA)
def test_p_and_g(pe, K, t):
    torch = pe.torch
    dt = storage_dtype(torch, t)
    n = 1024
    nxt, prv = ring(pe)
    dest = symm.zeros((n,), dt)
    src = symm.zeros((n,), dt)
    for _ in range(2):
        seed = pe.next_seed()
        mine = rand(torch, (n,), dt, seed + pe.rank).to(pe.device)
        src.copy_(mine)
        sync()
        launch(K.k_p, (37,), symm.ctx(), dest, mine, nxt, FN=getattr(st, "p_" + t))
        out = torch.zeros(n, dtype=dt, device=pe.device)
        launch(K.k_g, (n // 128,), symm.ctx(), src, out, nxt, FN=getattr(st, "g_" + t), BLOCK=128)
        out1 = torch.zeros(5, dtype=dt, device=pe.device)
        launch(K.k_g_scalar, (5,), symm.ctx(), src, out1, nxt, FN=getattr(st, "g_" + t))
        sync()
        want_p = rand(torch, (n,), dt, seed + prv)[:37]
        want_g = rand(torch, (n,), dt, seed + nxt)
        assert torch.equal(dest[:37].cpu(), want_p), "p_%s" % t
        assert torch.equal(out.cpu(), want_g), "g_%s" % t
        assert torch.equal(out1.cpu(), want_g[:5]), "g_%s (scalar)" % t
    sync()
    symm.free_tensor(src)
    symm.free_tensor(dest)


QUIETS = {"thread0": "quiet", "warp": "quiet_warp", "block": "quiet_block"}


@pytest.mark.parametrize("name", ["put", "put_nbi", "put_warp", "put_warp_nbi", "put_block",
                                  "put_block_nbi", "get", "get_nbi", "get_warp", "get_warp_nbi",
                                  "get_block", "get_block_nbi"])
def test_put_get(pe, K, name):
    torch = pe.torch
    size = 20000
    nxt, prv = ring(pe)
    sym_src = symm.zeros((size,), torch.uint8)
    sym_dst = symm.zeros((size,), torch.uint8)
    quiet = getattr(st, QUIETS[st.MODES[name]]) if name.endswith("_nbi") else None
    fn = getattr(st, name)
    for nbytes in (1, 15, 1007, 16381):
        seed = pe.next_seed()
        mine = rand(torch, (size,), torch.uint8, seed + pe.rank).to(pe.device)
        sym_src.copy_(mine)
        sym_dst.zero_()
        local = torch.zeros(size, dtype=torch.uint8, device=pe.device)
        sync()
        if name.startswith("put"):   # my bytes [5:] -> next PE's dst [3:]
            launch(K.k_copy, (1,), symm.ctx(), sym_dst[3:], mine[5:], nbytes, nxt, FN=fn, QUIET=quiet)
        else:                        # next PE's src [5:] -> my local [3:]
            launch(K.k_copy, (1,), symm.ctx(), local[3:], sym_src[5:], nbytes, nxt, FN=fn, QUIET=quiet)
        sync()
        if name.startswith("put"):
            got, src_pe = sym_dst, prv
        else:
            got, src_pe = local, nxt
        want = rand(torch, (size,), torch.uint8, seed + src_pe)[5:5 + nbytes]
        assert torch.equal(got[3:3 + nbytes].cpu(), want), "%s of %d bytes" % (name, nbytes)
        assert int(got[:3].sum()) == 0 and int(got[3 + nbytes:].sum()) == 0, "%s wrote outside" % name
    sync()
    symm.free_tensor(sym_dst)
    symm.free_tensor(sym_src)


@pytest.mark.parametrize("name", ["put_signal", "put_signal_nbi", "put_signal_warp",
                                  "put_signal_warp_nbi", "put_signal_block", "put_signal_block_nbi"])
@pytest.mark.parametrize("op", ["set", "add"])
def test_put_signal(pe, K, name, op):
    torch = pe.torch
    size = 40000
    nxt, prv = ring(pe)
    dst = symm.zeros((size,), torch.uint8)
    sig = symm.zeros((1,), torch.int64)
    for it, nbytes in enumerate((3, 1021, 33333)):
        seed = pe.next_seed()
        mine = rand(torch, (size,), torch.uint8, seed + pe.rank).to(pe.device)
        sig.zero_()
        sync()
        value = 7 + it
        recv = torch.zeros(size, dtype=torch.uint8, device=pe.device)
        out = torch.zeros(1, dtype=torch.int64, device=pe.device)
        launch(K.k_put_signal, (1,), symm.ctx(), dst[1:], mine[3:], nbytes, sig, value,
               st.SIGNAL_SET.value if op == "set" else st.SIGNAL_ADD.value, value, recv, out, nxt,
               FN=getattr(st, name), BLOCK=1024)
        sync()
        want = rand(torch, (size,), torch.uint8, seed + prv)[3:3 + nbytes]
        assert out.item() == value and sig.item() == value
        assert torch.equal(recv[:nbytes].cpu(), want), "%s %s: data read after the signal" % (name, op)
    sync()
    symm.free_tensor(sig)
    symm.free_tensor(dst)


def test_signal_op_fetch_wait(pe, K):
    torch = pe.torch
    sig_add = symm.zeros((1,), torch.int64)
    sig_set = symm.zeros((1,), torch.int64)
    _, prv = ring(pe)
    for _ in range(3):
        seed = pe.next_seed()
        sig_add.zero_()
        sig_set.zero_()
        sync()
        target = pe.world * (pe.world + 1) // 2
        base = 1000 + seed % 1000
        out = torch.zeros(3, dtype=torch.int64, device=pe.device)
        launch(K.k_signals, (1,), symm.ctx(), sig_add, sig_set, target, base, out)
        sync()
        assert out.tolist() == [target, base + prv, target]


@pytest.mark.parametrize("t", AMO)
def test_wait_until(pe, K, t):
    torch = pe.torch
    dt = storage_dtype(torch, t)
    ivar = symm.zeros((1,), dt)
    _, prv = ring(pe)
    for _ in range(3):
        value = 100 + pe.next_seed() % 100000
        out = torch.zeros(1, dtype=dt, device=pe.device)
        sync()
        launch(K.k_wait_until, (1,), symm.ctx(), ivar, value, out, STORE=getattr(st, "st_" + t),
               WAIT=getattr(st, "wait_until_" + t))
        sync()
        assert out.item() == value + prv and ivar.item() == value + prv
    symm.free_tensor(ivar)


@pytest.mark.parametrize("t", LDST)
def test_ld_st_every_ordering(pe, K, t):
    torch = pe.torch
    dt = storage_dtype(torch, t)
    nxt, prv = ring(pe)
    buf = symm.zeros((12,), dt)
    seed = pe.next_seed()
    mine = rand(torch, (12,), dt, seed + pe.rank).to(pe.device)
    sync()
    launch(K.k_st_all, (1,), symm.ctx(), buf, mine, nxt, FN=getattr(st, "st_" + t))
    sync()
    assert torch.equal(buf.cpu(), rand(torch, (12,), dt, seed + prv)), "st_%s" % t
    out = torch.zeros(12, dtype=dt, device=pe.device)
    launch(K.k_ld_all, (1,), symm.ctx(), buf, out, nxt, FN=getattr(st, "ld_" + t))
    sync()
    # next PE's buffer holds what I stored there
    assert torch.equal(out.cpu(), mine.cpu()), "ld_%s" % t
    symm.free_tensor(buf)


def _gather_ints(pe, t):
    """Every PE's t (small), gathered on the host (gloo carries CPU tensors)."""
    import torch.distributed as dist
    host = t.cpu()
    out = [pe.torch.empty_like(host) for _ in range(pe.world)]
    dist.all_gather(out, host)
    return pe.torch.cat(out).to(t.device)


@pytest.mark.parametrize("t", AMO)
def test_atomics(pe, K, t):
    torch = pe.torch
    dt = storage_dtype(torch, t)
    bits = BITS[t]
    G = 64
    target = symm.zeros((1,), dt)
    nxt, prv = ring(pe)

    def fn(op):
        return getattr(st, "atomic_%s_%s" % (op, t))

    def reset(v):
        target.fill_(to_signed(v, bits))
        sync()

    results = {}
    # counters on PE 0: fetch_add / fetch_inc return unique tickets, the same in every thread
    for op, kern in (("fetch_add", "k_fetch_op"), ("fetch_inc", "k_fetch_inc")):
        reset(0)
        outs = torch.zeros((G, NT), dtype=dt, device=pe.device)
        if op == "fetch_add":
            launch(K.k_fetch_op, (G,), symm.ctx(), target, 1, 0, outs, FN=fn(op), NT=NT, PER_PROGRAM=False)
        else:
            launch(K.k_fetch_inc, (G,), symm.ctx(), target, 0, outs, FN=fn(op), NT=NT)
        sync()
        results[op] = (target.item(), _gather_ints(pe, outs))
    # add / inc: a count
    for op in ("add", "inc"):
        reset(0)
        if op == "add":
            launch(K.k_op, (G,), symm.ctx(), target, 3, 0, FN=fn(op))
        else:
            launch(K.k_inc, (G,), symm.ctx(), target, 0, FN=fn(op))
        sync()
        results[op] = target.item()
    # swap: every program swaps in its own value; the old values and the last form a chain
    reset(-1)
    outs = torch.zeros((G, NT), dtype=dt, device=pe.device)
    launch(K.k_fetch_op, (G,), symm.ctx(), target, pe.rank * G + 1, 0, outs, FN=fn("swap"), NT=NT,
           PER_PROGRAM=True)
    sync()
    results["swap"] = (target.item(), _gather_ints(pe, outs))
    # compare_swap: exactly one program of all PEs wins the lock
    reset(0)
    cas_out = torch.zeros(G, dtype=dt, device=pe.device)
    launch(K.k_cas, (G,), symm.ctx(), target, 0, pe.rank + 1, 0, cas_out, FN=fn("compare_swap"))
    sync()
    results["cas"] = (target.item(), _gather_ints(pe, cas_out))
    # bitwise ops on PE 0, one program per PE: bit `rank`
    bit = 1 << pe.rank
    for op, init in (("or", 0), ("fetch_or", 0), ("xor", 0), ("fetch_xor", 0),
                     ("and", -1), ("fetch_and", -1)):
        reset(init)
        v = to_signed(~bit, bits) if op.endswith("and") else bit
        if op.startswith("fetch_"):
            outs = torch.zeros((1, NT), dtype=dt, device=pe.device)
            launch(K.k_fetch_op, (1,), symm.ctx(), target, v, 0, outs, FN=fn(op), NT=NT, PER_PROGRAM=False)
        else:
            launch(K.k_op, (1,), symm.ctx(), target, v, 0, FN=fn(op))
        sync()
        results[op] = target.item()
    # set on the next PE, fetch from the next PE
    launch(K.k_op, (1,), symm.ctx(), target, 5000 + pe.rank, nxt, FN=fn("set"))
    sync()
    results["set"] = target.item()
    fetched = torch.zeros(1, dtype=dt, device=pe.device)
    launch(K.k_fetch, (1,), symm.ctx(), target, nxt, fetched, FN=getattr(st, "atomic_fetch_" + t))
    sync()
    results["fetch"] = fetched.item()
    symm.free_tensor(target)

    total = G * pe.world
    all_bits = (1 << pe.world) - 1
    for op in ("fetch_add", "fetch_inc"):
        final, tickets = results[op]
        if pe.rank == 0:
            assert final == total, op
        assert bool((tickets == tickets[:, :1]).all()), "%s: threads of a program got different results" % op
        assert sorted(tickets[:, 0].tolist()) == list(range(total)), op
    if pe.rank == 0:
        assert results["add"] == 3 * total and results["inc"] == total
        assert results["or"] == all_bits and results["fetch_or"] == all_bits
        assert results["xor"] == all_bits and results["fetch_xor"] == all_bits
        assert results["and"] == to_signed(~all_bits, bits) and results["fetch_and"] == to_signed(~all_bits, bits)
    final, olds = results["swap"]
    olds = olds[:, 0].tolist()
    if pe.rank == 0:
        values = [p * G + 1 + i for p in range(pe.world) for i in range(G)]
        assert sorted(olds + [final]) == sorted(values + [-1]), "swap"
    final, olds = results["cas"]
    olds = olds.tolist()
    assert olds.count(0) == 1, "compare_swap: %d winners" % olds.count(0)
    if pe.rank == 0:
        assert all(o == final for o in olds if o != 0) and 1 <= final <= pe.world
    assert results["set"] == 5000 + prv
    assert results["fetch"] == 5000 + pe.rank


@pytest.mark.parametrize("order", ["fence", "fence_warp", "fence_block", "quiet", "quiet_warp",
                                   "quiet_block"])
def test_fence_quiet_order_data_before_flag(pe, K, order):
    torch = pe.torch
    n = 200
    nxt, prv = ring(pe)
    data = symm.zeros((n,), torch.int32)
    flag = symm.zeros((1,), torch.int32)
    for _ in range(3):
        seed = pe.next_seed()
        mine = rand(torch, (n,), torch.int32, seed + pe.rank).to(pe.device)
        data.zero_()
        flag.zero_()
        sync()
        out = torch.zeros(n, dtype=torch.int32, device=pe.device)
        launch(K.k_ordered_p, (1,), symm.ctx(), data, flag, mine, n, nxt, ORDER=getattr(st, order))
        launch(K.k_await_flag, (1,), symm.ctx(), data, flag, out, n, BLOCK=256)
        sync()
        assert torch.equal(out.cpu(), rand(torch, (n,), torch.int32, seed + prv)), order


@pytest.mark.parametrize("name", ["barrier", "barrier_warp", "barrier_block", "sync_block",
                                  "coll_barrier_block"])
def test_device_barriers(pe, K, name):
    torch = pe.torch
    slots = symm.zeros((2 * NT,), torch.int32)
    out = torch.ones(NT, dtype=torch.int32, device=pe.device)
    nxt, _ = ring(pe)
    reach = symm.peer_ptr(slots.data_ptr(), nxt)
    if not reach and name == "coll_barrier_block":
        symm.free_tensor(slots)
        pytest.skip("device collectives need every PE in the load/store window (symm_ptr is NULL here); "
                    "the stream barrier reaches the others through the backend")
    sync()
    if reach:
        launch(K.k_barrier, (1,), symm.ctx(), slots, out, 200, BARRIER=getattr(st, name), NT=NT)
    else:  # not reachable by load/store (SYMM_DEBUG_FORCE_REMOTE, another node): symm_ptr is NULL
        stage = torch.zeros(2 * NT, dtype=torch.int32, device=pe.device)
        launch(K.k_barrier_put, (1,), symm.ctx(), slots, stage, out, 200, BARRIER=getattr(st, name), NT=NT)
    sync()
    bad = int(out.sum())
    symm.free_tensor(slots)
    assert bad == 0, "%s: %d stale reads" % (name, bad)


def test_coll_barrier_grid(pe, K):
    torch = pe.torch
    G = 4
    slots = symm.zeros((2 * G * NT,), torch.int32)
    out = torch.ones(G * NT, dtype=torch.int32, device=pe.device)
    if not symm.peer_ptr(slots.data_ptr(), ring(pe)[0]):
        symm.free_tensor(slots)
        pytest.skip("the next PE is not reachable by load/store (symm_ptr is NULL): this kernel stores "
                    "through peer pointers")
    sync()
    launch(K.k_coll_barrier_grid, (G,), symm.ctx(), slots, out, 100, NT=NT)
    sync()
    bad = int(out.sum())
    symm.free_tensor(slots)
    assert bad == 0


COLL_DTYPES = {"f32": ("float32", 0, 1e-5), "bf16": ("bfloat16", 2, 2e-2), "i32": ("int32", 4, 0)}


def _reduce_ref(torch, pieces, op):
    acc = pieces[0].double()
    for p in pieces[1:]:
        acc = acc + p.double() if op == "sum" else torch.maximum(acc, p.double())
    return acc


def _close(torch, got, want, tol):
    if tol == 0:
        return torch.equal(got.double(), want)
    return torch.allclose(got.double(), want, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
@pytest.mark.parametrize("dname", list(COLL_DTYPES))
def test_device_collectives(pe, K, grid, dname):
    torch = pe.torch
    tname, dcode, tol = COLL_DTYPES[dname]
    dt = getattr(torch, tname)
    w, me = pe.world, pe.rank
    G = 4 if grid else 1
    kern = K.k_coll_grid if grid else K.k_coll
    sfx = "_grid" if grid else "_block"
    op, opcode = ("max", 2) if dname == "i32" else ("sum", 0)
    failures = []
    for count in (5, 4099, 70001):
        seed = pe.next_seed()
        src = symm.zeros((w * count,), dt)
        dst = symm.zeros((w * count,), dt)
        pieces = [rand(torch, (w * count,), dt, seed + p) for p in range(w)]
        src.copy_(pieces[me].to(pe.device))
        ctx = symm.ctx()
        runs = [("all_reduce", 0, None), ("reduce_scatter", 0, None)]
        runs += [("all_reduce_ex", 1, a.value) for a in (st.ALGO_PACKET, st.ALGO_ONESHOT, st.ALGO_TWOSHOT)]
        runs += [("reduce_scatter_ex", 1, a.value) for a in (st.ALGO_ONESHOT, st.ALGO_TWOSHOT)]
        runs += [("all_gather", 2, None), ("all_to_all", 2, None), ("broadcast", 3, None)]
        for base, kind, algo in runs:
            dst.zero_()
            sync()  # no peer still writes into dst from the previous call
            fn = getattr(st, base + sfx)
            n = count * w if base == "all_reduce" or base == "all_reduce_ex" else count
            opv = (w - 1) if base == "broadcast" else opcode
            launch(kern, (G,), ctx, dst, src, n, FN=fn, DT=dcode, OP=opv, KIND=kind,
                   ALGO=algo if algo is not None else st.ALGO_AUTO.value)
            torch.cuda.synchronize()
            got = dst.cpu()
            if base.startswith("all_reduce"):
                ok = _close(torch, got, _reduce_ref(torch, pieces, op), tol)
            elif base.startswith("reduce_scatter"):
                want = _reduce_ref(torch, [p[me * count:(me + 1) * count] for p in pieces], op)
                ok = _close(torch, got[:count], want, tol)
            elif base == "all_gather":
                want = torch.cat([p[:count] for p in pieces])
                ok = torch.equal(got, want)
            elif base == "all_to_all":
                want = torch.cat([pieces[p][me * count:(me + 1) * count] for p in range(w)])
                ok = torch.equal(got, want)
            else:
                ok = torch.equal(got[:count], pieces[w - 1][:count])
            if not ok:
                failures.append("%s%s(algo %s) %s count %d" % (base, sfx, algo, dname, count))
        sync()
        symm.free_tensor(dst)
        symm.free_tensor(src)
    assert not failures, failures


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
def test_device_all_to_allv(pe, K, grid):
    torch = pe.torch
    w, me = pe.world, pe.rank
    row = 3
    send = [(me + p) % 4 + 1 for p in range(w)]     # rows to PE p
    recv = [(p + me) % 4 + 1 for p in range(w)]     # rows from PE p
    seed = pe.next_seed()
    # Symmetric allocations are the same size on every PE: allocate for the
    # PE that needs the most rows and use a prefix.
    most = max(sum((q + p) % 4 + 1 for p in range(w)) for q in range(w)) * row
    src_all = symm.zeros((most,), torch.float32)
    src = src_all[:sum(send) * row]
    mine = rand(torch, (sum(send) * row,), torch.float32, seed + me)
    src.copy_(mine.to(pe.device))
    dst_all = symm.zeros((most,), torch.float32)
    dst = dst_all[:sum(recv) * row]

    def arr(sizes):
        counts = [s * row for s in sizes]
        displs = [sum(counts[:i]) for i in range(len(counts))]
        return (torch.tensor(counts, dtype=torch.int64, device=pe.device),
                torch.tensor(displs, dtype=torch.int64, device=pe.device))
    sc, sd = arr(send)
    rc, rd = arr(recv)
    launch(K.k_all_to_allv, (4 if grid else 1,), symm.ctx(), dst, src, sc, sd, rc, rd,
           FN=st.all_to_allv_grid if grid else st.all_to_allv_block, DT=0, GRID=grid)
    sync()
    want = []
    for p in range(w):
        theirs = rand(torch, (sum((p + q) % 4 + 1 for q in range(w)) * row,), torch.float32, seed + p)
        their_send = [(p + q) % 4 + 1 for q in range(w)]
        start = sum(their_send[:me]) * row
        want.append(theirs[start:start + their_send[me] * row])
    ok = torch.equal(dst.cpu(), torch.cat(want))
    sync()
    symm.free_tensor(dst_all)
    symm.free_tensor(src_all)
    assert ok


def test_one_thread_results_reach_every_thread(pe, K):
    """The broadcast of a thread-0 result, on its own: every thread of every
    program sees the same ticket."""
    torch = pe.torch
    G = 8
    target = symm.zeros((1,), torch.int64)
    outs = torch.zeros((G, NT), dtype=torch.int64, device=pe.device)
    sync()
    launch(K.k_fetch_op, (G,), symm.ctx(), target, 1, pe.rank, outs,
           FN=st.atomic_fetch_add_i64, NT=NT, PER_PROGRAM=False)
    sync()
    assert bool((outs == outs[:, :1]).all())
    assert sorted(outs[:, 0].tolist()) == list(range(G))
    symm.free_tensor(target)


def test_prepared_launch(pe, K):
    """st.prepare gives st.launch's results, call after call with fresh data
    written in place, on whatever stream is current at each call: torch's
    default stream, a side stream (the data is written there after a sleep:
    a launch on another stream would send the zeros from before) and a CUDA
    graph's capture stream (the graph is replayed with new data each time)."""
    torch = pe.torch
    size, nbytes, value = 40000, 33333, 9
    nxt, prv = ring(pe)
    dst = symm.zeros((size,), torch.uint8)
    sig = symm.zeros((1,), torch.int64)
    mine = torch.zeros(size, dtype=torch.uint8, device=pe.device)
    recv = torch.zeros(size, dtype=torch.uint8, device=pe.device)
    out = torch.zeros(1, dtype=torch.int64, device=pe.device)
    args = (symm.ctx(), dst[1:], mine[3:], nbytes, sig, value, st.SIGNAL_SET.value, value, recv,
            out, nxt)
    kw = dict(FN=st.put_signal_block, BLOCK=1024)
    p = st.prepare(K.k_put_signal, (1,), *args, **kw)
    side = torch.cuda.Stream(pe.device)
    sync()
    graph = torch.cuda.CUDAGraph()
    # thread_local: the NCCL watchdog thread may query events meanwhile
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        p()
    sync()

    def reset():        # on every PE before anyone sends (the signal is SET, then awaited)
        for t in (dst, sig, recv, out, mine):
            t.zero_()
        sync()

    def result():
        sync()
        return recv[:nbytes].cpu(), out.item(), sig.item()

    got, wants = [], []
    for _ in range(3):
        seed = pe.next_seed()
        data = rand(torch, (size,), torch.uint8, seed + pe.rank).to(pe.device)
        wants.append(rand(torch, (size,), torch.uint8, seed + prv)[3:3 + nbytes])
        reset()
        mine.copy_(data)
        launch(K.k_put_signal, (1,), *args, **kw)
        got.append(("launch", result()))
        reset()
        mine.copy_(data)
        p()
        got.append(("prepared", result()))
        reset()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            mine.copy_(data)
            p()
        got.append(("prepared on a side stream", result()))
        reset()
        mine.copy_(data)
        graph.replay()
        got.append(("graph replay", result()))
    del graph
    sync()
    symm.free_tensor(sig)
    symm.free_tensor(dst)
    from symm.triton import _launch
    v = _launch._triton_version()
    if v is not None and _launch._CHECKED_TRITON[0] <= v <= _launch._CHECKED_TRITON[1]:
        assert p.fast, p.reason      # a Triton prepare() was written for: the direct launch
    for i, (how, (data, o, s)) in enumerate(got):
        want = wants[i // 4]
        assert o == value and s == value, "%s, call %d: signal %d, seen %d" % (how, i // 4, s, o)
        assert torch.equal(data, want), "%s, call %d: wrong data" % (how, i // 4)
