#!/usr/bin/env python3
"""What one timed moe_ll call holds on the GPU, from `nsys stats --report cuda_gpu_trace
--format csv` output: per stream, each kind of operation (kernel, memset, copy) with its count
and median duration, and the median idle gap between each pair of consecutive operations, so
a launch gap or an extra node shows up beside the kernel's own time.

    python3 scripts/moe_ll_nsys.py trace.csv [more.csv ...]
"""
import csv
import re
import statistics
import sys
from collections import defaultdict


def short(name):
    # kernel names carry template and argument lists; the base name is what tells them apart
    name = re.sub(r"\(.*", "", name.strip())
    name = re.sub(r"<.*", "", name)
    name = re.sub(r"^(void|static)\s+", "", name)
    return name.split("::")[-1] or "?"


def col(header, *keys):
    for k in keys:
        for i, h in enumerate(header):
            if h.strip().lower().startswith(k.lower()):
                return i
    return None


def load(path):
    rows = []
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.strip()]
    # nsys prints a note or two before the CSV header; the header names Start and Duration
    start = next((i for i, ln in enumerate(lines) if "Start" in ln and "Duration" in ln), None)
    if start is None:
        return rows
    rd = csv.reader(lines[start:])
    header = next(rd)
    i_s, i_d, i_n = col(header, "Start"), col(header, "Duration"), col(header, "Name")
    i_dev, i_ctx, i_st = col(header, "Device"), col(header, "Ctx", "Context"), col(header, "Strm", "Stream")
    if None in (i_s, i_d, i_n):
        return rows
    for r in rd:
        try:
            s, d = float(r[i_s]), float(r[i_d])
        except (ValueError, IndexError):
            continue
        key = tuple(r[i] if i is not None and i < len(r) else "" for i in (i_dev, i_ctx, i_st))
        rows.append((key, s, d, short(r[i_n])))
    return rows


def us(v):
    return f"{v / 1000.0:7.2f}"


def main(paths):
    rows = []
    for p in paths:
        rows += load(p)
    if not rows:
        print("no GPU operations in the trace")
        return 1
    streams = defaultdict(list)
    for key, s, d, n in rows:
        streams[key].append((s, d, n))
    # the busiest streams are the timed ones; the rest (setup copies) say little
    for key, ops in sorted(streams.items(), key=lambda kv: -len(kv[1]))[:4]:
        ops.sort()
        dur, gap = defaultdict(list), defaultdict(list)
        for i, (s, d, n) in enumerate(ops):
            dur[n].append(d)
            if i:
                ps, pd, pn = ops[i - 1]
                g = s - (ps + pd)
                if g < 1e6:  # a gap of a millisecond or more is host work between replays
                    gap[(pn, n)].append(g)
        print(f"stream device/ctx/stream {'/'.join(key)}: {len(ops)} operations")
        print("  operation                                   count  median us")
        for n, v in sorted(dur.items(), key=lambda kv: -len(kv[1])):
            print(f"  {n[:42]:42s} {len(v):6d}  {us(statistics.median(v))}")
        print("  idle gap: before -> after                                   count  median us")
        for (a, b), v in sorted(gap.items(), key=lambda kv: -len(kv[1]))[:10]:
            print(f"  {a[:28]:28s} -> {b[:28]:28s} {len(v):6d}  {us(statistics.median(v))}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
