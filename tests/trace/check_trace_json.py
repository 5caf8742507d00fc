#!/usr/bin/env python3
"""Check a device-trace JSON file (symm_trace_dump) against what a known
kernel must have produced.

    check_trace_json.py FILE [--pes N] [--ring BLOCKS ITERS] [--pkt] [--region NAME]
                        [--dropped PE:N ...] [--min-dropped PE:N ...]

Always: the file is Chrome-trace JSON with one named process per PE, every
complete event has a non-negative start and duration, every PE's metadata
(recorded, dropped, clock) is there and its recorded count equals its
events (regions count twice: begin and end; a wait slice of several warps
counts once per warp).

--ring BLOCKS ITERS: the ring kernel of tests/trace (and trace_json_fixture):
on every PE p, thread 0 of each block b < BLOCKS ran ITERS times: a region
(--region, default "ring"), inside it a put_signal to PE p+1 (ADD 1) and a
wait on its own signal word for >= i+1, which PE p-1's put_signal releases.
Checked: the counts per track; the order inside each iteration (region
begin <= put_signal <= wait <= region end, on one PE's clock); each wait is
named for PE p-1 and for value i+1; and across PEs, each wait ends no
earlier than the put_signal of PE p-1 that released it, within the clock
alignment's error bound (clocks aligned: without the alignment, a skewed
clock breaks this).
--pkt: the ring of packets instead (test_trace_gpu's packet ring): the
transfer is a put_pkt to PE p+1 with flag i+1, the wait one on this block's
packet slot for flag i+1, named for PE p-1 (inferred from its put_pkt).
--dropped PE:N: PE's dropped count is exactly N. --min-dropped: at least N.
Exit 0 when every check passes; prints one line per failure otherwise.
"""
import argparse
import json
import sys

FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL: " + msg)


def load(path):
    with open(path) as f:
        doc = json.load(f)
    if "traceEvents" not in doc:
        raise SystemExit("FAIL: %s has no traceEvents" % path)
    return doc


def generic(doc, pes):
    meta = doc.get("otherData", {}).get("symm_trace")
    if meta is None:
        fail("no otherData.symm_trace metadata")
        return None
    if pes is not None and meta.get("n_pes") != pes:
        fail("metadata says %s PEs, expected %d" % (meta.get("n_pes"), pes))
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    for p in range(meta.get("n_pes", 0)):
        if p not in names or not names[p].startswith("PE %d" % p):
            fail("process %d is not named 'PE %d...' (%r)" % (p, p, names.get(p)))
    per_pe = {}
    for e in doc["traceEvents"]:
        if e.get("ph") in ("X", "i"):
            if e["ts"] < 0:
                fail("event before the origin: %r" % e)
            if e.get("ph") == "X" and e["dur"] < 0:
                fail("negative duration: %r" % e)
            n = 2 if e.get("cat") == "region" and e.get("ph") == "X" and not e["args"].get("truncated") else 1
            n *= e.get("args", {}).get("warps", 1)  # waits of several warps made one slice
            per_pe[e["pid"]] = per_pe.get(e["pid"], 0) + n
    for d in meta.get("pes", []):
        if d.get("recorded") != per_pe.get(d["pe"], 0):
            fail("PE %d: metadata says %s events recorded, the file has %d" % (d["pe"], d.get("recorded"),
                                                                                per_pe.get(d["pe"], 0)))
    return meta


def clock_tolerance_us(meta):
    """What the alignment may be off by: half the worst round trip of the
    measurements, the timer's step, and 2 us for stores still landing."""
    worst = 0.0
    for d in meta.get("pes", []):
        worst = max(worst, d.get("clock_rtt_ns", 0) / 2.0 + d.get("timer_resolution_ns", 0))
    return worst / 1000.0 + 2.0


def in_regions(e, regs):
    """e starts and ends inside one of the regions (1 ns of rounding allowed)."""
    return any(r["ts"] - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1e-3 for r in regs)


def ring(doc, meta, blocks, iters, region, pkt=False):
    n = meta["n_pes"]
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    tol = clock_tolerance_us(meta)
    track = {}
    for e in xs:
        track.setdefault((e["pid"], e["tid"]), []).append(e)
    puts = {}
    put = "put_pkt " if pkt else "put_signal "
    for p in range(n):
        for b in range(blocks):
            evs = sorted(track.get((p, b * 1024), []), key=lambda e: (e["ts"], -e["dur"]))
            regs = [e for e in evs if e["cat"] == "region" and e["name"] == region]
            ps = [e for e in evs if e["cat"] == "transfer" and e["name"].startswith(put)]
            # the ring's waits: those inside its regions (the same block may
            # run other kernels of the test, e.g. warps waiting together)
            ws = [e for e in evs if e["cat"] == "wait" and in_regions(e, regs)]
            where = "PE %d block %d" % (p, b)
            if (len(regs), len(ps), len(ws)) != (iters, iters, iters):
                fail("%s: %d regions, %d %ss, %d waits; expected %d of each" % (where, len(regs), len(ps), put.strip(),
                                                                              len(ws), iters))
                continue
            puts[(p, b)] = ps
            for i in range(iters):
                r, q, w = regs[i], ps[i], ws[i]
                if not (r["ts"] <= q["ts"] <= q["ts"] + q["dur"] <= w["ts"] + 1e-3 and
                        w["ts"] + w["dur"] <= r["ts"] + r["dur"] + 1e-3):
                    fail("%s iteration %d: out of order: region [%.3f, %.3f], %s [%.3f, %.3f], wait "
                         "[%.3f, %.3f]" % (where, i, r["ts"], r["ts"] + r["dur"], put.strip(), q["ts"], q["ts"] + q["dur"],
                                           w["ts"], w["ts"] + w["dur"]))
                want_to = "-> PE %d," % ((p + 1) % n)
                if want_to not in q["name"] or q["args"].get("peer") != (p + 1) % n:
                    fail("%s iteration %d: %s %r not to PE %d" % (where, i, put.strip(), q["name"], (p + 1) % n))
                if pkt and (q["args"].get("flag") != i + 1 or q["args"].get("pkt") != 1):
                    fail("%s iteration %d: put_pkt %r: expected a packet put with flag %d" % (where, i, q["name"], i + 1))
                if pkt and (not w["name"].startswith("wait pkt@") or w["args"].get("cmp") != "=="):
                    fail("%s iteration %d: wait %r is not a packet wait (==)" % (where, i, w["name"]))
                want_from = "from PE %d " % ((p - 1) % n)
                if want_from not in w["name"] + " " or w["args"].get("expected") != i + 1:
                    fail("%s iteration %d: wait %r: expected one for %d from PE %d" % (where, i, w["name"], i + 1,
                                                                                       (p - 1) % n))
                if w["args"].get("seen", 0) < i + 1:
                    fail("%s iteration %d: wait saw %s < %d" % (where, i, w["args"].get("seen"), i + 1))
    for (p, b), ps in puts.items():
        src = ((p - 1) % n, b)
        if src not in puts:
            continue
        regs = [e for e in track[(p, b * 1024)] if e["cat"] == "region" and e["name"] == region]
        ws = sorted([e for e in track[(p, b * 1024)] if e["cat"] == "wait" and in_regions(e, regs)],
                    key=lambda e: e["ts"])
        for i, w in enumerate(ws):
            q = puts[src][i]
            if w["ts"] + w["dur"] + tol < q["ts"] + q["dur"]:
                fail("PE %d block %d iteration %d: the wait ended at %.3f us, before PE %d's %s that "
                     "released it ended at %.3f us (tolerance %.3f us): clocks not aligned" % (
                         p, b, i, w["ts"] + w["dur"], src[0], put.strip(), q["ts"] + q["dur"], tol))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--pes", type=int)
    ap.add_argument("--ring", nargs=2, type=int, metavar=("BLOCKS", "ITERS"))
    ap.add_argument("--pkt", action="store_true")
    ap.add_argument("--region", default="ring")
    ap.add_argument("--dropped", action="append", default=[])
    ap.add_argument("--min-dropped", action="append", default=[])
    args = ap.parse_args(argv)
    doc = load(args.file)
    meta = generic(doc, args.pes)
    if meta is not None:
        drops = {d["pe"]: d.get("dropped") for d in meta.get("pes", [])}
        for spec, exact in [(s, True) for s in args.dropped] + [(s, False) for s in args.min_dropped]:
            pe, n = (int(x) for x in spec.split(":"))
            got = drops.get(pe)
            if got is None or (got != n if exact else got < n):
                fail("PE %d dropped %s events, expected %s%d" % (pe, got, "" if exact else ">= ", n))
        if args.ring:
            ring(doc, meta, args.ring[0], args.ring[1], args.region, args.pkt)
    if FAILS:
        print("%d check(s) failed in %s" % (len(FAILS), args.file))
        return 1
    print("ok: %s" % args.file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
