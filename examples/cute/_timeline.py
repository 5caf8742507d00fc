"""When the copy engines move each piece of one fused call (--timeline): the
side program of a call queued op by op with a CUDA event before and after
every data copy, and events around the GEMM on the caller's stream, so one
line per PE shows when each sub-chunk (gemm_rs) or chunk (ag_gemm) became
ready to copy, when it landed, and when the GEMM ended. A probe of the
schedule, not a timing: the events themselves cost a little.

The ops are issued here rather than through the copy-engine module's Side
(examples/tilelang/_copyengine.py), which replays a captured graph of the
whole program and has no place for events between its operations."""
import ctypes

import torch

import symm

# CUstreamWaitValue_flags / CUstreamWriteValue_flags (cuda.h)
_WAIT_GEQ, _WAIT_EQ, _WRITE_DEFAULT = 0x0, 0x1, 0x0
FLAG_BYTES = 8   # a copy this small is a flag, not data


def _ev():
    return torch.cuda.Event(enable_timing=True)


def _queue_marked(lib, program, lanes):
    """Issue program's ops on the lane streams; returns [(dst, bytes, ready
    event, landed event)] of its data copies, in queue order."""
    h = [ctypes.c_void_p(s.cuda_stream) for s in lanes]
    marks = []
    for op in program.ops:
        kind, lane = op[0], op[1]
        if kind == "copy":
            big = op[4] > FLAG_BYTES
            if big:
                before = _ev()
                before.record(lanes[lane])
            symm.cubin._check(lib.cuMemcpyAsync(op[2], op[3], op[4], h[lane]), "cuMemcpyAsync")
            if big:
                after = _ev()
                after.record(lanes[lane])
                marks.append((op[2], op[4], before, after))
        elif kind in ("wait_eq", "wait_ge"):
            symm.cubin._check(lib.cuStreamWaitValue64_v2(h[lane], op[2], op[3],
                                                         _WAIT_EQ if kind == "wait_eq" else _WAIT_GEQ),
                              "cuStreamWaitValue64")
        elif kind == "write":
            symm.cubin._check(lib.cuStreamWriteValue64_v2(h[lane], op[2], op[3], _WRITE_DEFAULT),
                              "cuStreamWriteValue64")
        else:  # after
            lanes[lane].wait_stream(lanes[op[2]])
    return marks


def _line(what, pe, start, marks, labels, gemm_end, call_end):
    parts = []
    for (_, nbytes, before, after), label in zip(marks, labels):
        a, b = start.elapsed_time(before) * 1e3, start.elapsed_time(after) * 1e3
        parts.append("%s %.0f-%.0f (%.0f GB/s)" % (label, a, b, nbytes / max(b - a, 1e-3) / 1e3))
    return ("%s timeline PE %d (us from the GEMM's launch; piece ready-landed): %s; GEMM ended %.0f, call %.0f"
            % (what, pe, ", ".join(parts), start.elapsed_time(gemm_end) * 1e3, start.elapsed_time(call_end) * 1e3))


def rs_call(op, a, bt, out, what):
    """One GemmRSCE call (one PE per GPU) with its side program marked;
    returns this PE's timeline line. Labels: owner.sub-chunk."""
    lib = op.side._lib
    prog = op.program
    lanes = op.side.streams[:prog.lanes]
    main = torch.cuda.current_stream()
    start, gemm_end, call_end = _ev(), _ev(), _ev()
    for s in lanes:
        s.wait_stream(main)
    start.record(main)
    op._gemm(a, bt, out, 0, op.tiles)
    gemm_end.record(main)
    marks = _queue_marked(lib, prog, lanes)
    op._report()
    op.side.main_fill(op.rflag, 0)
    for s in lanes:
        main.wait_stream(s)
    call_end.record(main)
    call_end.synchronize()
    w, me = op.env.world, op.env.rank
    labels = ["%d.%d" % ((me + 1 + i // op.subs) % w, i % op.subs) for i in range(len(marks))]
    return _line(what, me, start, marks, labels, gemm_end, call_end)


def ag_call(op, a, bt, c, what):
    """One AGGemm call (one PE per GPU), its copies issued one by one with
    events; returns this PE's timeline line. Labels: peer.chunk."""
    op.calls += 1
    par = op.calls % 2
    copies = op.copy_tuples(a, par)
    main = torch.cuda.current_stream()
    op.epoch.add_(1)
    start, gemm_end, call_end = _ev(), _ev(), _ev()
    op.side.wait_stream(main)
    start.record(main)
    lib = symm.cubin._cuda()
    h = ctypes.c_void_p(op.side.cuda_stream)
    marks = []
    for dst, src, n in copies:
        if n > FLAG_BYTES:
            before = _ev()
            before.record(op.side)
        symm.cubin._check(lib.cuMemcpyAsync(ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(n), h),
                          "cuMemcpyAsync")
        if n > FLAG_BYTES:
            after = _ev()
            after.record(op.side)
            marks.append((dst, n, before, after))
    op.launch(a, bt, c)
    gemm_end.record(main)
    main.wait_stream(op.side)
    call_end.record(main)
    call_end.synchronize()
    labels = ["%d.%d" % (q, ch) for q in op.push_peers() for ch in range(op.chunks)]
    return _line(what, op.env.rank, start, marks, labels, gemm_end, call_end)


def report(env, lines):
    """Every PE's timeline line(s), printed by PE 0 in PE order."""
    text = "\n".join(lines).encode()
    allt = symm.host_allgather(len(text).to_bytes(8, "little"))
    width = max(int.from_bytes(x, "little") for x in allt)
    got = symm.host_allgather(text.ljust(width, b" "))
    if env.rank == 0:
        for t in got:
            print(t.decode().rstrip(), flush=True)
