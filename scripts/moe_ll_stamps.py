#!/usr/bin/env python3
"""Sum up the stage times the low-latency MoE kernels print with SYMM_MOE_LL_PROBE=stamps.

Each block prints one line per kernel for one call (src/moe/moe_ll.cuh, ll_stamps_print):
  llstamp <kernel> E <experts> M <max tokens> pe <pe> block <b> t0 <ns> d <d1> ... <d27>
(d: ns since the block's start; -1: the block did not reach that stage). For every kernel,
shape and PE this prints, per stage, when the first and the last block reached it, counted
from the first block's start (us), and the spread of the blocks' starts. Stage names follow
the LLS_* stamps of moe_ll.cuh.

  python3 scripts/moe_ll_stamps.py LOG...
"""
import sys
from collections import defaultdict

STAGES = {
    "dispatch": ["loads issued", "indices staged", "lists posted", "row PEs known", "x stores issued", "send done",
                 "counts seen", "scanned", "entries seen", "rows copied", "end",
                 # the finer stamps (-DSYMM_MOE_LL_FINE_STAMPS=1)
                 "lists entered", "t0 warp's query summed", "rows barrier", "t0 mask", "t0 x prefetch in",
                 "count waits begin", "t0 entry taken", "t0 flag seen", "copy: t0 loads in", "copy: t0 x done"],
    "combine": ["recv loads", "counts scanned", "rows located", "rows sent", "flags seen", "end"],
    # the big combine (symm__k_ll_combine_big: calls of 256 routes and more)
    "combine-big": ["recv loads", "counts scanned", "rows located", "rows sent", "flags seen", "end",
                    "t0 first batch stored", "first batch's flags released", "t0 first chunk summed"],
    # the partial combine (symm__k_ll_combine_part: SYMM_MOE_LL_COMBINE=partial)
    "combine-part": ["-", "weights posted, tables built", "first chunk's routes located", "rows sent",
                     "heads' flags seen", "end", "first chunk's weights in"],
    # the small handles' kernels (symm__k_ll_dispatch_small, symm__k_ll_combine_small)
    "dispatch-small": ["loads issued", "epoch and indices in", "headers posted", "row PEs known", "x stores issued",
                       "send done", "headers seen", "routes placed", "first slice polled", "rows copied", "-",
                       "header routes counted", "end", "dependency met",
                       # the finer stamps (-DSYMM_MOE_LL_FINE_STAMPS=1)
                       "t0 header poll", "t0 header 0 seen", "t0 warp's entries placed", "copy: first pair",
                       "header route checked", "copy: first pair stored", "header address", "prologue addresses",
                       "copy: unit located", "recv loads out", "routes noted", "expert counts stored"],
    "combine-small": ["recv loads", "loads issued", "first route read", "rows sent", "setup done", "-",
                      "packets polled", "summed", "end", "plan", "packets asked", "setup barrier",
                      "routes checked", "dependency met", "recv barrier", "products shared",
                      "prologue addresses"],
}


def main(paths):
    groups = defaultdict(list)
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                w = line.split()
                if "llstamp" not in w:  # symmrun prefixes each line with "[rank] "
                    continue
                w = w[w.index("llstamp"):]
                if len(w) < 14:
                    continue
                try:
                    key = (w[1], int(w[3]), int(w[5]), int(w[7]))
                    t0 = int(w[11])
                    d = [int(x) for x in w[13:]]
                except ValueError:
                    continue
                groups[key].append((t0, d))
    if not groups:
        print("moe_ll_stamps: no llstamp lines (SYMM_MOE_LL_PROBE=stamps not set, or the run failed)")
        return 1
    for key in sorted(groups):
        kernel, E, M, pe = key
        rows = groups[key]
        first = min(t0 for t0, _ in rows)
        spread = (max(t0 for t0, _ in rows) - first) / 1e3
        cells = []
        for i, name in enumerate(STAGES.get(kernel, [])):
            at = [t0 + d[i] - first for t0, d in rows if i < len(d) and d[i] >= 0]
            if at and name != "-":
                cells.append(f"{name} {min(at) / 1e3:.2f}/{max(at) / 1e3:.2f}")
        print(f"{kernel:14s} E{E:<3d} M{M:<4d} pe {pe}: {len(rows):3d} blocks, starts within {spread:.2f} us; "
              f"first/last block at (us): " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
