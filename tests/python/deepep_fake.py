"""A CPU stand-in for symm under symm.moe.deep_ep, for tests without a GPU.

Ranks are threads of one process. Each gets a FakeEngine in place of symm's:
its HighThroughput / AllToAll handles and its all_gather / all_to_all work on
CPU tensors and keep symm's semantics (symm_moe.h), so the Buffer's own logic
(layouts, counts, handles, slots, outputs, errors) runs as it does on GPUs:

  - a handle's creation is collective and its configuration must match on
    every rank (else every rank raises, as symm_moe_create does);
  - the call order of a handle is symm's (a dispatch may skip the combine of
    the one before; a combine works on the last dispatch, once);
  - normal mode: rows ordered by source rank, then token; indices mapped to
    the receiver's local experts (-1 elsewhere); weights as sent; (source,
    token); counts per local expert; combine sums in float32 in rank order;
    receive buffers reused by the next dispatch, filled with garbage first;
  - low latency: rows per local expert ordered by source rank, then token;
    -1 slots skipped, other indices outside the experts raise; routes;
    combine sums weight x row in float32 in slot order;
  - send and receive halves: a send posts, a receive waits for every rank.

run_ranks(n, fn) runs fn(group) on n threads (group: FakeGroup, what
Buffer(group) takes once install() has pointed symm.moe.deep_ep at this).
"""
import contextlib
import os
import sys
import threading
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import symm
from symm.moe import check_combine, check_dispatch


class World:
    """The ranks' meeting place: a value posted per (key, rank), read by all."""

    def __init__(self, n, timeout=60.0):
        self.n, self.timeout = n, timeout
        self.cv = threading.Condition()
        self.boards, self.reads = {}, {}
        self.failed = None

    def post(self, key, rank, value):
        with self.cv:
            board = self.boards.setdefault(key, {})
            if rank in board:
                raise RuntimeError("rank %d posted %r twice" % (rank, key))
            board[rank] = value
            self.cv.notify_all()

    def wait(self, key, rank):
        with self.cv:
            ok = self.cv.wait_for(lambda: self.failed is not None or len(self.boards.get(key, {})) == self.n,
                                  timeout=self.timeout)
            if self.failed is not None:
                raise RuntimeError("rank %d stops: %s" % (rank, self.failed))
            if not ok:
                raise TimeoutError("rank %d waited %.0f s for %r: the ranks' calls differ" % (rank, self.timeout, key))
            vals = [self.boards[key][r] for r in range(self.n)]
            self.reads[key] = self.reads.get(key, 0) + 1
            if self.reads[key] == self.n:
                del self.boards[key], self.reads[key]
            return vals

    def exchange(self, key, rank, value):
        self.post(key, rank, value)
        return self.wait(key, rank)

    def fail(self, why):
        with self.cv:
            if self.failed is None:
                self.failed = why
            self.cv.notify_all()


class FakeGroup:
    """What Buffer(group) gets: rank() and size() as a ProcessGroup has them."""

    def __init__(self, world, rank):
        self.world, self._rank = world, rank

    def rank(self):
        return self._rank

    def size(self):
        return self.world.n


class FakeEvent:
    pass


class FakeCuda:
    """Streams and events that do nothing (CPU work runs in order)."""

    capturing_now = False

    def __init__(self):
        self.streams = 0

    def current(self):
        return "current"

    def new_stream(self):
        self.streams += 1
        return "comm%d" % self.streams

    def use(self, stream):
        return contextlib.nullcontext()

    def wait_stream(self, waiter, stream):
        pass

    def record(self, stream):
        return FakeEvent()

    def wait_event(self, stream, event):
        assert isinstance(event, FakeEvent), event

    def record_stream(self, t, stream):
        pass

    def capturing(self):
        return self.capturing_now

    def synchronize(self):
        pass

    def read(self, t):
        return t.reshape(-1).clone()


def _bad(call, msg):
    return symm.InvalidArgumentError(call, symm.InvalidArgumentError.status, msg)


# symm's call order (moe.h): the step a handle is at, and what may come next
DS, DR, CS, CR = range(4)


def _order(call, at, combine, send, recv):
    if not send and not recv:
        raise _bad(call, "do_send and do_recv cannot both be false")
    first = CS if combine else DS
    want = first if send else first + 1
    skips = not combine and send and at == CS
    if at != want and not skips:
        raise _bad(call, "out of order")
    return (first + 2) % 4 if recv else first + 1


def _garbage(shape, dtype, gen):
    """Random bytes as a tensor of dtype (what reused receive buffers hold)."""
    size = torch.empty((), dtype=dtype).element_size()
    n = 1
    for d in shape:
        n *= d
    raw = torch.randint(0, 256, (n * size,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype).view(shape).clone()


class FakeEngine:
    def __init__(self, group):
        self.world, self.rank, self.n = group.world, group.rank(), group.size()
        self.device = torch.device("cpu")
        self.share = 16
        self.cuda = FakeCuda()
        self.created = 0
        self.calls = {"ag": 0, "a2a": 0}
        self.gen = torch.Generator().manual_seed(1000 + self.rank)
        self.handles = []
        self.pool_live, self.pool_freed = set(), 0

    def _create(self, cfg):
        key = ("create", self.created)
        self.created += 1
        cfgs = self.world.exchange(key, self.rank, cfg)
        for p, c in enumerate(cfgs):
            if c != cfgs[0]:
                raise symm.MismatchError("symm_moe_create", symm.MismatchError.status,
                                         "configuration %r on PE 0 but %r on PE %d" % (cfgs[0], c, p))
        return key[1]

    def ht(self, num_experts, k, hidden, max_tokens, x_dtype, scales):
        h = FakeHT(self, num_experts, k, hidden, max_tokens, x_dtype, scales)
        self.handles.append(h)
        return h

    def ll(self, max_tokens, num_experts, k, hidden, x_dtype, scales):
        h = FakeLL(self, max_tokens, num_experts, k, hidden, x_dtype, scales)
        self.handles.append(h)
        return h

    def pool_alloc(self, nbytes):
        """Collective, like symm.tensor: every rank asks for the same bytes."""
        key = ("pool", self.calls.setdefault("pool", 0))
        self.calls["pool"] += 1
        got = self.world.exchange(key, self.rank, nbytes)
        if any(g != got[0] for g in got):
            raise symm.MismatchError("symm.tensor", symm.MismatchError.status, "sizes %s differ" % (got,))
        t = _garbage((nbytes,), torch.uint8, self.gen)
        self.pool_live.add(t.data_ptr())
        return t

    def pool_free(self, t):
        key = ("pool_free", self.calls.setdefault("pool_free", 0))
        self.calls["pool_free"] += 1
        self.world.exchange(key, self.rank, t.numel())
        self.pool_live.discard(t.data_ptr())
        self.pool_freed += 1

    def layout(self, idx, num_experts, in_rank, per_rank, per_expert):
        """symm_moe_layout's results by torch: a value outside the experts (-1
        among them) counts nowhere, a token once per rank; its refusals."""
        if idx.size(0) and idx.size(1) and idx.dtype not in (torch.int32, torch.int64):
            raise _bad("symm_moe_layout", "indices dtype %s" % idx.dtype)
        if num_experts < 1 or num_experts % self.n:
            raise _bad("symm_moe_layout", "num_experts %d is not a positive multiple of num_ranks %d"
                       % (num_experts, self.n))
        self.calls["layout"] = self.calls.get("layout", 0) + 1
        T, n, E = idx.size(0), self.n, num_experts
        e = idx.long().masked_fill((idx < 0) | (idx >= E), E)  # an extra column / count, dropped
        full = torch.zeros((T, n + 1), dtype=torch.bool)
        full.scatter_(1, torch.div(e, E // n, rounding_mode="floor"), True)
        in_rank.copy_(full[:, :n])
        per_rank.copy_(in_rank.sum(dim=0, dtype=torch.int32))
        per_expert.copy_(torch.bincount(e.reshape(-1), minlength=E + 1)[:E].to(torch.int32))

    def all_gather(self, out, inp):
        key = ("ag", self.calls["ag"])
        self.calls["ag"] += 1
        vals = self.world.exchange(key, self.rank, inp.detach().clone())
        out.copy_(torch.cat([v.reshape(-1) for v in vals]))

    def a2av_counts(self, out_rows, in_rows, row):
        return list(out_rows), list(in_rows), row

    def all_to_allv(self, out, inp, counts):
        """inp's rows [sum(in_rows[:p]), +in_rows[p]) to rank p, landing at row
        sum(out_rows[:p]) of its out; what a rank sends must be what its peer
        expects (else every rank raises, as a mismatched exchange would fail)."""
        out_rows, in_rows, row = counts
        key = ("a2av", self.calls.setdefault("a2av", 0))
        self.calls["a2av"] += 1
        flat, pieces, at = inp.detach().reshape(-1), [], 0
        if flat.numel() < sum(in_rows) * row:
            raise _bad("symm_all_to_allv", "input has %d elements, below the %d sent" % (flat.numel(),
                                                                                      sum(in_rows) * row))
        for c in in_rows:
            pieces.append(flat[at * row:(at + c) * row].clone())
            at += c
        vals = self.world.exchange(key, self.rank, pieces)
        o, at = out.view(-1), 0
        for p in range(self.n):
            piece = vals[p][self.rank]
            if piece.numel() != out_rows[p] * row:
                raise _bad("symm_all_to_allv", "PE %d sends %d elements, %d expected" % (p, piece.numel(),
                                                                                        out_rows[p] * row))
            o[at * row:(at + out_rows[p]) * row].copy_(piece)
            at += out_rows[p]

    def all_to_all(self, out, inp):
        key = ("a2a", self.calls["a2a"])
        self.calls["a2a"] += 1
        vals = self.world.exchange(key, self.rank, inp.detach().clone().view(self.n, -1))
        o = out.view(self.n, -1)
        for p in range(self.n):
            o[p].copy_(vals[p][self.rank])


class _FakeHandle:
    def __init__(self, eng, cfg, call):
        self.eng, self.call = eng, call
        self.id = eng._create(cfg)
        self.at = DS
        self.epoch = 0
        self.sms = eng.share
        self.destroyed = False

    def set_num_sms(self, num_sms):
        if not isinstance(num_sms, int) or isinstance(num_sms, bool):
            raise TypeError("set_num_sms: num_sms must be an int")
        if num_sms < 0 or num_sms > self.eng.share:
            raise _bad("symm_moe_set_num_sms", "num_sms %d is not in 0..%d" % (num_sms, self.eng.share))
        self.sms = num_sms or self.eng.share

    def get_num_sms(self):
        return self.sms

    def heap_bytes(self):
        return 4096

    def destroy(self):
        self.destroyed = True

    def _alive(self):
        if self.destroyed:
            raise ValueError("%s: the object was destroyed" % self.call)

    def _key(self, what):
        return ("h", self.id, what, self.epoch)


class FakeHT(_FakeHandle):
    """symm.moe.HighThroughput's interface and semantics on CPU tensors."""

    def __init__(self, eng, num_experts, k, hidden, max_tokens, x_dtype, scales):
        super().__init__(eng, ("ht", num_experts, k, hidden, max_tokens, str(x_dtype), bool(scales)),
                         "HighThroughput")
        n = eng.n
        self.E, self.K, self.H, self.M, self.x_dtype, self.scaled = num_experts, k, hidden, max_tokens, x_dtype, scales
        self.local_experts = num_experts // n
        self.first_expert = eng.rank * self.local_experts
        self.capacity = cap = max_tokens * n
        self.cols = (hidden + 127) // 128
        g = eng.gen
        self.rx = _garbage((cap, hidden), x_dtype, g)
        self.rs = _garbage((cap, self.cols), torch.float32, g) if scales else None
        self.ridx = _garbage((cap, k), torch.int32, g)
        self.rw = _garbage((cap, k), torch.float32, g)
        self.rsrc = _garbage((cap, 2), torch.int32, g)
        self.nrecv = torch.full((1,), -7, dtype=torch.int32)
        self.nper = torch.full((self.local_experts,), -7, dtype=torch.int32)
        self.state = None
        self.sent_tokens = 0
        self.into = (None, None)

    def _views(self):
        rx = self.rx if self.into[0] is None else self.into[0]
        rs = self.rs if self.into[1] is None else self.into[1]
        return rx, rs, self.ridx, self.rw, self.rsrc, self.nrecv, self.nper

    def dispatch(self, x, topk_idx, topk_weights=None, x_scale=None, do_send=True, do_recv=True, recv_x=None,
                 recv_x_scale=None):
        call = "HighThroughput.dispatch"
        self._alive()
        if do_send:
            for t, want, name in ((recv_x, self.rx, "recv_x"), (recv_x_scale, self.rs, "recv_x_scale")):
                if t is not None and (want is None or t.dtype != want.dtype or t.size(0) < want.size(0) or
                                      t.size(1) != want.size(1) or t.stride() != want.stride() or
                                      t.untyped_storage().data_ptr() not in self.eng.pool_live):
                    raise _bad("symm_moe_ht_dispatch_into", "%s is not a receive buffer for this handle" % name)
            self.into = (recv_x, recv_x_scale)
            # the peers store into them from the send on: what was there is gone
            for t in self.into:
                if t is not None:
                    t.copy_(_garbage(tuple(t.shape), t.dtype, self.eng.gen))
        elif (recv_x is not None and recv_x is not self.into[0]) or \
                (recv_x_scale is not None and recv_x_scale is not self.into[1]):
            raise _bad("symm_moe_ht_dispatch_into", "the receive half got other receive buffers than its send half")
        if x.dtype != self.x_dtype or x.dim() != 2 or x.size(1) != self.H:
            raise TypeError("%s: x is %s %s; the object takes %s [*, %d]" % (call, x.dtype, tuple(x.shape),
                                                                             self.x_dtype, self.H))
        T = x.size(0)
        if topk_idx.dtype not in (torch.int64, torch.int32) or tuple(topk_idx.shape) != (T, self.K) or \
                not topk_idx.is_contiguous():
            raise ValueError("%s: topk_idx %s %s" % (call, topk_idx.dtype, tuple(topk_idx.shape)))
        if T > self.M:
            raise _bad("symm_moe_ht_dispatch", "num_tokens %d is above max_num_tokens %d" % (T, self.M))
        if self.scaled != (x_scale is not None):
            raise ValueError("%s: scales %s" % (call, "missing" if self.scaled else "not taken"))
        if x_scale is not None and (x_scale.dtype != torch.float32 or tuple(x_scale.shape) != (T, self.cols)):
            raise ValueError("%s: x_scale %s %s" % (call, x_scale.dtype, tuple(x_scale.shape)))
        if topk_weights is not None and (topk_weights.dtype != torch.float32 or
                                         tuple(topk_weights.shape) != (T, self.K) or
                                         not topk_weights.is_contiguous()):
            raise ValueError("%s: topk_weights %s %s" % (call, topk_weights.dtype, tuple(topk_weights.shape)))
        self.at = _order("symm_moe_ht_dispatch", self.at, False, do_send, do_recv)
        eng = self.eng
        if do_send:
            self.epoch += 1
            eng.world.post(self._key("d"), eng.rank, (x.clone(), None if x_scale is None else x_scale.clone(),
                                                      topk_idx.long().clone(),
                                                      None if topk_weights is None else topk_weights.clone()))
            self.sent_tokens = T
        if do_recv:
            self._receive(eng.world.wait(self._key("d"), eng.rank))
        return self._views()

    def _recv_copy(self, rows, src_token, topk_idx, topk_weights, counts):
        """symm_moe_ht_recv_copy: the received metadata out of the buffers
        (rows at or past num_recv: -1, -1, 0); its refusals."""
        self._alive()
        if rows > self.capacity:
            raise _bad("symm_moe_ht_recv_copy", "rows %d is above the receive capacity %d" % (rows, self.capacity))
        if topk_idx is not None and topk_idx.dtype not in (torch.int32, torch.int64):
            raise _bad("symm_moe_ht_recv_copy", "indices dtype %s" % topk_idx.dtype)
        live = (torch.arange(rows) < int(self.nrecv[0])).unsqueeze(1)
        idx = torch.where(live, self.ridx[:rows], torch.full((), -1, dtype=torch.int32))
        if src_token is not None:
            src_token[:rows] = torch.where(live[:, 0], self.rsrc[:rows, 1], torch.full((), -1, dtype=torch.int32))
        if topk_idx is not None:
            topk_idx[:rows] = idx
        if topk_weights is not None:
            topk_weights[:rows] = torch.where(idx >= 0, self.rw[:rows], torch.zeros(()))
        if counts is not None:
            counts[0] = self.nrecv[0]
            counts[1:1 + self.local_experts] = self.nper

    def _prepare(self, topk_idx, topk_weights=None):
        return (topk_idx, topk_weights)

    def _dispatch_prepared(self, prep, x, x_scale=None, recv_x=None, recv_x_scale=None, checked=False):
        return self.dispatch(x, prep[0], prep[1], x_scale=x_scale, recv_x=recv_x, recv_x_scale=recv_x_scale)

    def _combine_checked(self, y, out, weights=None, out_weights=None):
        return self.combine(y, out=out, weights=weights, out_weights=out_weights)

    def _receive(self, sent):
        me, L, E, first = self.eng.rank, self.local_experts, self.E, self.first_expert
        rows, srcs, per = [], [], torch.zeros(L, dtype=torch.int64)
        masks = []
        for s, (x, sc, idx, w) in enumerate(sent):
            valid = (idx >= 0) & (idx < E)
            bad = ~valid & (idx != -1)
            if bad.any():
                raise _bad("symm_moe_ht_dispatch", "indices outside [0, num_experts %d) on PE %d" % (E, s))
            dest = torch.where(valid, torch.div(idx, L, rounding_mode="floor"), torch.full_like(idx, -1))
            masks.append(dest)
            mine = (dest == me)
            for t in mine.any(dim=1).nonzero().flatten().tolist():
                loc = torch.where(mine[t], idx[t] - first, torch.full_like(idx[t], -1)).to(torch.int32)
                rows.append((x[t], None if sc is None else sc[t], loc,
                             torch.zeros(self.K) if w is None else w[t]))
                srcs.append((s, t))
            local = idx[mine] - first
            per += torch.bincount(local, minlength=L)
        R = len(rows)
        if R > self.capacity:
            raise _bad("symm_moe_ht_dispatch", "%d rows to receive, above max_recv_tokens %d" % (R, self.capacity))
        rx, rs = self._views()[:2]
        for i, (xr, sr, li, wr) in enumerate(rows):
            rx[i] = xr
            if sr is not None:
                rs[i] = sr
            self.ridx[i] = li
            self.rw[i] = wr
            self.rsrc[i] = torch.tensor(srcs[i], dtype=torch.int32)
        self.nrecv.fill_(R)
        self.nper.copy_(per.to(torch.int32))
        self.state = {"srcs": srcs, "dest": masks[me], "T": sent[me][0].size(0)}

    def combine(self, y, out=None, out_dtype=torch.bfloat16, do_send=True, do_recv=True, weights=None,
                out_weights=None):
        call = "HighThroughput.combine"
        self._alive()
        if y.dtype not in (torch.bfloat16, torch.float16) or y.dim() != 2 or y.size(1) != self.H:
            raise TypeError("%s: y is %s %s" % (call, y.dtype, tuple(y.shape)))
        eng, st = self.eng, self.state
        T = st["T"] if st is not None else 0
        if weights is not None:  # symm_moe_ht_combine_weights' checks
            if weights.dtype != torch.float32 or weights.dim() != 2 or weights.size(1) > self.K:
                raise _bad("symm_moe_ht_combine_weights", "weights %s %s: float32 with at most %d columns"
                           % (weights.dtype, tuple(weights.shape), self.K))
            if out_weights is None:
                out_weights = torch.empty((T, weights.size(1)), dtype=torch.float32)
            if weights.size(0) < y.size(0) or out_weights.size(0) < T or out_weights.size(1) != weights.size(1):
                raise _bad("symm_moe_ht_combine_weights", "weights has %d rows (y %d), out_weights %s (tokens %d)"
                           % (weights.size(0), y.size(0), tuple(out_weights.shape), T))
        self.at = _order("symm_moe_ht_combine", self.at, True, do_send, do_recv)
        if out is None:
            out = torch.empty((T, self.H), dtype=out_dtype)
        if out.size(0) < T:
            raise _bad("symm_moe_ht_combine", "out has %d rows, below the dispatch's num_tokens %d"
                       % (out.size(0), T))
        if do_send:
            R = len(st["srcs"])
            if y.size(0) < R:
                raise _bad("symm_moe_ht_combine", "%d rows were received, but y has %d" % (R, y.size(0)))
            eng.world.post(self._key("c"), eng.rank, (y[:R].clone(), list(st["srcs"]),
                                                     None if weights is None else weights[:R].clone()))
        if do_recv:
            back = eng.world.wait(self._key("c"), eng.rank)
            acc = torch.zeros((T, self.H), dtype=torch.float32)
            wacc = None if weights is None else torch.zeros((T, weights.size(1)), dtype=torch.float32)
            dest = st["dest"]
            for r, (yr, srcs, wr) in enumerate(back):  # rank order, as the kernels sum
                where = {t: i for i, (s, t) in enumerate(srcs) if s == eng.rank}
                for t in range(T):
                    if (dest[t] == r).any():
                        acc[t] += yr[where[t]].float()
                        if wacc is not None:
                            wacc[t] += wr[where[t]]
            out[:T] = acc.to(out.dtype)
            if wacc is not None:
                out_weights[:T] = wacc
        return out if weights is None else (out, out_weights)


class FakeLL(_FakeHandle):
    """symm.moe.AllToAll's interface and semantics (dp_size 1) on CPU tensors."""

    def __init__(self, eng, max_tokens, num_experts, k, hidden, x_dtype, scales):
        super().__init__(eng, ("ll", max_tokens, num_experts, k, hidden, str(x_dtype), bool(scales)), "AllToAll")
        n = eng.n
        self.M, self.E, self.K, self.H, self.x_dtype, self.scaled = max_tokens, num_experts, k, hidden, x_dtype, scales
        self.local_experts = num_experts // n
        self.first_expert = eng.rank * self.local_experts
        self.rows = max_tokens * n
        self.spec = {"local_experts": self.local_experts, "hidden_dim": hidden, "experts_per_token": k,
                     "has_scales": bool(scales), "scale_cols": (hidden + 127) // 128, "rows": self.rows}
        self._routes = _garbage((self.local_experts, self.rows), torch.int64, eng.gen)
        self.state = None

    def routes(self):
        return self._routes

    def dispatch(self, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices, bound_m,
                 do_send=True, do_recv=True):
        self._alive()
        idx = check_dispatch(self.spec, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale,
                             indices, bound_m)
        if dp_x.dtype != self.x_dtype:
            raise _bad("symm_moe_dispatch", "dp_x is %s, the handle takes %s" % (dp_x.dtype, self.x_dtype))
        if dp_x.size(0) > self.M:
            raise _bad("symm_moe_dispatch", "num_tokens %d is above max_num_tokens %d" % (dp_x.size(0), self.M))
        self.at = _order("symm_moe_dispatch", self.at, False, do_send, do_recv)
        eng = self.eng
        if do_send:
            self.epoch += 1
            u = idx.to(torch.int64) & 0xffffffff
            eng.world.post(self._key("d"), eng.rank, (dp_x.clone(), None if dp_x_scale is None else
                                                      dp_x_scale.clone(), u))
        if do_recv:
            sent = eng.world.wait(self._key("d"), eng.rank)
            L, first, E = self.local_experts, self.first_expert, self.E
            lists = [[] for _ in range(L)]
            for s, (x, sc, u) in enumerate(sent):
                for t in range(u.size(0)):
                    seen = set()
                    for k in range(self.K):
                        e = int(u[t, k])
                        if e >= E:
                            if e != 0xffffffff:
                                raise _bad("symm_moe_dispatch", "indices[%d][%d] = %d is outside [0, num_experts %d)"
                                           % (t, k, e, E))
                            continue
                        if e in seen:
                            raise _bad("symm_moe_dispatch", "indices[%d][%d] = %d repeats" % (t, k, e))
                        seen.add(e)
                        if e // L == eng.rank:
                            lists[e - first].append((s, k, t))
            for l, lst in enumerate(lists):
                out_expert_num_tokens[l] = len(lst)
                for r, (s, k, t) in enumerate(lst):
                    x, sc, _ = sent[s]
                    out_expert_x[l, r] = x[t]
                    if sc is not None:
                        out_expert_x_scale[l, r] = sc[t]
                    self._routes[l, r] = s | (k << 16) | (t << 32)
            self.state = {"lists": lists, "T": dp_x.size(0)}

    def combine(self, out_tokens, indices, weights, expert_y, bound_m, do_send=True, do_recv=True):
        self._alive()
        idx = check_combine(self.spec, out_tokens, indices, weights, expert_y, bound_m)
        self.at = _order("symm_moe_combine", self.at, True, do_send, do_recv)
        eng, st = self.eng, self.state
        if do_send:
            back = {}
            for l, lst in enumerate(st["lists"]):
                for r, (s, k, t) in enumerate(lst):
                    back[(s, t, k)] = expert_y[l, r].clone()
            eng.world.post(self._key("c"), eng.rank, back)
        if do_recv:
            got = eng.world.wait(self._key("c"), eng.rank)
            u = idx.to(torch.int64) & 0xffffffff
            L = self.local_experts
            for t in range(u.size(0)):
                acc = torch.zeros(self.H, dtype=torch.float32)
                seen = set()
                for k in range(self.K):
                    e = int(u[t, k])
                    if e >= self.E or e in seen:
                        continue
                    seen.add(e)
                    acc += weights[t, k] * got[e // L][(eng.rank, t, k)].float()
                out_tokens[t] = acc.to(out_tokens.dtype)


class _Unrun(TorchDispatchMode):
    """What a CUDA graph capture does to the torch work symm.moe.deep_ep
    issues in it: none of it runs. An op's fresh outputs are made with the
    shapes and dtypes it would give (on the meta device) and hold garbage
    (-1, False, NaN); writes into existing tensors do not happen; views are
    views. Work issued by the stand-in (symm's part) runs as it would eagerly."""

    _DEEP_EP = os.path.join("symm", "moe", "deep_ep.py")
    _TORCH = os.sep + "torch" + os.sep

    def _from_deep_ep(self):
        f = sys._getframe(2)
        while f is not None and self._TORCH in f.f_code.co_filename:
            f = f.f_back
        return f is not None and f.f_code.co_filename.endswith(self._DEEP_EP)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if not self._from_deep_ep() or any(r.alias_info is not None and not r.alias_info.is_write
                                           for r in schema.returns):
            return func(*args, **kwargs)
        written = [args[i] if i < len(args) else kwargs.get(a.name) for i, a in enumerate(schema.arguments)
                   if a.alias_info is not None and a.alias_info.is_write]
        if written:
            return written[0] if len(schema.returns) == 1 else tuple(written)

        def meta(v):
            if isinstance(v, torch.Tensor):
                return torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device="meta")
            if isinstance(v, torch.device):
                return torch.device("meta")
            return v
        shaped = func(*tree_map(meta, args), **tree_map(meta, kwargs))

        def garbage(o):
            if not isinstance(o, torch.Tensor):
                return o
            t = torch.empty_strided(o.size(), o.stride(), dtype=o.dtype)
            return t.fill_(False if o.dtype == torch.bool else -1 if not o.dtype.is_floating_point else float("nan"))
        return tree_map(garbage, shaped)


@contextlib.contextmanager
def fake_capture(buf):
    """Buffer buf's calls made as if captured into a CUDA graph (no replay on the CPU)."""
    buf._cuda.capturing_now = True
    try:
        with _Unrun():
            yield
    finally:
        buf._cuda.capturing_now = False


def install(monkeypatch):
    """Point symm.moe.deep_ep at the stand-in (for one test)."""
    import symm.moe.deep_ep as dep
    monkeypatch.setattr(dep, "_engine_factory", lambda group, comm, call: FakeEngine(group))
    monkeypatch.setattr(dep, "_cuda_factory", FakeCuda)
    return dep


def run_ranks(n, fn, timeout=120.0):
    """fn(group) on n threads, one per rank; the first failure is raised
    (with its rank and traceback), the others stop at their next wait."""
    world = World(n, timeout=timeout / 2)
    results, errors = [None] * n, [None] * n

    def body(r):
        try:
            results[r] = fn(FakeGroup(world, r))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[r] = (e, traceback.format_exc())
            world.fail("rank %d failed: %s: %s" % (r, type(e).__name__, e))

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if any(t.is_alive() for t in threads):
        world.fail("timeout")
        raise TimeoutError("ranks still running after %.0f s" % timeout)
    first = [(r, e) for r, e in enumerate(errors) if e is not None and "rank %d stops" % r not in str(e[0])]
    if not first:
        first = [(r, e) for r, e in enumerate(errors) if e is not None]
    if first:
        r, (e, tb) = first[0]
        raise AssertionError("rank %d of %d: %s: %s\n%s" % (r, n, type(e).__name__, e, tb)) from e
    return results
