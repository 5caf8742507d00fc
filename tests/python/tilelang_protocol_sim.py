"""The copy-engine protocols of the fused TileLang GEMM examples (ag_gemm,
gemm_rs, cannon, summa) run on the CPU, to find a deadlock, a flag reset
racing its next set, a wrong address or a wrong result without a GPU.

The examples' own host classes queue their work, unchanged, into a model of
P GPUs: per PE a main and a side stream of operations in order (the side
forked from and joined to the main one as with events), copies (memmove in
each PE's symmetric heap, real CPU memory at the same offsets, peer
addresses by the heap arithmetic), stream waits and writes of 64-bit words,
and kernels whose blocks are dispatched in index order onto `nsm` slots and
finish, in any order, once what they wait for is there (a persistent grid:
nsm blocks, each taking its tiles in turn). The kernels are
models of the examples' TileLang kernels (same tile order, same flags, same
arithmetic on bf16 tensors). The host queues every call of every PE first
(a host far ahead of its GPUs); a seeded random scheduler then runs whatever
can run. Each call writes fresh inputs on its main stream and copies its
output after, and every output is checked against torch.

    python3 tests/python/tilelang_protocol_sim.py [--seeds N]      (exit 0: all passed)
"""
import argparse
import ctypes
import os
import random
import sys
import threading
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(REPO, "examples", "tilelang")
BF16 = torch.bfloat16


def u64(addr):
    return ctypes.c_uint64.from_address(addr)


class Op:
    def __init__(self, kind, run=None, ready=None, what=""):
        self.kind, self.run, self.ready, self.what = kind, run, ready, what


class Kernel:
    """A launched grid: blocks dispatched in order onto nsm slots; a block
    runs its tiles (cond, action) one after the other (one tile, or a
    persistent block's share), each once its cond holds."""

    def __init__(self, name, blocks, nsm):
        self.name, self.blocks, self.nsm = name, blocks, nsm
        self.next, self.resident, self.done = 0, [], 0
        self.step = [0] * len(blocks)

    def fill(self):
        while self.next < len(self.blocks) and len(self.resident) < self.nsm:
            self.resident.append(self.next)
            self.next += 1

    def tile(self, b):
        return self.blocks[b][self.step[b]]

    def finished(self):
        return self.done == len(self.blocks)


class Sim:
    HEAP = 8 << 20

    def __init__(self, P, seed, nsm):
        self.P, self.rng, self.nsm = P, random.Random(seed), nsm
        self.heaps = [torch.zeros(self.HEAP, dtype=torch.uint8) for _ in range(P)]
        self.bases = [h.data_ptr() for h in self.heaps]
        self.bump = [0] * P
        self._local = threading.local()   # the PE queuing (one thread per PE in tilelang_example_hosts.py)
        self.streams = {}   # (p, "main" / "side<lane>") -> ops in order
        self.pos = {}
        self.running = {}   # (p, stream) -> Kernel at the head of that stream

    @property
    def cur(self):
        return getattr(self._local, "pe", 0)

    @cur.setter
    def cur(self, pe):
        self._local.pe = pe

    # -- the fake symm module -------------------------------------------------------
    def zeros(self, shape, dtype):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = torch.Size(shape).numel() * torch.empty(0, dtype=dtype).element_size()
        off = self.bump[self.cur]
        self.bump[self.cur] = off + (n + 255) // 256 * 256
        assert self.bump[self.cur] <= self.HEAP, "heap too small for the model"
        t = self.heaps[self.cur][off:off + n]
        t.zero_()
        return t.view(dtype).view(shape)

    def peer_ptr(self, addr, pe):
        for p, b in enumerate(self.bases):
            if b <= addr < b + self.HEAP:
                return addr - b + self.bases[pe]
        raise AssertionError("peer_ptr of 0x%x: not in a symmetric heap" % addr)

    def fake_symm(self):
        m = types.ModuleType("symm")
        m.zeros = self.zeros
        m.tensor = self.zeros
        m.peer_ptr = self.peer_ptr
        m.barrier = lambda: None
        m.free_tensor = lambda t: None
        m.sm_share = lambda: self.nsm   # persistent grids: as many blocks as the model's slots
        m.cubin = types.ModuleType("symm.cubin")
        m.timing = load_timing()
        return m

    # -- queuing ------------------------------------------------------------------------
    def queue(self, stream, op, pe=None):
        key = (self.cur if pe is None else pe, stream)
        self.pos.setdefault(key, 0)
        self.streams.setdefault(key, []).append(op)

    def host(self, fn, what="host"):
        """A stream-ordered operation on the current PE's main stream (a torch op there)."""
        self.queue("main", Op("host", run=fn, what=what))

    def event_wait(self, stream, other, pe=None):
        """`stream` of PE pe (the current one) waits for what is queued on `other` so far."""
        p = self.cur if pe is None else pe
        key, n = (p, other), len(self.streams.get((p, other), []))
        self.pos.setdefault(key, 0)
        self.queue(stream, Op("event", ready=lambda: self.pos[key] >= n, what="event on %s %d" % (other, n)), p)

    def kernel(self, name, tiles, nsm=0):
        """A grid of one block per tile, or (nsm > 0) a persistent grid of nsm
        blocks, block b taking tiles b, b + nsm, ..."""
        blocks = [[t] for t in tiles] if nsm <= 0 else [tiles[b::nsm] for b in range(nsm)]
        self.queue("main", Op("kernel", run=(name, [b for b in blocks if b]), what=name))

    def free_slot(self, pe):
        """Whether PE pe has a block slot that its main stream's kernel (if any)
        neither holds nor will fill with a block of its own first."""
        k = self.running.get((pe, "main"))
        return k is None or (k.next == len(k.blocks) and len(k.resident) < k.nsm)

    # -- running --------------------------------------------------------------------------
    def run(self, limit=10 ** 7):
        for _ in range(limit):
            cands = []
            for key, ops in self.streams.items():
                k = self.running.get(key)
                if k is not None:
                    k.fill()
                    for b in k.resident:
                        if k.tile(b)[0]():
                            cands.append(("block", key, b))
                    continue
                i = self.pos[key]
                if i < len(ops) and (ops[i].ready is None or ops[i].ready()):
                    cands.append(("op", key, None))
            if not cands:
                stuck = {k: (self.pos[k], len(v), v[self.pos[k]].what if self.pos[k] < len(v) else "-")
                         for k, v in self.streams.items() if self.pos[k] < len(v) or k in self.running}
                if stuck:
                    raise AssertionError("deadlock: %s" % {k: (v, self.running[k].name + " blocks %d/%d" % (
                        self.running[k].done, len(self.running[k].blocks)) if k in self.running else "")
                        for k, v in stuck.items()})
                return
            kind, key, b = self.rng.choice(cands)
            if kind == "block":
                k = self.running[key]
                k.tile(b)[1]()
                k.step[b] += 1
                if k.step[b] < len(k.blocks[b]):
                    continue
                k.resident.remove(b)
                k.done += 1
                if k.finished():
                    del self.running[key]
                    self.pos[key] += 1
                continue
            op = self.streams[key][self.pos[key]]
            if op.kind == "kernel":
                name, blocks = op.run
                self.running[key] = Kernel(name, blocks, self.nsm)
                if not blocks:
                    del self.running[key]
                    self.pos[key] += 1
                continue
            if op.run is not None:
                op.run()
            self.pos[key] += 1
        raise AssertionError("the model did not finish in %d steps" % limit)


class FakeSide:
    """symm.copyengine.Side on the model: the same calls; a program's operations
    are queued on its lanes (streams "side0", "side1", ...) of this PE, the
    real Program (with its checks) describing them. A copy with both ends on
    this PE's GPU may run on the SMs in CUDA: here it needs a block slot that
    the kernel on the main stream does not hold (Program refuses such copies
    on a side stream; the model would show the deadlock they cause)."""

    def __init__(self, sim, lanes=1):
        self.sim, self.pe, self.lanes = sim, sim.cur, lanes
        self.prepared = set()
        self.prog = None

    def prepare(self, program):
        assert program.lanes <= self.lanes
        self.prepared.add(id(program))

    def graphed(self, program):
        return id(program) in self.prepared

    def begin(self, program):
        assert self.sim.cur == self.pe
        assert program.lanes <= self.lanes
        self.prog = program
        for lane in range(program.lanes):
            self.sim.event_wait("side%d" % lane, "main")

    def _mine(self, addr):
        """Whether addr is this PE's memory (its heap, or no heap: a tensor of its own)."""
        for p, b in enumerate(self.sim.bases):
            if b <= addr < b + self.sim.HEAP:
                return p == self.pe
        return True

    def run(self):
        sim, pe = self.sim, self.pe
        for op in self.prog.ops:
            kind, lane = op[0], "side%d" % op[1]
            if kind == "copy":
                dst, src, n = op[2], op[3], op[4]
                on_sms = self._mine(dst) and self._mine(src)
                sim.queue(lane, Op("copy", run=lambda dst=dst, src=src, n=n: ctypes.memmove(dst, src, n),
                                   ready=(lambda: sim.free_slot(pe)) if on_sms else None,
                                   what="copy %d%s" % (n, " on the SMs" if on_sms else "")), pe)
            elif kind in ("wait_eq", "wait_ge"):
                addr, v = op[2], op[3]
                ready = ((lambda addr=addr, v=v: u64(addr).value == v) if kind == "wait_eq" else
                         (lambda addr=addr, v=v: u64(addr).value >= v))
                sim.queue(lane, Op("wait", ready=ready, what="%s %d" % (kind, v)), pe)
            elif kind == "write":
                addr, v = op[2], op[3]
                sim.queue(lane, Op("write", run=lambda addr=addr, v=v: setattr(u64(addr), "value", v),
                                   what="write %d" % v), pe)
            else:   # after
                sim.event_wait(lane, "side%d" % op[2], pe)

    def end(self):
        for lane in range(self.prog.lanes):
            self.sim.event_wait("main", "side%d" % lane)

    def main_copy(self, dst, src, n):
        self.sim.queue("main", Op("copy", run=lambda: ctypes.memmove(int(dst), int(src), n), what="main copy"),
                       self.pe)

    def main_fill(self, words, v):
        self.sim.queue("main", Op("fill", run=lambda: words.view(torch.int64).fill_(v), what="main fill"), self.pe)

    def main_write(self, addr, v):
        self.sim.queue("main", Op("write", run=lambda: setattr(u64(int(addr)), "value", v), what="main write"),
                       self.pe)

    def main_wait_eq(self, addr, v):
        self.sim.queue("main", Op("wait", ready=lambda: u64(int(addr)).value == v, what="main wait == %d" % v),
                       self.pe)


class FakeKernel:
    """A kernel of the model, launched as symm.cubin launches a built one:
    the launcher appends nsm and passes grid= for a persistent grid."""
    __module__ = "symm.cubin"

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, grid=None):
        return self.fn(*args)


def flag(t, i):
    return u64(t.data_ptr() + 8 * i).value


def add_flag(t, i, v):
    w = u64(t.data_ptr() + 8 * i)
    w.value = w.value + v


def mm(a, b):
    return a.float() @ b.float()


# -- models of the examples' kernels ------------------------------------------------------

def finish_kernel(sim, nwords):
    def launch(ctx, flags, rec):
        assert flags.numel() == nwords

        def act():
            assert flag(rec, 0) == 0, "a wait gave up"
            for i in range(nwords):
                u64(flags.data_ptr() + 8 * i).value = 0
        sim.kernel("finish", [(lambda: True, act)])
    return launch


def ag_kernel(sim, P, m_loc, N, chunks, cfg, tile_mn, group_of):
    bm, bn = cfg["bm"], cfg["bn"]
    rows_ch = m_loc // chunks
    tm, tn = m_loc // bm, N // bn
    grp = group_of(cfg, rows_ch // bm)

    def launch(ctx, afull, b, c, ready, rec, nsm):
        me = sim.cur
        blocks = []
        for t in range(P * tm * tn):
            band, r = divmod(t, tm * tn)
            src = (me + band) % P
            mi, ni = tile_mn(r, tm, tn, grp)
            r0, c0 = src * m_loc + mi * bm, ni * bn
            idx = src * chunks + (mi * bm) // rows_ch
            cond = (lambda: True) if band == 0 else (lambda idx=idx: flag(ready, idx) >= 1)

            def act(r0=r0, c0=c0):
                c[r0:r0 + bm, c0:c0 + bn] = mm(afull[r0:r0 + bm], b[:, c0:c0 + bn]).to(BF16)
            blocks.append((cond, act))
        sim.kernel("ag_gemm", blocks, nsm)
    return FakeKernel(launch)


def rs_kernel(sim, P, M, N, subs, cfg, tile_mn, group_of):
    bm, bn = cfg["bm"], cfg["bn"]
    m_loc = M // P
    sub_rows = m_loc // subs
    tm, tn = m_loc // bm, N // bn
    grp = group_of(cfg, sub_rows // bm)

    def launch(ctx, a, b, stage, recv, out, done, rflag, rec, nsm):
        me = sim.cur
        blocks = []
        for t in range(P * tm * tn):
            band, r = divmod(t, tm * tn)
            c = (me + 1 + band) % P
            mi, ni = tile_mn(r, tm, tn, grp)
            r0, c0 = mi * bm, ni * bn
            sub = r0 // sub_rows
            if band < P - 1:
                def act(c=c, r0=r0, c0=c0, sub=sub):
                    stage[c, r0:r0 + bm, c0:c0 + bn] = mm(a[c * m_loc + r0:c * m_loc + r0 + bm],
                                                          b[:, c0:c0 + bn]).to(BF16)
                    add_flag(done, c * subs + sub, 1)
                blocks.append((lambda: True, act))
            else:
                srcs = [(me + 1 + p) % P for p in range(P - 1)]

                def cond(srcs=srcs, sub=sub):
                    return all(flag(rflag, s * subs + sub) >= 1 for s in srcs)

                def act(c=c, r0=r0, c0=c0, srcs=srcs):
                    acc = mm(a[c * m_loc + r0:c * m_loc + r0 + bm], b[:, c0:c0 + bn])
                    for s in srcs:
                        acc += recv[s, r0:r0 + bm, c0:c0 + bn].float()
                    out[r0:r0 + bm, c0:c0 + bn] = acc.to(BF16)
                blocks.append((cond, act))
        sim.kernel("gemm_rs", blocks, nsm)
    return FakeKernel(launch)


def grid_kernel(sim, q, S, pieces, cfg, tile_mn, group_of):
    bm, bn = cfg["bm"], cfg["bn"]
    rows_p = S // pieces
    tm, tn = S // bm, S // bn
    grp = group_of(cfg, rows_p // bm)

    def launch(ctx, abuf, bbuf, c, aflag, bflag, rec, first, skip_a, skip_b, nsm):
        blocks = []
        for t in range(tm * tn):
            mi, ni = tile_mn(t, tm, tn, grp)
            r0, c0 = mi * bm, ni * bn
            steps = [(first + s) % q for s in range(q)]

            def cond(r0=r0, steps=steps):
                for kk in steps:
                    if kk != skip_a and flag(aflag, kk * pieces + r0 // rows_p) < 1:
                        return False
                    if kk != skip_b and any(flag(bflag, kk * pieces + p) < 1 for p in range(pieces)):
                        return False
                return True

            def act(r0=r0, c0=c0, steps=steps):
                acc = sum(mm(abuf[kk, r0:r0 + bm], bbuf[kk, :, c0:c0 + bn]) for kk in steps)
                c[r0:r0 + bm, c0:c0 + bn] = acc.to(BF16)
            blocks.append((cond, act))
        sim.kernel("grid_gemm", blocks, nsm)
    return FakeKernel(launch)


# -- the scenarios ---------------------------------------------------------------------------

CFG = dict(bm=16, bn=16, bk=16, stages=2, threads=256, group=2, policy="fullrow")
CFGS = {"grid": CFG, "persistent": dict(CFG, persistent=True)}


class Env:
    def __init__(self, rank, world):
        self.rank, self.world, self.device, self.ctx = rank, world, "cpu", 0


def rnd(shape, *key):
    g = torch.Generator().manual_seed(hash(key) & 0xFFFFFFFF)
    return torch.randn(shape, generator=g).to(BF16)


def close(x, y):
    """Equal up to bf16 rounding (of the output and of the partials summed):
    a wrong block or a stale piece is off by the values' own size."""
    y = y.float()
    return torch.allclose(x.float(), y, rtol=2e-2, atol=2e-2 * float(y.abs().max()))


# after each variant's plain calls: the diagnostic calls the GPU run times
# (copies alone, kernel alone), then a plain one again
EXTRA = ("comm", "kernel", "fused")


def calls_of(op, mode, *args):
    if mode == "fused":
        op(*args)
    elif mode == "kernel":
        op.kernel_only(*args)
    else:
        op.comm_only()


def scenario_ag(sim, mods, P, calls, cfg):
    """Every piece count and plan, one after the other without a pause."""
    ag = mods["ag_gemm"]
    m_loc, K, N = 2 * 2 * CFG["bm"], 32, 2 * CFG["bn"]
    m = P * m_loc
    chunk_list = (2, 1)
    plans = ag.PLANS if P > 1 else ag.PLANS[:1]
    ops, outs = [], {}
    for p in range(P):
        sim.cur = p
        op = ag.AGGemm(Env(p, P), m, K, max(chunk_list))
        ops.append((op, torch.empty(K, N, dtype=BF16), torch.empty(m, N, dtype=BF16)))
    seq = [(ch, plan, mode) for ch in chunk_list for plan in plans for mode in ("fused",) * calls + EXTRA]
    for i, (ch, plan, mode) in enumerate(seq):
        for p in range(P):
            sim.cur = p
            op, b, c = ops[p]
            op.use(ag_kernel(sim, P, m_loc, N, ch, cfg, mods["_gemm"].tile_mn, mods["_gemm"].group_of),
                   finish_kernel(sim, P * ch), cfg, ch, plan)
            sim.host(lambda op=op, b=b, i=i, p=p: (op.shard().copy_(rnd((m_loc, K), "A", i, p)),
                                                   b.copy_(rnd((K, N), "B", i, p))), "inputs")
            calls_of(op, mode, b, c)
            if mode == "fused":
                sim.host(lambda c=c, i=i, p=p: outs.__setitem__((i, p), c.clone()), "output")
    sim.run()
    for i, (ch, plan, mode) in enumerate(seq):
        if mode != "fused":
            continue
        full = torch.cat([rnd((m_loc, K), "A", i, p) for p in range(P)])
        for p in range(P):
            want = mm(full, rnd((K, N), "B", i, p))
            assert close(outs[(i, p)], want), "ag_gemm %d pieces, %s: call %d PE %d wrong" % (ch, plan, i, p)


def scenario_rs(sim, mods, P, calls, cfg):
    """Every sub-chunk count and plan, one after the other without a pause."""
    rs = mods["gemm_rs"]
    sub_list = (2, 1)
    m_loc, K, N = 2 * 2 * CFG["bm"], 32, 2 * CFG["bn"]
    M = P * m_loc
    plans = rs.PLANS if P > 1 else rs.PLANS[:1]
    ops, outs = [], {}
    for p in range(P):
        sim.cur = p
        op = rs.GemmRS(Env(p, P), M, N, max(sub_list))
        ops.append((op, torch.empty(M, K, dtype=BF16), torch.empty(K, N, dtype=BF16),
                    torch.empty(m_loc, N, dtype=BF16)))
    seq = [(sb, plan, mode) for sb in sub_list for plan in plans for mode in ("fused",) * calls + EXTRA]
    for i, (sb, plan, mode) in enumerate(seq):
        for p in range(P):
            sim.cur = p
            op, a, b, out = ops[p]
            op.use(rs_kernel(sim, P, M, N, sb, cfg, mods["_gemm"].tile_mn, mods["_gemm"].group_of),
                   finish_kernel(sim, P * sb), cfg, sb, plan)
            sim.host(lambda a=a, b=b, i=i, p=p: (a.copy_(rnd((M, K), "A", i, p)), b.copy_(rnd((K, N), "B", i, p))),
                     "inputs")
            calls_of(op, mode, a, b, out)
            if mode == "fused":
                sim.host(lambda out=out, i=i, p=p: outs.__setitem__((i, p), out.clone()), "output")
    sim.run()
    for i, (sb, plan, mode) in enumerate(seq):
        if mode != "fused":
            continue
        total = sum(mm(rnd((M, K), "A", i, p), rnd((K, N), "B", i, p)) for p in range(P))
        for p in range(P):
            assert close(outs[(i, p)], total[p * m_loc:(p + 1) * m_loc]), \
                "gemm_rs %d sub-chunks, %s: call %d PE %d wrong" % (sb, plan, i, p)


def scenario_grid(sim, mods, P, calls, cfg, example):
    g2 = mods["_grid2d"]
    q = g2.grid_side(P)
    S = g2.PIECES * CFG["bm"] * 2
    ops, outs = [], {}
    for p in range(P):
        sim.cur = p
        env = Env(p, P)
        a, b, c = (torch.empty(S, S, dtype=BF16) for _ in range(3))
        op, place = mods[example].make(env, finish_kernel(sim, 2 * q * g2.PIECES), q, S, a, b)
        op.use(grid_kernel(sim, q, S, g2.PIECES, cfg, mods["_gemm"].tile_mn, mods["_gemm"].group_of), cfg)
        ops.append((op, place, a, b, c))
    for i in range(calls):
        for p in range(P):
            sim.cur = p
            op, place, a, b, c = ops[p]

            def inputs(a=a, b=b, place=place, i=i, p=p):
                a.copy_(rnd((S, S), "A", i, p))
                b.copy_(rnd((S, S), "B", i, p))
                place(a, b)
            sim.host(inputs, "inputs")
            op(a, b, c)
            sim.host(lambda c=c, i=i, p=p: outs.__setitem__((i, p), c.clone()), "output")
    sim.run()
    for i in range(calls):
        for p in range(P):
            r, col = divmod(p, q)
            want = sum(mm(rnd((S, S), "A", i, r * q + k), rnd((S, S), "B", i, k * q + col)) for k in range(q))
            assert close(outs[(i, p)], want), "%s: call %d PE %d wrong" % (example, i, p)


COPYENGINE = os.path.join(REPO, "python", "symm", "copyengine.py")
TIMING = os.path.join(REPO, "python", "symm", "timing.py")


def load_timing():
    """symm.timing (the package's module, read from the source tree) for a
    fake symm: it imports torch and symm when called, so it uses the fakes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("symm.timing", TIMING)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_copyengine(fake):
    """symm.copyengine (the package's module, read from the source tree) as
    the fake symm's submodule: loaded once, its `symm` then the given fake
    (the model of the current scenario) and its Side queuing on that model
    (the caller sets Side)."""
    mod = sys.modules.get("symm.copyengine")
    if mod is None or getattr(mod, "__file__", None) != COPYENGINE:
        import importlib.util
        spec = importlib.util.spec_from_file_location("symm.copyengine", COPYENGINE)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["symm.copyengine"] = mod
        spec.loader.exec_module(mod)
    mod.symm = fake
    fake.copyengine = mod
    sys.modules["symm.copyengine"] = mod
    return mod


def load_examples(sim):
    """The example modules, importing a fake symm (this model's heaps) and
    a symm.copyengine whose Side queues on the model."""
    sys.modules["symm"] = sim.fake_symm()
    sys.modules["symm.cubin"] = sys.modules["symm"].cubin
    ce = load_copyengine(sys.modules["symm"])
    ce.Side = lambda device, lanes=1: FakeSide(sim, lanes)
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import importlib
    mods = {"copyengine": ce}
    for name in ("_gemm", "_fused", "_grid2d", "ag_gemm", "gemm_rs", "cannon", "summa"):
        mods[name] = importlib.import_module(name)
    for name in ("_fused", "ag_gemm", "gemm_rs", "_grid2d"):   # imported once: this model's symm
        mods[name].symm = sys.modules["symm"]
    return mods


SCENARIOS = {"ag_gemm": (scenario_ag, (1, 2, 4)), "gemm_rs": (scenario_rs, (1, 2, 4)),
             "cannon": (lambda s, m, P, c, cfg: scenario_grid(s, m, P, c, cfg, "cannon"), (1, 4, 9)),
             "summa": (lambda s, m, P, c, cfg: scenario_grid(s, m, P, c, cfg, "summa"), (1, 4, 9))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    failures = 0
    for name, (fn, pes) in SCENARIOS.items():
        if args.only and name not in args.only:
            continue
        for P in pes:
            for seed in range(args.seeds):
                for grid, cfg in CFGS.items():
                    # few block slots, down to one: in-order dispatch is all there is (a
                    # persistent grid has one block per slot: all resident)
                    nsm = 1 + seed % 4
                    sim = Sim(P, seed, nsm)
                    mods = load_examples(sim)
                    try:
                        fn(sim, mods, P, args.calls, cfg)
                        status = "ok"
                    except Exception as e:  # noqa: BLE001 - a wrong protocol or a refused one
                        failures += 1
                        status = "FAIL: %s: %s" % (type(e).__name__, e)
                    print("%-8s P=%d seed=%d slots=%d %-10s: %s" % (name, P, seed, nsm, grid, status), flush=True)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
