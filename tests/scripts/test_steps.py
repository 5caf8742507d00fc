"""scripts/_steps.sh, the GPU scripts' step runner, without a GPU.

Each case sources the runner in bash, runs steps through steps_exec and the
verdict helpers, and prints the table: a step's status comes back, a step
past its limit is stopped (124) and reported as timed out, a failed step's
row names its status and its log's error lines follow, a dry step only
prints, and once the run's deadline is spent a step is not run.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASH = shutil.which("bash") or "/bin/bash"
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else "\n     " + detail.replace("\n", "\n     ")))
    if not cond:
        failures.append(what)


def run(body, tmp):
    script = 'cd "$1"; source scripts/_steps.sh; steps_fmt="%s|%s|%s|%s\\n"; T="$2"\n' + body
    t0 = time.time()
    out = subprocess.run([BASH, "-c", script, "bash", REPO, tmp], capture_output=True, text=True, timeout=120)
    return out.stdout, out.returncode, time.time() - t0


def main():
    tmp = tempfile.mkdtemp(prefix="symm_steps_")
    try:
        out, rc, _ = run('steps_exec ok 20 "$T/ok.log" echo hello; echo "rc=$? step_rc=$step_rc limit=$step_limit"\n'
                         'cat "$T/ok.log"; steps_row ok ok "$step_dt"; steps_table; echo "failed=$failed"', tmp)
        check("rc=0 step_rc=0 limit=20" in out and "hello" in out and "ok|ok|0|" in out and "failed=0" in out,
              "a passing step: status 0, its output in its log, an ok row", out)

        body = ('steps_exec bad 20 "$T/bad.log" bash -c "echo step one; echo \'FAIL: wrong sum at 3\'; exit 3"\n'
                'steps_failed bad "$T/bad.log" "logs/bad.log"; steps_table; echo "failed=$failed"')
        out, rc, _ = run(body, tmp)
        check("bad|FAIL|0|rc=3, see logs/bad.log" in out and "FAIL: wrong sum at 3" in out and
              "step one" not in out and "failed=1" in out,
              "a failed step: its status in the row, its error lines printed, the run failed", out)

        out, rc, dt = run('steps_exec slow 1 "$T/slow.log" sleep 30; echo "step_rc=$step_rc"\n'
                          'steps_failed slow "$T/slow.log" "slow.log"; steps_table', tmp)
        check("step_rc=124" in out and "slow|FAIL|" in out and "timed out after 1 s, see slow.log" in out and dt < 20,
              "a step past its limit is stopped and reported as timed out (%.1f s)" % dt, out)

        out, rc, _ = run('steps_err_lines=2 steps_exec many 20 "$T/many.log" bash -c '
                         '"for i in 1 2 3 4; do echo error \\$i; done; exit 1"\n'
                         'steps_err_lines=2 steps_failed many "$T/many.log" many.log', tmp)
        check("error 1" in out and "error 2" in out and "error 3" not in out,
              "steps_err_lines bounds the error lines printed", out)

        out, rc, _ = run('dry=1; steps_exec d 20 "$T/d.log" touch "$T/made"; echo "ret=$? step_rc=$step_rc"\n'
                         'steps_table', tmp)
        check("DRY: [d, 20s, > " in out and "ret=1 step_rc=0" in out and "d|skip|0|dry run" in out and
              not os.path.exists(os.path.join(tmp, "made")), "a dry step prints itself and runs nothing", out)

        out, rc, _ = run('steps_deadline=$(( $(date +%s) + 5 )); steps_min_left=15; steps_spent="the wall is spent"\n'
                         'steps_exec late 20 "$T/late.log" touch "$T/late"; echo "ret=$? step_rc=$step_rc"\n'
                         'steps_deadline=$(( $(date +%s) + 60 )); steps_exec cut 100 "$T/cut.log" true\n'
                         'echo "limit=$step_limit"; steps_table; echo "failed=$failed"', tmp)
        limit = [l for l in out.splitlines() if l.startswith("limit=")]
        cut = int(limit[0].split("=")[1]) if limit else -1
        check("ret=1 step_rc=124" in out and "late|FAIL|0|not run: the wall is spent" in out and
              not os.path.exists(os.path.join(tmp, "late")) and 55 <= cut <= 60 and "failed=1" in out,
              "past the deadline a step is not run; before it, its limit is cut to what is left (%d s)" % cut, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
