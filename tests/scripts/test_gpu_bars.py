"""scripts/gpu_bars.sh without a GPU (DRY=1): each group names the sub-runs that
decide its issue's bars, every limit fits the group's wall, and a wrong group is
refused before anything runs."""
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpu_bars.sh")
DRY = re.compile(r"^DRY: \[(.+), (\d+)s, > (\S+)\] (.*)$")
WANT = {
    "moe": ["tests/moe/test_moe 4 all", "scripts/gpu_moe.sh spawn bench host", "scripts/gpu_moe_ht.sh"],
    "coll": ["SHORT=1", "scripts/gpu_coll.sh", "scripts/gpu_pkt.sh", "scripts/gpu_bcast.sh"],
    "gemm": ["GEMM_ALONE=0", "scripts/gpu_gemm.sh", "scripts/gpu_gemm_tilelang.sh build-tilelang-gemm"],
}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, **env):
    e = dict(os.environ, DRY="1", BUILD="build-x", **env)
    e.pop("BARS_WALL", None)
    e.update(env)
    with tempfile.TemporaryDirectory() as out:
        e["OUT"] = out
        p = subprocess.run(["bash", SCRIPT] + args, cwd=REPO, env=e, capture_output=True, text=True, timeout=60)
        table = os.path.exists(os.path.join(out, "bars", args[0] + ".txt")) if args else False
    return p, table


for group, want in WANT.items():
    p, table = run([group])
    steps = [m.groups() for m in map(DRY.match, p.stdout.splitlines()) if m]
    cmds = " ".join(s[3] for s in steps)
    check(p.returncode == 0, "%s: dry run exits 0 (rc %d, stderr %r)" % (group, p.returncode, p.stderr[-200:]))
    check(len(steps) == len([w for w in want if w.startswith("scripts/") or "test_moe" in w]),
          "%s: one step per sub-run (%d steps)" % (group, len(steps)))
    for w in want:
        check(w in cmds, "%s: runs %r" % (group, w))
    check(all("OUT=" in s[3] and "BUILD=" in s[3] and os.path.isabs(s[3].split("BUILD=")[1].split()[0])
              for s in steps), "%s: every step gets OUT and an absolute BUILD" % group)
    check(sum(int(s[1]) for s in steps) <= 580, "%s: the limits fit one 10-minute call (%s s)" % (
        group, "+".join(s[1] for s in steps)))
    check(table, "%s: the step table is written to OUT/bars/%s.txt" % (group, group))
    check("skip" in p.stdout and "---- bar lines ----" in p.stdout, "%s: the table and the bar section print" % group)

# a short wall cuts what is left to the later steps
p, _ = run(["coll"], BARS_WALL="100")
limits = [int(m.group(2)) for m in map(DRY.match, p.stdout.splitlines()) if m]
check(limits and all(x <= 100 for x in limits), "BARS_WALL=100: no step's limit above 100 s (%s)" % limits)

for bad in ([], ["all"], ["moe coll"]):
    p, _ = run(bad)
    check(p.returncode == 2 and "usage:" in p.stderr and "DRY:" not in p.stdout,
          "group %r refused with the usage line before any step (rc %d)" % (bad, p.returncode))

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
