"""Reading a device trace (the JSON symm_trace_dump / symm.trace write):
a summary table and a timeline picture; the `symm-trace` command.

    symm-trace summary trace.json [--top N]
    symm-trace plot trace.json -o trace.png [--max-tracks N] [--top N]

summary: per PE, the time its tracks spent waiting and working, the
events it dropped, whom it waited for; then the longest waits (who waited,
for what, for whom). plot: PEs x blocks on one time axis (PE 0's clock),
waits in one colour, transfers in another, collectives and
barriers/fences in their own, user regions as labelled bars above their
track; it prints the summary too. Needs matplotlib (only plot; imported when
needed). Nothing here needs a GPU or libsymm.

Definitions: a track is one recording thread of one block (thread 0 for
the block-scope calls); its span runs from its first event's start to its
last event's end; its waiting time is the union of its wait slices; its
working time is the rest of its span. A PE's figures add up its tracks.
"""
import argparse
import json
import sys

CATEGORIES = ("wait", "transfer", "coll", "sync")
COLOURS = {"wait": "#d62728", "transfer": "#1f77b4", "coll": "#2ca02c", "sync": "#ff7f0e", "region": "#7f7f7f"}
LABELS = {"wait": "waits", "transfer": "puts / gets / signals", "coll": "collectives", "sync": "barrier / fence / quiet",
          "region": "user regions"}


class Trace:
    """A loaded trace: `slices` (complete events: pid, tid, ts, dur, name,
    cat, args), `tracks` {(pid, tid): name}, `pes` (the per-PE metadata) and
    `meta` (otherData.symm_trace)."""

    def __init__(self, doc):
        if "traceEvents" not in doc:
            raise ValueError("not a trace: no traceEvents")
        self.meta = doc.get("otherData", {}).get("symm_trace", {})
        self.pes = {d["pe"]: d for d in self.meta.get("pes", [])}
        self.tracks, self.procs, self.slices = {}, {}, []
        for e in doc["traceEvents"]:
            ph = e.get("ph")
            if ph == "M" and e.get("name") == "thread_name":
                self.tracks[(e["pid"], e["tid"])] = e["args"]["name"]
            elif ph == "M" and e.get("name") == "process_name":
                self.procs[e["pid"]] = e["args"]["name"]
            elif ph == "X":
                self.slices.append(e)
        for e in self.slices:
            self.tracks.setdefault((e["pid"], e["tid"]), "track %d" % e["tid"])

    @property
    def n_pes(self):
        return self.meta.get("n_pes") or (max(self.procs) + 1 if self.procs else 0)


def load(path):
    """The trace in `path` (raises ValueError for a file that is not one)."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError("%s is not JSON: %s" % (path, e)) from None
    return Trace(doc)


def _union(intervals):
    """Total length of the union of [a, b) intervals."""
    total, end = 0.0, None
    start = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        elif b > end:
            end = b
    if end is not None:
        total += end - start
    return total


def summarize(trace, top=10):
    """A dict: "pes" -> per PE {pe, tracks, span_us, wait_us, work_us,
    wait_pct, dropped, recorded, waited_for {peer or "?": us}}, "longest" ->
    the `top` longest waits (pe, block, thread, dur_us, name, peer, from)."""
    by_track = {}
    for e in trace.slices:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    pes = {}
    for p in range(trace.n_pes):
        d = trace.pes.get(p, {})
        pes[p] = {"pe": p, "tracks": 0, "span_us": 0.0, "wait_us": 0.0, "work_us": 0.0, "wait_pct": 0.0,
                  "dropped": d.get("dropped", 0), "recorded": d.get("recorded", 0), "waited_for": {}}
    for (pid, tid), evs in by_track.items():
        s = pes.setdefault(pid, {"pe": pid, "tracks": 0, "span_us": 0.0, "wait_us": 0.0, "work_us": 0.0,
                                 "wait_pct": 0.0, "dropped": 0, "recorded": 0, "waited_for": {}})
        span = max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs)
        waits = [e for e in evs if e.get("cat") == "wait"]
        waited = _union([(e["ts"], e["ts"] + e["dur"]) for e in waits])
        s["tracks"] += 1
        s["span_us"] += span
        s["wait_us"] += waited
        s["work_us"] += max(0.0, span - waited)
        for e in waits:
            peer = e.get("args", {}).get("peer", "?")
            s["waited_for"][peer] = s["waited_for"].get(peer, 0.0) + e["dur"]
    for s in pes.values():
        s["wait_pct"] = 100.0 * s["wait_us"] / s["span_us"] if s["span_us"] > 0 else 0.0
    waits = sorted((e for e in trace.slices if e.get("cat") == "wait"), key=lambda e: -e["dur"])[:top]
    longest = [{"pe": e["pid"], "block": e.get("args", {}).get("block"), "thread": e.get("args", {}).get("thread"),
                "dur_us": e["dur"], "start_us": e["ts"], "name": e["name"], "peer": e.get("args", {}).get("peer"),
                "from": e.get("args", {}).get("from")} for e in waits]
    return {"pes": [pes[k] for k in sorted(pes)], "longest": longest, "clock": trace.meta.get("clock", "")}


def _table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    out = ["  ".join(str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def format_summary(s):
    """The summary as text: the per-PE table, then the longest waits."""
    rows = []
    for p in s["pes"]:
        wf = sorted(p["waited_for"].items(), key=lambda kv: -kv[1])
        whom = ", ".join("PE %s %.1f us" % (k, v) if k != "?" else "unknown %.1f us" % v for k, v in wf[:3]) or "-"
        rows.append(("PE %d" % p["pe"], p["tracks"], "%.1f" % p["span_us"], "%.1f" % p["wait_us"],
                     "%.1f" % p["work_us"], "%.1f%%" % p["wait_pct"], p["dropped"], whom))
    text = ["Per PE (times summed over its tracks; a track is one recording thread of a block)",
            _table(("PE", "tracks", "span us", "waiting us", "working us", "waiting", "dropped", "waited for (most)"),
                   rows)]
    if s["longest"]:
        text += ["", "Longest waits",
                 _table(("PE", "block", "thread", "us", "start us", "wait"),
                        [(w["pe"], w["block"], w["thread"], "%.2f" % w["dur_us"], "%.2f" % w["start_us"],
                          w["name"] + (" (inferred)" if w["from"] == "inferred" else ""))
                         for w in s["longest"]])]
    else:
        text += ["", "No waits recorded."]
    if s.get("clock"):
        text += ["", "Clocks: " + s["clock"]]
    return "\n".join(text)


def _tracks_to_show(trace, max_tracks):
    """(rows, note): the tracks drawn, PE by PE (at most max_tracks per PE,
    those with the most waiting first kept in track order), and what was
    left out."""
    waits = {}
    for e in trace.slices:
        if e.get("cat") == "wait":
            waits[(e["pid"], e["tid"])] = waits.get((e["pid"], e["tid"]), 0.0) + e["dur"]
    rows, left = [], []
    for p in sorted({k[0] for k in trace.tracks}):
        mine = sorted(k for k in trace.tracks if k[0] == p)
        if len(mine) > max_tracks:
            keep = set(sorted(mine, key=lambda k: (-waits.get(k, 0.0), k[1]))[:max_tracks])
            left.append("PE %d: %d of %d tracks shown (most waiting)" % (p, max_tracks, len(mine)))
            mine = [k for k in mine if k in keep]
        rows += mine
    return rows, "; ".join(left)


def plot(trace, out, max_tracks=16, title=None, width=14.0):
    """Draw the timeline into `out` (any format matplotlib writes: .png,
    .svg, .pdf). Raises ImportError with a clear message without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise ImportError("symm-trace plot needs matplotlib (pip install matplotlib); "
                          "`symm-trace summary` works without it") from None
    rows, note = _tracks_to_show(trace, max_tracks)
    index = {k: i for i, k in enumerate(rows)}
    height = max(2.5, 0.32 * len(rows) + 1.6)
    fig, ax = plt.subplots(figsize=(width, height))
    bars = {c: [] for c in CATEGORIES}
    regions = []
    for e in trace.slices:
        k = (e["pid"], e["tid"])
        if k not in index:
            continue
        cat = e.get("cat")
        if cat == "region":
            regions.append((index[k], e))
        elif cat in bars:
            bars[cat].append((index[k], e["ts"], max(e["dur"], 1e-3)))
    for cat in CATEGORIES:
        per_row = {}
        for row, ts, dur in bars[cat]:
            per_row.setdefault(row, []).append((ts, dur))
        for row, xs in per_row.items():
            ax.broken_barh(xs, (row - 0.3, 0.6), facecolors=COLOURS[cat], edgecolors="none", alpha=0.9)
    xmin = min((e["ts"] for e in trace.slices), default=0.0)
    xmax = max((e["ts"] + e["dur"] for e in trace.slices), default=1.0)
    span = max(xmax - xmin, 1e-3)
    for row, e in regions:
        ax.broken_barh([(e["ts"], max(e["dur"], 1e-3))], (row - 0.48, 0.14), facecolors=COLOURS["region"],
                       edgecolors="none")
        if e["dur"] > 0.04 * span:
            ax.text(e["ts"] + e["dur"] / 2, row - 0.5, e["name"], ha="center", va="bottom", fontsize=6,
                    color="#333333", clip_on=True)
    labels = []
    for (pid, tid) in rows:
        name = trace.tracks.get((pid, tid), str(tid))
        labels.append("PE %d  %s" % (pid, name))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(len(rows) - 0.4, -0.7)
    ax.set_xlim(xmin - 0.01 * span, xmax + 0.01 * span)
    ax.set_xlabel("time (us, PE 0's clock)")
    for i in range(1, len(rows)):  # a line between PEs
        if rows[i][0] != rows[i - 1][0]:
            ax.axhline(i - 0.5, color="#999999", linewidth=0.6)
    drops = ", ".join("PE %d dropped %d" % (p, d["dropped"]) for p, d in sorted(trace.pes.items()) if d.get("dropped"))
    head = title or "symm device trace: %d PEs, %d events" % (trace.n_pes, len(trace.slices))
    sub = "; ".join(x for x in (note, drops) if x)
    ax.set_title(head + ("\n" + sub if sub else ""), fontsize=9)
    ax.legend(handles=[Patch(color=COLOURS[c], label=LABELS[c]) for c in CATEGORIES + ("region",)],
              loc="upper right", fontsize=7, ncol=5, framealpha=0.8)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="symm-trace", description="Summarise or plot a symm device trace "
                                 "(the JSON of symm_trace_dump / symm.trace).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="per PE time waiting vs working, and the longest waits")
    s.add_argument("trace")
    s.add_argument("--top", type=int, default=10, help="longest waits to list (default 10)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    p = sub.add_parser("plot", help="draw the timeline (PEs x blocks) and print the summary")
    p.add_argument("trace")
    p.add_argument("-o", "--out", required=True, help="image file (.png, .svg, .pdf)")
    p.add_argument("--max-tracks", type=int, default=16, help="tracks drawn per PE (default 16)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--title")
    args = ap.parse_args(argv)
    try:
        trace = load(args.trace)
    except (OSError, ValueError) as e:
        print("symm-trace: %s" % e, file=sys.stderr)
        return 1
    summary = summarize(trace, top=args.top)
    if args.cmd == "summary" and args.json:
        print(json.dumps(summary, indent=1))
        return 0
    if args.cmd == "plot":
        try:
            plot(trace, args.out, max_tracks=args.max_tracks, title=args.title)
        except ImportError as e:
            print("symm-trace: %s" % e, file=sys.stderr)
            return 2
        print("wrote %s" % args.out)
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
