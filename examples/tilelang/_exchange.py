"""The host side all_gather.py and all_to_all.py share: check both TileLang
kernels (by hand, and symm's device collective inside TileLang) against a
reference computed from every PE's reproducible input, and time them next to
symm's stream collective and torch.distributed."""
import torch
import torch.distributed as dist

import symm

from _common import all_ok, rand, row, sync_all, time_graph, time_host, time_op, torch_dist_ref


MAX_BLOCKS = 128      # _tiles.MAX_BLOCKS (importing _tiles needs TileLang)
BLOCK_BYTES = 16384   # bytes of a piece per block, as symm's stream collectives cut a move
PACKET_MAX = 128 << 10  # pieces up to this take packets by hand (SYMM__COLL_PACKET_MAX, as the stream)
PKT_WORDS = 256       # _tiles.PKT_WORDS: 4-byte words per block of the packet kernel


def packets(cfg):
    """Whether the hand variant of this size is the packet kernel (else the
    two-handshake put_block one)."""
    return 2 * cfg["n"] <= PACKET_MAX


def names(kind, world, cfg):
    key = "p%d_n%d" % (world, cfg["n"])
    return "%s_%s_%s" % (kind, "pkt" if packets(cfg) else "hand", key), "%s_coll_%s" % (kind, key)


def builders(kind, world, cfg):
    def hand():
        from _tiles import exchange_kernel, packet_kernel
        return (packet_kernel if packets(cfg) else exchange_kernel)(kind, cfg["n"], world)

    def coll():
        from _tiles import device_coll_kernel
        return device_coll_kernel(kind, cfg["n"], world)
    h, c = names(kind, world, cfg)
    return {h: hand, c: coll}


def exchange_blocks(piece_bytes):
    """The grid of an exchange kernel moving `piece_bytes` to each PE: what
    symm's stream collectives launch for the same move (a block per 16 KiB,
    at most MAX_BLOCKS, and no more than this PE's share of the GPU's SMs,
    since the blocks wait on the peers' blocks). The same on every PE."""
    return max(1, min(MAX_BLOCKS, symm.sm_share(), -(-piece_bytes // BLOCK_BYTES)))


def packet_blocks(words):
    """The packet kernel's grid: a block per PKT_WORDS words (so the remote
    stores spread over SMs, as the stream packets do), within this PE's SM
    share, and never more blocks than words (each block must own a word of
    every peer: the parity argument of _tiles.packet_kernel)."""
    return max(1, min(MAX_BLOCKS, symm.sm_share(), words, -(-words // PKT_WORDS)))


def exchange_state():
    """The hand kernel's words (entry, arrived, calls), zeroed symmetric."""
    return tuple(symm.zeros((MAX_BLOCKS,), torch.uint64) for _ in range(3))


def run(env, ks, cfg, args, kind, example):
    n, P, me = cfg["n"], env.world, env.rank
    hand, coll = (ks[x] for x in names(kind, P, cfg))
    in_n = n if kind == "gather" else P * n
    pkt = packets(cfg)
    grid = exchange_blocks(2 * n)
    hand_grid = packet_blocks(n // 2) if pkt else grid
    # the device call's packet path: a block per KiB, at most its 32 packet slots
    coll_grid = max(1, min(32, symm.sm_share(), -(-2 * n // 1024))) if pkt else grid
    rows = []
    with symm.scope():
        inp = symm.tensor((in_n,), torch.float16)
        out = symm.zeros((P * n,), torch.float16)
        entry, arrived, calls = exchange_state()
        # packets: 2 parities x P sources x n/2 words of 8 bytes, in the heap
        stage = symm.zeros((2 * P * (n // 2),), torch.uint64) if pkt else None
        in32, out32 = inp.view(torch.int32), out.view(torch.int32)

        def run_hand():
            if pkt:
                hand(env.ctx, in32, out32, stage, calls, grid=hand_grid)
            else:
                hand(env.ctx, inp, out, entry, arrived, calls, grid=grid)

        def run_coll():
            coll(env.ctx, inp, out, grid=coll_grid)

        def want(it):
            xs = [rand((in_n,), torch.float16, env.device, example, it, p) for p in range(P)]
            return torch.cat(xs) if kind == "gather" else torch.cat([x[me * n:(me + 1) * n] for x in xs])

        stream = symm.all_gather if kind == "gather" else symm.all_to_all
        hand_label = ("by hand, packets (8-byte st: 4 B data + call number)" if pkt
                      else "by hand (put_block + signals)")
        for label, op, blocks in ((hand_label, run_hand, hand_grid), ("symm device collective", run_coll, coll_grid)):
            ok = True
            for it in range(args.checks):
                inp.copy_(rand((in_n,), torch.float16, env.device, example, it, me))
                out.zero_()
                sync_all()
                op()
                sync_all()
                ok = ok and torch.equal(out, want(it))
            times = {"blocks": str(blocks)}
            if not args.no_bench:
                # both sides the same way: CUDA graphs of back-to-back calls
                t = time_graph(op, args.graph_iters)
                s = time_graph(lambda: stream(out, inp), args.graph_iters)
                times.update({"tilelang us": t, "symm stream us": s,
                              "ratio": s / t if s and t else "n/a"})
                times.update(_dist_time(env, kind, inp, out, args))
            # the graphs replayed the same data: one more fresh check after them
            inp.copy_(rand((in_n,), torch.float16, env.device, example, args.checks, me))
            sync_all()
            op()
            sync_all()
            ok = ok and torch.equal(out, want(args.checks))
            rows.append(row(example, "%s, %d KiB per PE" % (label, 2 * n // 1024), env, all_ok(ok), **times))
    return rows


def _dist_time(env, kind, inp, out, args):
    def gpu():
        if kind == "gather":
            dist.all_gather_into_tensor(out, inp)
        else:
            dist.all_to_all_single(out, inp)

    def make_cpu():
        ci, co = inp.cpu(), out.cpu()

        def cpu():
            ci.copy_(inp)
            if kind == "gather":
                dist.all_gather_into_tensor(co, ci)
            else:
                dist.all_to_all_single(co, ci)
            out.copy_(co)
        return cpu
    fn, label = torch_dist_ref(env, gpu, make_cpu)
    if fn is None:
        return {"torch.distributed": "n/a"}
    timer = time_op if label == "nccl" else time_host
    return {"torch.distributed us": timer(fn, max(3, args.iters // 4)), "torch.distributed": label}
