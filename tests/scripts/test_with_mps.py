"""scripts/with_mps.sh against a stand-in nvidia-cuda-mps-control (no GPU).

The stand-in keeps the real one's surface: `-d` starts a detached daemon that
logs "[date Control PID]" lines and makes $CUDA_MPS_PIPE_DIRECTORY/control;
a command on stdin (quit, get_server_list) reaches it while it lives and fails
once it is gone. With FAKE_MPS_STUCK=1 the daemon ignores quit and every
command to it hangs, as when its server waits on a client context that a
stopped kernel left open.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WITH_MPS = os.path.join(REPO, "scripts", "with_mps.sh")
LEFT = []  # the stand-ins' folders, their daemons killed and folders removed at the end

FAKE = r"""#!/bin/bash
pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY
# run by the kernel from this file, so the daemon is named for it as the real one is
stamp() { echo "[$(date '+%F %T.000') Control $$] $1" >>"$log/control.log"; }
case "${1:-}" in
  -d) nohup "$0" __daemon </dev/null >/dev/null 2>&1 & exit 0 ;;
  __daemon)
    stamp "Starting control daemon"; : >"$pipe/control"
    while [ ! -e "$pipe/quit" ] || [ "${FAKE_MPS_STUCK:-0}" = 1 ]; do sleep 0.05; done
    stamp "Exit with status 0"; rm -f "$pipe/control"; exit 0 ;;
esac
read -r cmd
[ -e "$pipe/control" ] || exit 1
[ "${FAKE_MPS_STUCK:-0}" = 1 ] && exec sleep 1000
case "$cmd" in quit) : >"$pipe/quit" ;; get_server_list) ;; *) exit 1 ;; esac
"""


def run(args, stuck=False, wall=120):
    tmp = tempfile.mkdtemp(prefix="fake-mps-")
    fake = os.path.join(tmp, "nvidia-cuda-mps-control")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, stat.S_IRWXU)
    LEFT.append(tmp)
    env = dict(os.environ, PATH=tmp + os.pathsep + os.environ["PATH"], FAKE_MPS_STUCK="1" if stuck else "0",
               SYMM_MPS_LOGS=os.path.join(tmp, "logs"))
    t0 = time.time()
    r = subprocess.run(["bash", WITH_MPS] + args, env=env, capture_output=True, text=True, timeout=wall)
    folder = re.search(r"pipes in (\S+)/pipe", r.stderr)
    pids = []
    logs = os.path.join(tmp, "logs")
    for name in (os.listdir(logs) if os.path.isdir(logs) else []):
        with open(os.path.join(logs, name)) as f:
            pids += [int(p) for p in re.findall(r"Control (\d+)\]", f.read())]
    return r, time.time() - t0, folder.group(1) if folder else None, sorted(set(pids))


def alive(pid):
    try:  # a zombie is gone for our purpose
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def check(cond, what, r):
    if not cond:
        print("FAIL: %s\n--- stdout\n%s--- stderr\n%s" % (what, r.stdout, r.stderr))
        sys.exit(1)


def main():
    # the command runs under the daemon (its pipe folder exported) and its status comes back
    r, _, folder, pids = run(["--", "bash", "-c", 'test -e "$CUDA_MPS_PIPE_DIRECTORY/control" && exit 7'])
    check(r.returncode == 7, "the command's exit status (7) comes back: got %d" % r.returncode, r)
    check(folder and not os.path.exists(folder), "the private folder is removed", r)
    check(pids and not any(alive(p) for p in pids), "the daemon quit", r)
    check("killing" not in r.stderr, "a daemon that quits is not killed", r)

    # --timeout stops the command's whole group: 124
    r, took, folder, pids = run(["--timeout", "1", "--", "bash", "-c", "sleep 100 & sleep 100"])
    check(r.returncode == 124 and took < 30, "--timeout 1: exit 124 soon (got %d after %.0f s)" % (r.returncode, took), r)
    check(not any(alive(p) for p in pids) and not os.path.exists(folder), "nothing left after --timeout", r)

    # a daemon that never quits, and hangs every command sent to it: killed within the bound
    r, took, folder, pids = run(["--", "true"], stuck=True)
    check(r.returncode == 0, "the command's status survives a stuck daemon (got %d)" % r.returncode, r)
    check(took < 60, "with_mps.sh ends within its bound on a stuck daemon (%.0f s)" % took, r)
    check("did not quit within 15 s: killing its processes: %d" % pids[0] in r.stderr if pids else False,
          "the kill is reported with the daemon's pid", r)
    check(not any(alive(p) for p in pids), "the stuck daemon is gone", r)
    check(not os.path.exists(folder), "the private folder is removed after the kill", r)
    print("with_mps.sh: status, --timeout and a stuck daemon: ok")


def clean_up():
    for tmp in LEFT:
        subprocess.run(["pkill", "-KILL", "-f", os.path.join(tmp, "nvidia-cuda-mps-control")])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        clean_up()
