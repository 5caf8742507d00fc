"""symm.moe as a pplx-kernels test uses it: processes started with
torch.multiprocessing.spawn, torch.distributed initialised with an explicit
rank and world size over a FileStore (gloo), no launcher variables in the
environment, then symm.moe.nvshmem_init(global_rank, local_rank, world_size,
device) -- and nothing else changed from pplx's code.

    python tests/python/moe_spawn.py cpu [world]   nvshmem_init's argument
        handling and both of pplx's init forms over the host backend
        (SYMM_BACKEND=host, no GPU)
    python tests/python/moe_spawn.py gpu [world]   the same start, then pplx's
        dispatch/combine round (dp_size 1 and 2, bf16 and fp8, an SM budget),
        checked like pplx's test, on `world` GPUs (default: all, at most 4)

Exit status 0: passed; 77: skipped (the reason on stdout); else failed.
"""
import os
import sys
import tempfile

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))


def _expect(exc, fn, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), "%s: message %r lacks %r" % (exc.__name__, str(e), needle)
        return
    raise AssertionError("expected %s (%s)" % (exc.__name__, needle))


def _start(rank, world, store_path):
    for v in LAUNCHER_VARS:
        assert v not in os.environ, "%s is set: this test must run without launcher variables" % v
    import torch.distributed as dist
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    return dist


def cpu_worker(rank, world, store_path):
    dist = _start(rank, world, store_path)
    import symm
    import symm.moe as moe
    # wrong arguments are refused before anything starts
    _expect(ValueError, lambda: moe.nvshmem_init(rank, rank, world + 1, None),
            "world_size %d, but the torch.distributed group has %d ranks" % (world + 1, world))
    _expect(ValueError, lambda: moe.nvshmem_init(world, rank, world, None), "outside [0, world_size")
    _expect(TypeError, lambda: moe.nvshmem_init("0", rank, world, None), "global_rank must be an int")
    _expect(ValueError, lambda: moe.nvshmem_init(rank, rank, world, "cpu"), "is not a CUDA device")
    assert not symm.initialized()
    # pplx's form, over the running group
    moe.nvshmem_init(rank, rank, world, None)
    assert symm.initialized() and symm.my_pe() == rank and symm.n_pes() == world, (symm.my_pe(), symm.n_pes())
    assert moe.nvshmem_my_pe() == rank and moe.nvshmem_n_pes() == world
    moe.nvshmem_init(rank, rank, world, None)  # running: only checked
    _expect(ValueError, lambda: moe.nvshmem_init((rank + 1) % world, rank, world, None),
            "symm runs this process as PE %d" % rank)
    got = symm.host_allgather(bytes([rank]))
    assert [g[0] for g in got] == list(range(world)), got
    moe.nvshmem_barrier_all()
    moe.nvshmem_finalize()
    assert not symm.initialized()
    # pplx's older form: an id from rank 0, broadcast by the caller
    import torch
    uid = moe.nvshmem_get_unique_id() if rank == 0 else moe.nvshmem_alloc_empty_unique_id()
    dist.broadcast(uid, src=0)
    _expect(TypeError, lambda: moe.nvshmem_init(uid[:5], rank, world), "uid tensor must be")
    moe.nvshmem_init(uid, rank, world)
    assert symm.my_pe() == rank and symm.n_pes() == world
    moe.nvshmem_finalize()
    assert isinstance(uid, torch.Tensor)
    dist.destroy_process_group()


# ---- the GPU round: pplx's test, data alike on every rank ------------------------------------------

def _rank_data(torch, gen, m, num_experts, k, hidden, in_dtype):
    x = torch.randn((m, hidden), generator=gen)
    idx = torch.rand((m, num_experts), generator=gen).argsort(dim=1)[:, :k].to(torch.int32)
    w = torch.rand((m, k), generator=gen)
    scale = None
    if in_dtype.itemsize == 1:
        scale = torch.rand((m, (hidden + 127) // 128), generator=gen)
        x = ((torch.rand((m, hidden), generator=gen) - 0.5) * 400).to(in_dtype)  # within e4m3's range
    else:
        x = x.to(in_dtype)
    return x, scale, idx, w


def _round(torch, moe, rank, world, device, dp_size, in_dtype, out_dtype, num_sms):
    E, K, H, M = 8, 3, 512, 10
    num_dp = world // dp_size
    ata = moe.AllToAll.intranode(M, E, K, rank, world, dp_size, H, H * in_dtype.itemsize,
                                 0 if in_dtype.itemsize != 1 else (H + 127) // 128 * 4)
    try:
        if num_sms:
            ata.set_num_sms(num_sms)
        gen = torch.Generator()
        gen.manual_seed(123 + dp_size)
        data = []
        for _ in range(num_dp):
            m = int(torch.randint(1, M + 1, (1,), generator=gen))
            data.append(_rank_data(torch, gen, m, E, K, H, in_dtype))
        x, scale, idx, w = data[rank // dp_size]
        L = E // world
        num = torch.empty(L, dtype=torch.int32, device=device)
        ex = torch.empty((L, M * num_dp, H), dtype=in_dtype, device=device)
        exs = torch.empty((L, M * num_dp, (H + 127) // 128), device=device) if in_dtype.itemsize == 1 else None
        bound = torch.tensor([x.size(0)], dtype=torch.uint32, device=device)
        ata.dispatch(out_expert_num_tokens=num, out_expert_x=ex, out_expert_x_scale=exs, dp_x=x.to(device),
                     dp_x_scale=None if scale is None else scale.to(device),
                     indices=idx.to(device).to(torch.uint32), bound_m=bound)
        torch.cuda.synchronize()
        for le in range(L):
            e = rank * L + le
            want = [(g, t) for g, d in enumerate(data) for t in range(d[0].size(0)) if e in d[2][t].tolist()]
            n = int(num[le])
            assert n == len(want), "expert %d: %d tokens, expected %d" % (e, n, len(want))
            got = sorted(tuple(ex[le, i].float().cpu().tolist()) for i in range(n))
            exp = sorted(tuple(data[g][0][t].float().tolist()) for g, t in want)
            assert got == exp, "expert %d: received tokens differ" % e
            if exs is not None:
                gs = sorted(tuple(exs[le, i].cpu().tolist()) for i in range(n))
                es = sorted(tuple(data[g][1][t].tolist()) for g, t in want)
                assert gs == es, "expert %d: received scales differ" % e
        y = torch.full((M, H), float("nan"), dtype=out_dtype, device=device)
        ata.combine(out_tokens=y, indices=idx.to(device).to(torch.uint32), weights=w.to(device),
                    expert_y=ex.to(out_dtype) * 1.5, bound_m=bound)
        torch.cuda.synchronize()
        ref = torch.zeros((x.size(0), H), dtype=out_dtype, device=device)
        for t in range(x.size(0)):
            for k in range(K):
                ref[t] += x[t].to(device).to(out_dtype) * 1.5 * float(w[t, k])
        torch.testing.assert_close(y[:x.size(0)], ref, rtol=2e-2, atol=2e-2 * max(1.0, float(ref.abs().max())))
        assert torch.isnan(y[x.size(0):].float()).all(), "rows past the tokens were written"
        if num_sms:
            blocks = ata.launched_blocks()
            assert 1 <= blocks <= num_sms, "budget %d: a kernel ran %d blocks" % (num_sms, blocks)
        ata.check()
    finally:
        ata.destroy()


def gpu_worker(rank, world, store_path):
    import torch
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    _start(rank, world, store_path)
    import torch.distributed as dist
    import symm.moe as moe
    moe.nvshmem_init(rank, rank, world, device)
    try:
        assert torch.cuda.current_device() == rank
        for dp_size, in_dtype, out_dtype, num_sms in ((1, torch.bfloat16, torch.bfloat16, 0),
                                                      (2, torch.float8_e4m3fn, torch.float16, 2),
                                                      (1, torch.float16, torch.bfloat16, 1)):
            if world % dp_size:
                continue
            _round(torch, moe, rank, world, device, dp_size, in_dtype, out_dtype, num_sms)
    finally:
        moe.nvshmem_finalize()
        dist.destroy_process_group()


def main(argv):
    mode = argv[1] if len(argv) > 1 else "cpu"
    for v in LAUNCHER_VARS:
        os.environ.pop(v, None)
    import torch
    import torch.multiprocessing as mp
    if mode == "gpu":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        world = int(argv[2]) if len(argv) > 2 else min(n, 4)
        if n < 2 or world < 2:
            print("SKIP: moe_spawn gpu: needs 2 GPUs, this machine has %d" % n)
            return 77
        if world > n:
            print("SKIP: moe_spawn gpu: %d processes want %d GPUs, this machine has %d" % (world, world, n))
            return 77
        worker = gpu_worker
    elif mode == "cpu":
        world = int(argv[2]) if len(argv) > 2 else 2
        os.environ["SYMM_BACKEND"] = "host"
        worker = cpu_worker
    else:
        print("usage: moe_spawn.py cpu|gpu [world]")
        return 2
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(world, os.path.join(d, "store")), nprocs=world, join=True)
    print("moe_spawn %s: passed on %d processes" % (mode, world))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
