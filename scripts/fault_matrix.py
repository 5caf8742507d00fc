#!/usr/bin/env python3
"""The fault matrix of docs/reliability.md: start N PEs of tests/fault/fault_pe,
inject one fault per run, and check what every surviving PE reports, how
soon, and that nothing is left behind.

  python3 scripts/fault_matrix.py --build build [--backend native|host] [--npes 4]
      [--runs-per-kind 9] [--parallel 2] [--mps] [--quick] [--budget S] [--out DIR]
      [--doc docs/reliability.md]

Faults: kill -9 of one PE at a random point of each kind of work (host
barriers, allocations, host exchanges, stream barriers, host work that never
waits for a peer, every stream collective, device-side collectives, device
RMA loops, MoE dispatch/combine in both modes); a kernel that traps on one
PE; a stopped PE (SIGSTOP), also while the others run work that keeps being
answered (a device ring the stopped PE's GPU keeps serving: only the abort
grace, SYMM_ABORT_GRACE, ends them); a PE that stays out while alive; a PE
that exits without finalize; mismatched collective arguments and settings;
outsiders on the bootstrap. For each run: every surviving PE's error (or the
line with which symm ended it, exit status 86) and the time from the fault
to it (bound: 10 s, or SYMM_WAIT_TIMEOUT + 10 s where a deadline is the only
way to tell), no PE still running at the end (a hang), no process group
left, no descriptor or thread left in a survivor after finalize, (native) no
GPU memory held by a process of the run, and no more MPS daemons at the end
than at the start.

--mps starts a private MPS control daemon (pipe and log folders under /tmp)
and always stops it at the end (leave it out where an MPS daemon already
runs, as in scripts/gpu_suite.sh); without MPS the PEs of a shared GPU
time-slice. Runs whose kernels trap run alone, after the others. Under MPS
(--mps, CUDA_MPS_PIPE_DIRECTORY, or a daemon at /tmp/nvidia-mps) a client
that dies or traps while a kernel of it runs disturbs every client of the
server, other jobs' PEs included, and the server refuses new clients until
all of them have gone: there every run whose fault can end a PE's kernel
(any fault during GPU work) runs alone too, and before the next run starts
the script waits (at most --mps-wait seconds) until a probe (fault_pe
--probe) is served again. A run none of whose PEs got through init because
the server refused them is started again, and counted apart.
--symmrun-stop runs, instead of the matrix, the stopped-PE check through
the launcher: `symmrun -n NPES fault_pe devloop` (host backend: `local`),
PE 1 and then PE 0 stopped (SIGSTOP) 2 s into a device ring that the stopped
PE's GPU keeps answering, default settings; every other PE must be gone
within 10 s of the stop, each having named the stopped PE, and symmrun must
exit non-zero, the stopped PE gone too, no process, GPU memory or MPS daemon
left; table in OUT/symmrun_stop.{md,json}.

--budget S stops starting runs S seconds after the start (the runs not
made are counted under the table; the side runs go in a random order, so
every row gets its share). Prints a summary table and writes OUT/fault_matrix.{md,json}
and every run's output; --doc replaces the table between the markers
<!-- fault-matrix:TAG --> and <!-- /fault-matrix:TAG --> of that file (TAG:
--doc-tag, else the backend).
Exit 0 when every run met its bound.
"""
import argparse
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HOST_KINDS = ["barrier", "malloc", "hostx", "teambar", "local"]
GPU_KINDS = ["ar", "ag", "a2a", "rs", "bcast", "a2av", "dev_ar", "dev_coll", "rma", "devloop", "moe_ll", "moe_ht"]
KERNEL_KINDS = set(GPU_KINDS + ["teambar"])  # work that runs kernels (native backend)
BOUND_S = 10.0
EARLY_S = 0.01  # an error this much before the fault is still the fault's (clock reads)
# What symm prints when it ends a process a peer's death left in symm.
ENDED = "ending it with exit status"
ABORT_EXIT_STATUS = 86
MPS_NAMES = ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")
# What a PE prints when the MPS server turns it away (recovering from a fault).
MPS_REFUSED = ("MPS server is not ready", "cudaErrorMpsServerNotReady", "cudaErrorDevicesUnavailable",
               "busy or unavailable")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LIVE = set()  # process groups of running PEs: killed at the end whatever happens


def kill_live():
    for pgid in list(LIVE):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        LIVE.discard(pgid)


class Job:
    """One run: N fault_pe processes of one job, their lines as they come."""

    def __init__(self, exe, npes, kind, fault, victim, fault_ms, limit, env, env_victim, mps_pct, delay_last=0.0):
        self.port = free_port()
        self.procs, self.lines = [], [[] for _ in range(npes)]
        self.npes, self.victim, self.t_start = npes, victim, time.monotonic()
        secret = secrets.token_hex(32)
        self.threads = []
        for r in range(npes):
            e = dict(os.environ)
            for v in ("SYMM_WAIT_TIMEOUT", "SYMM_COLL_BLOCKS", "SYMM_COLL_ALGO", "SYMM_COLL_CE_MIN", "SYMM_COLL_TUNE"):
                e.pop(v, None)
            e.update({"RANK": str(r), "WORLD_SIZE": str(npes), "LOCAL_RANK": str(r),
                      "LOCAL_WORLD_SIZE": str(npes), "MASTER_ADDR": "127.0.0.1",
                      "SYMM_BOOTSTRAP_PORT": str(self.port), "SYMM_BOOTSTRAP_SECRET": secret,
                      "SYMM_BOOTSTRAP_TIMEOUT": "60", "SYMM_HEAP_CHUNK": "64M"})
            if mps_pct:
                e["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(mps_pct)
            e.update(env)
            if r == victim:
                e.update(env_victim)
            if r == npes - 1 and delay_last:
                self.hook_before_last(delay_last)
            p = subprocess.Popen([exe, kind, fault, str(victim), str(fault_ms), str(limit)], env=e,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            self.procs.append(p)
            LIVE.add(p.pid)
            t = threading.Thread(target=self._read, args=(r, p), daemon=True)
            t.start()
            self.threads.append(t)

    def hook_before_last(self, seconds):
        """Outsiders on the bootstrap while the job waits for its last rank."""
        time.sleep(0.3)
        self.outsider_fds = []
        deadline = time.monotonic() + seconds
        for _ in range(10):  # connections that never say anything
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", self.port))
                self.outsider_fds.append(s)
            except OSError:
                s.close()
        # the first protocol's HELLO, whose nonce anyone could compute
        nonce = 0  # any value: the root must turn it away whatever it is
        hello = struct.pack("<IIqii", 1, 1, nonce, self.npes - 1, self.npes)
        hdr = struct.pack("<IIQQii", 0x73796d42, 1, 0, len(hello), -1, 0)
        for _ in range(3):
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", self.port))
                s.sendall(hdr + hello)
                s.settimeout(2.0)
                got = b""
                while len(got) < 4096:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                    if b"refused" in got or b"authentication" in got or b"not a HELLO" in got:
                        break
                self.outsider_answers = getattr(self, "outsider_answers", []) + [got]
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(max(0.0, deadline - time.monotonic()))

    def _read(self, r, p):
        for line in p.stdout:
            self.lines[r].append((time.monotonic(), line.rstrip("\n")))

    def wait_ready(self, timeout):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            ready = sum(any(l.startswith("READY") for _, l in self.lines[r]) for r in range(self.npes))
            done = sum(p.poll() is not None for p in self.procs)
            if ready == self.npes or done:
                return ready == self.npes
            time.sleep(0.01)
        return False

    def finish(self, limit, stop_victim=False):
        """Wait for the PEs; those still running at `limit` hang. A stopped
        victim is killed once the others are done."""
        until = time.monotonic() + limit
        hung = []
        while time.monotonic() < until:
            alive = [r for r, p in enumerate(self.procs) if p.poll() is None]
            if stop_victim and alive == [self.victim]:
                os.kill(self.procs[self.victim].pid, signal.SIGKILL)
            if not alive:
                break
            time.sleep(0.02)
        for r, p in enumerate(self.procs):
            if p.poll() is None:
                if not (stop_victim and r == self.victim):
                    hung.append(r)
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for t in self.threads:
            t.join(timeout=5)
        for s in getattr(self, "outsider_fds", []):
            s.close()
        leaked = []
        for p in self.procs:
            try:
                os.killpg(p.pid, 0)
                leaked.append(p.pid)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            LIVE.discard(p.pid)
        return hung, leaked


def mps_processes():
    """Pids of MPS control daemons and servers (any user) now."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() in MPS_NAMES:
                    found.append(int(d))
        except OSError:
            pass
    return sorted(found)


def gpu_memory_used():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
        return sum(int(x) for x in out.split())
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def gpu_count():
    """GPUs the PEs see: CUDA_VISIBLE_DEVICES, else nvidia-smi's list (0 if unknown)."""
    v = os.environ.get("CUDA_VISIBLE_DEVICES")
    if v is not None:
        return len([x for x in v.split(",") if x.strip() and not x.strip().startswith("-")])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return sum(1 for l in out.splitlines() if l.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        return 0


def gpu_pids():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {int(x) for x in out.split() if x.strip().isdigit()}


def parse(job):
    """Per PE: result (time, status, message), who, leaks, fault time."""
    out = []
    for r in range(job.npes):
        d = {"pe": r, "lines": [l for _, l in job.lines[r]]}
        for t, l in job.lines[r]:
            m = re.match(r"(READY|FAULT|RESULT|WHO) ([0-9.]+) ?(\S*) ?(.*)", l)
            if m and m.group(1) == "RESULT" and "result" not in d:
                d["result"] = (float(m.group(2)), m.group(3), m.group(4))
            elif ENDED in l and "result" not in d:
                # symm ended the process (the abort grace passed): its error,
                # timed when the line arrived
                d["result"] = (t, "ENDED_BY_SYMM", l[l.find("ERROR: ") + 7:] if "ERROR: " in l else l)
            elif m and m.group(1) == "WHO":
                d["who"] = m.group(3) + " " + m.group(4)
            elif m and m.group(1) == "FAULT":
                d["fault"] = float(m.group(2))
            elif m and m.group(1) == "READY":
                d["ready"] = float(m.group(2))
            lm = re.match(r"LEAKS (-?\d+) (-?\d+)", l)
            if lm:
                d["leaks"] = (int(lm.group(1)), int(lm.group(2)))
        out.append(d)
    return out


def run_one(a, row, kind, victim, fault_ms):
    fault = row["fault"]
    internal = fault in ("trap", "busy", "exit", "mismatch", "none")
    limit = row.get("limit", 20.0)
    env = {"SYMM_BACKEND": a.backend}
    env.update(row.get("env", {}))
    job = Job(a.exe, a.npes, kind, fault if internal else "none", victim, fault_ms if internal else 10 ** 9,
              limit, env, row.get("env_victim", {}), a.mps_pct, row.get("outsiders", 0.0))
    t_fault = None
    ready = job.wait_ready(60)
    if ready and fault in ("kill", "stop"):
        time.sleep(fault_ms / 1000.0)
        t_fault = time.monotonic()
        try:
            os.kill(job.procs[victim].pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        except ProcessLookupError:
            pass
    hung, leaked = job.finish(limit + 15, stop_victim=fault in ("stop", "busy"))
    pes = parse(job)
    if t_fault is None:
        t_fault = pes[victim].get("fault")
    if t_fault is None:  # init-time faults (settings): from the start
        t_fault = job.t_start
    gpu_left = []
    if a.backend == "native":
        after = gpu_pids()
        if after is not None:
            gpu_left = sorted(after & {p.pid for p in job.procs})
    surv = []
    for d in pes:
        if d["pe"] == victim and fault not in ("none", "settings", "mismatch"):
            continue
        res = d.get("result")
        s = {"pe": d["pe"], "status": res[1] if res else "NO RESULT", "message": (res[2] if res else "")[:300],
             "who": d.get("who", ""), "leaks": d.get("leaks"), "exit": job.procs[d["pe"]].returncode}
        s["seconds"] = round(res[0] - t_fault, 3) if res else None
        s["names_victim"] = ("PE %d" % victim) in (s["message"] + " " + s["who"])
        surv.append(s)
    rec = {"row": row["name"], "kind": kind, "fault": fault, "victim": victim, "fault_ms": fault_ms,
           "ready": ready, "hung": hung, "leaked_processes": leaked, "gpu_left": gpu_left, "survivors": surv,
           "logs": [d["lines"] for d in pes]}
    bound = row.get("bound", BOUND_S)
    ok = ready or fault == "settings"
    ok = ok and not hung and not leaked and not gpu_left
    for s in surv:
        want_error = row.get("expect", "error") == "error"
        if want_error:
            # an error before the fault is the work's own, not the fault's
            ok = ok and s["status"] not in ("NONE", "NO RESULT") and s["seconds"] is not None and \
                -EARLY_S <= s["seconds"] <= bound
            if s["status"] == "ENDED_BY_SYMM":  # and the process did end so
                ok = ok and s["exit"] == ABORT_EXIT_STATUS
        else:
            ok = ok and s["status"] == "NONE"
        if s["leaks"] is not None:  # (the CUDA runtime starts threads of its own)
            ok = ok and s["leaks"][0] <= 0 and (a.backend == "native" or s["leaks"][1] <= 0)
    rec["ok"] = ok
    # Nothing was injected when no PE got through init: if the MPS server
    # turned the PEs away, the run tested nothing and may start again.
    rec["mps_refused"] = not ready and any(
        any(m in l for m in MPS_REFUSED) for d in pes for l in d["lines"])
    return rec


def pid_gone(pid):
    """Exited (reaped, or a zombie waiting for its reaper)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rfind(")") + 2:st.rfind(")") + 3] == "Z"
    except OSError:
        return True


def symmrun_stop(a, victim):
    """One job under symmrun, `victim` stopped (SIGSTOP) while the others run
    work the stopped PE keeps answering; what ended each PE, and when."""
    symmrun = os.path.join(a.build, "tools", "symmrun")
    kind = "devloop" if a.backend == "native" else "local"
    env = dict(os.environ)
    for v in ("SYMM_PEER_TIMEOUT", "SYMM_ABORT_GRACE", "SYMM_COLL_BLOCKS", "SYMM_COLL_ALGO", "SYMM_BOOTSTRAP_SECRET"):
        env.pop(v, None)  # default settings; symmrun makes the secret
    env.update({"SYMM_BACKEND": a.backend, "SYMM_HEAP_CHUNK": "64M"})
    cmd = [symmrun, "-n", str(a.npes), "--timeout", "150", a.exe, kind, "none", str(victim), "1000000000", "60"]
    mps0, t_start = mps_processes(), time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    LIVE.add(p.pid)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), l.rstrip("\n"))) for l in p.stdout],
                              daemon=True)
    reader.start()
    pids, ready = {}, set()
    rec = {"victim": victim, "kind": kind, "ok": False, "why": []}
    until = time.monotonic() + 60
    while time.monotonic() < until and p.poll() is None and (len(ready) < a.npes or len(pids) < a.npes):
        for _, l in list(lines):
            m = re.match(r"\[(\d+)\] (PID|READY) (\S+)", l)
            if m:
                (pids.__setitem__(int(m.group(1)), int(m.group(3))) if m.group(2) == "PID"
                 else ready.add(int(m.group(1))))
        time.sleep(0.05)
    if len(ready) < a.npes or victim not in pids:
        rec["why"].append("the job did not start (%d of %d PEs ready; see the log in the json)" % (len(ready), a.npes))
        for q in [-p.pid] + list(pids.values()):
            try:
                os.kill(q, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        reader.join(timeout=5)
        LIVE.discard(p.pid)
        rec["log"] = [l for _, l in lines]
        return rec
    time.sleep(2.0)  # into the first kernel, which lasts about 30 s
    t_stop = time.monotonic()
    os.kill(pids[victim], signal.SIGSTOP)
    gone = {}
    until = t_stop + 40
    while time.monotonic() < until and (p.poll() is None or len(gone) < len(pids)):
        now = time.monotonic()
        for r, q in pids.items():
            if r not in gone and pid_gone(q):
                gone[r] = now - t_stop
        time.sleep(0.02)
    t_exit = time.monotonic() - t_stop
    hung = p.poll() is None
    if hung:
        rec["why"].append("symmrun still running 40 s after the stop")
        for q in [-p.pid] + list(pids.values()):
            try:
                os.kill(q, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
    reader.join(timeout=5)
    LIVE.discard(p.pid)
    log = [(t - t_stop, l) for t, l in lines]
    rec.update({"symmrun_exit": p.returncode, "symmrun_after_s": round(t_exit, 2),
                "gone_after_s": {str(r): round(v, 2) for r, v in sorted(gone.items())}, "log": [l for _, l in log]})
    surv = {}
    for r in pids:
        if r == victim:
            continue
        named = [t for t, l in log if l.startswith("[%d] " % r) and "ERROR: PE %d " % victim in l]
        ended = any(l.startswith("[%d] " % r) and ENDED in l for _, l in log)
        returned = any(l.startswith("[%d] RESULT" % r) for _, l in log)
        surv[r] = {"gone_s": round(gone[r], 2) if r in gone else None, "named_s": round(named[0], 2) if named else None,
                   "how": "ended by symm" if ended else "returned the error" if returned else "stopped by symmrun"}
        if gone.get(r) is None or gone[r] > BOUND_S:
            rec["why"].append("PE %d was not gone %g s after the stop" % (r, BOUND_S))
        if not named:
            rec["why"].append("PE %d never named PE %d" % (r, victim))
    rec["survivors"] = {str(r): v for r, v in surv.items()}
    if p.returncode in (0, None) or hung:
        rec["why"].append("symmrun exited %s" % p.returncode)
    if gone.get(victim) is None:
        rec["why"].append("the stopped PE %d outlived symmrun" % victim)
    if not any("rank %d is stopped" % victim in l for _, l in log):
        rec["why"].append("symmrun did not name the stopped rank %d" % victim)
    left = [q for q in pids.values() if not pid_gone(q)]
    for q in left:
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass
    rec["left"] = left
    if left:
        rec["why"].append("processes left: %s" % left)
    gpu_left = []
    if a.backend == "native":
        after = gpu_pids()
        gpu_left = sorted(after & set(pids.values())) if after is not None else []
    rec["gpu_left"] = gpu_left
    if gpu_left:
        rec["why"].append("GPU memory held by %s" % gpu_left)
    deadline = time.monotonic() + 20
    while len(mps_processes()) > len(mps0) and time.monotonic() < deadline:
        time.sleep(0.5)
    rec["mps_leak"] = len(mps_processes()) > len(mps0)
    if rec["mps_leak"]:
        rec["why"].append("an MPS daemon appeared and stayed")
    rec["elapsed_s"] = round(time.monotonic() - t_start, 1)
    rec["ok"] = not rec["why"]
    return rec


def symmrun_stop_main(a):
    recs = [symmrun_stop(a, v) for v in (1, 0) if v < a.npes]
    lines = ["| stopped PE | work | every other PE: gone after (named the PE after; how) | symmrun: exit, after | "
             "processes, GPU memory, MPS left | verdict |", "|---|---|---|---|---|---|"]
    for r in recs:
        surv = "; ".join("PE %s %s s (%s s; %s)" % (q, v["gone_s"], v["named_s"], v["how"])
                         for q, v in sorted(r.get("survivors", {}).items()))
        lines.append("| %d | %s | %s | %s, %s s | %d, %d, %s | %s |" % (
            r["victim"], r["kind"], surv or "-", r.get("symmrun_exit"), r.get("symmrun_after_s"),
            len(r.get("left", [])), len(r.get("gpu_left", [])), "1" if r.get("mps_leak") else "0",
            "ok" if r["ok"] else "FAILED: " + "; ".join(r["why"])))
    head = ("One PE stopped (SIGSTOP) 2 s into %s, %s backend, %d PEs under symmrun, default SYMM_PEER_TIMEOUT and "
            "SYMM_ABORT_GRACE (`python3 scripts/fault_matrix.py --backend %s --npes %d --symmrun-stop`); times from "
            "the stop." % ("a device loop that its GPU keeps answering" if a.backend == "native" else
                           "host work that never waits for it", a.backend, a.npes, a.backend, a.npes))
    table = "\n".join(lines)
    with open(os.path.join(a.out, "symmrun_stop.md"), "w") as f:
        f.write(head + "\n\n" + table + "\n")
    with open(os.path.join(a.out, "symmrun_stop.json"), "w") as f:
        json.dump(recs, f, indent=1)
    print(head)
    print(table)
    bad = sum(not r["ok"] for r in recs)
    print("fault_matrix --symmrun-stop: %s" % ("all %d jobs stopped in bound" % len(recs) if not bad else
                                               "%d of %d FAILED" % (bad, len(recs))))
    return 1 if bad else 0


def alone(a, row, kind):
    """Runs with nothing else on the machine: the device ring whose length is
    measured at its start (exclusive rows); under MPS (where a client that
    traps or dies mid-kernel takes down every client of the server) the
    serial rows and every fault during work that runs kernels; on the host
    backend the serial rows. Without MPS a GPU context is a process's own,
    so there the serial rows share the GPUs with other runs."""
    if row.get("exclusive"):
        return True
    if row.get("serial") and (a.under_mps or a.backend != "native"):
        return True
    return a.under_mps and row["fault"] not in ("none", "settings") and (
        row["fault"] == "trap" or kind in KERNEL_KINDS)


class MpsDown(Exception):
    pass


class Interrupted(Exception):
    pass


class MpsGate:
    """Waits until the MPS server serves a new client (fault_pe --probe: a
    context, an allocation and a memset), at most a.mps_wait seconds."""

    def __init__(self, a):
        self.a, self.waits, self.probes, self.total, self.longest = a, 0, 0, 0.0, 0.0

    def wait(self, after):
        if not self.a.under_mps:
            return
        t0 = time.monotonic()
        last = ""
        self.waits += 1
        while True:
            self.probes += 1
            try:
                r = subprocess.run([self.a.exe, "--probe"], capture_output=True, text=True, timeout=30)
                last = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["exit %d" % r.returncode]
                last = last[0]
                if r.returncode == 0:
                    break
            except subprocess.TimeoutExpired:
                last = "the probe did not finish in 30 s"
            if time.monotonic() - t0 > self.a.mps_wait:
                raise MpsDown("the MPS server served no new client within %.0f s after %s (last probe: %s)" % (
                    self.a.mps_wait, after, last))
            time.sleep(0.2)
        dt = time.monotonic() - t0
        self.total += dt
        self.longest = max(self.longest, dt)

    def summary(self):
        return "%d waits for the MPS server (%d probes, %.1f s in all, longest %.2f s)" % (
            self.waits, self.probes, self.total, self.longest)


def rows_for(a):
    native = a.backend == "native"
    kinds = HOST_KINDS + (GPU_KINDS if native else [])
    n = a.runs_per_kind
    rows = [
        # the work itself, so that an error in the rows below is the fault's
        {"name": "no fault (each kind of work alone, 3 s)", "fault": "none", "kinds": kinds if native else [],
         "runs": 1, "limit": 3.0, "expect": "none"},
        {"name": "kill -9 of one PE at a random point", "fault": "kill", "kinds": kinds, "runs": n},
        {"name": "a kernel traps on one PE", "fault": "trap", "serial": True,
         "kinds": (["ar", "dev_ar", "dev_coll", "rma", "moe_ll", "moe_ht", "barrier"] if native else []),
         "runs": 1 if a.quick else 2},
        {"name": "one PE stopped (SIGSTOP)", "fault": "stop",
         "kinds": ["barrier", "teambar"] + (["ar", "rma", "dev_coll", "moe_ll", "moe_ht"] if native else []),
         "runs": 1},
        {"name": "one PE stopped while the others' work keeps being answered (ended by SYMM_ABORT_GRACE)",
         "fault": "stop", "kinds": ["local"] + (["devloop"] if native else []), "runs": 1 if a.quick else 2,
         "answered": True, "exclusive": True},
        {"name": "one PE exits without finalize", "fault": "exit",
         "kinds": ["barrier", "hostx"] + (["rma"] if native else []), "runs": 1},
        {"name": "one PE alive but stays out (SYMM_WAIT_TIMEOUT=5)", "fault": "busy", "serial": True,
         "kinds": ["barrier", "teambar"] + (["ar", "dev_coll", "moe_ll", "moe_ht"] if native else []), "runs": 1,
         "env": {"SYMM_WAIT_TIMEOUT": "5"}, "bound": 15.0},
        {"name": "mismatched malloc size on one PE", "fault": "mismatch", "kinds": ["malloc"], "runs": 1},
        {"name": "mismatched all_to_allv counts on one PE", "fault": "mismatch", "serial": True,
         "kinds": (["a2av"] if a.backend == "native" else []), "runs": 1},
        {"name": "mismatched collective count on one PE", "fault": "mismatch", "serial": True,
         "kinds": (["ar", "dev_ar", "ag", "rs", "bcast"] if a.backend == "native" else []), "runs": 1},
        {"name": "SYMM_COLL_BLOCKS set on one PE only", "fault": "settings", "kinds": ["barrier"], "runs": 1,
         "env_victim": {"SYMM_COLL_BLOCKS": "8"}},
        {"name": "outsiders on the bootstrap while the job forms", "fault": "none", "kinds": ["barrier"],
         "runs": 1, "outsiders": 2.0, "limit": 2.0, "expect": "none"},
    ]
    if a.quick:  # the slow rows (5 s and more each) have their own CI tests, but for one
        rows = [r for r in rows if r["fault"] not in ("stop", "busy") or r.get("answered")]
    return [r for r in rows if r["kinds"]]


def summarize(recs, rows):
    lines = ["| fault | work | runs | surviving PEs' errors | names the PE | time to error: max (median) | "
             "hangs | leaked processes, fds, threads, GPU memory | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        rs = [r for r in recs if r["row"] == row["name"]]
        if not rs:
            continue
        surv = [s for r in rs for s in r["survivors"]]
        statuses = {}
        for s in surv:
            key = s["status"].split(":")[0]
            statuses[key] = statuses.get(key, 0) + 1
        secs = [s["seconds"] for s in surv if s["seconds"] is not None and s["status"] not in ("NONE",)]
        named = sum(s["names_victim"] for s in surv)
        leaks = sum(bool(r["leaked_processes"]) for r in rs), \
            sum(1 for s in surv if s["leaks"] and s["leaks"][0] > 0), \
            sum(1 for s in surv if s["leaks"] and s["leaks"][1] > 0), sum(bool(r["gpu_left"]) for r in rs)
        kinds = sorted({r["kind"] for r in rs})
        t = "%.2f s (%.2f)" % (max(secs), statistics.median(secs)) if secs else "-"
        lines.append("| %s | %s | %d | %s | %s | %s | %d | %d, %d, %d, %d | %s |" % (
            row["name"], ", ".join(kinds), len(rs),
            ", ".join("%s x%d" % kv for kv in sorted(statuses.items())),
            "%d of %d" % (named, len(surv)) if row.get("expect", "error") == "error" else "-", t,
            sum(bool(r["hung"]) for r in rs), *leaks,
            "ok" if all(r["ok"] for r in rs) else "FAILED (%d runs)" % sum(not r["ok"] for r in rs)))
    return "\n".join(lines)


class Mps:
    """A private MPS control daemon, always stopped at the end."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="symm-mps-")
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(self.dir, "pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": os.path.join(self.dir, "log")}
        for d in self.env.values():
            os.makedirs(d)
        os.environ.update(self.env)
        subprocess.run(["nvidia-cuda-mps-control", "-d"], check=True)
        self.up = True

    def stop(self):
        if self.up:
            self.up = False
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, timeout=30)
            shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--backend", choices=["native", "host"], default="native")
    ap.add_argument("--npes", type=int, default=4)
    ap.add_argument("--runs-per-kind", type=int, default=9)
    ap.add_argument("--parallel", type=int, default=1, help="jobs at once")
    ap.add_argument("--mps", action="store_true")
    ap.add_argument("--mps-wait", type=float, default=60.0,
                    help="seconds to wait for the MPS server to serve clients again (default 60)")
    ap.add_argument("--quick", action="store_true",
                    help="one kill run per kind, no SIGSTOP / stays-out rows (CI)")
    ap.add_argument("--symmrun-stop", action="store_true",
                    help="the stopped-PE check through symmrun instead of the matrix (see above)")
    ap.add_argument("--budget", type=float, default=0.0,
                    help="start no run later than this many seconds after the start (0: no limit)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--doc", default=None)
    ap.add_argument("--doc-tag", default=None,
                    help="the markers' name in --doc (default: the backend): <!-- fault-matrix:TAG -->")
    a = ap.parse_args()
    if a.quick:
        a.runs_per_kind = 1
    a.exe = os.path.join(a.build, "tests", "fault", "fault_pe")
    if not os.access(a.exe, os.X_OK):
        print("fault_matrix: %s is not built" % a.exe, file=sys.stderr)
        return 2
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    a.out = a.out or os.path.join(os.environ.get("OUT", "."), "fault_matrix_%s" % a.backend)
    os.makedirs(a.out, exist_ok=True)
    if a.symmrun_stop:
        signal.signal(signal.SIGTERM, lambda sig, _: sys.exit(128 + sig))
        try:
            return symmrun_stop_main(a)
        finally:
            kill_live()  # (interrupted): symmrun's ranks die with it (their parent-death signal)
    mps = None
    a.mps_pct = 0
    a.under_mps = a.backend == "native" and (
        a.mps or os.path.exists(os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"),
                                             "control")))
    a.restarts, a.mps_gate, aborted = [], None, None

    stopping = threading.Event()  # SIGTERM (a timeout from outside): no new runs, the table of those made

    def on_signal(sig, _):
        stopping.set()
        raise Interrupted("stopped by signal %d" % sig)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    recs = []
    skipped = []  # runs not made: the budget ran out
    mem0 = gpu_memory_used() if a.backend == "native" else None
    mps0 = mps_processes()
    try:
        if a.mps:
            mps = Mps()
        # Each PE's share of the SMs under MPS (an MPS daemon may also run
        # outside this script, as in gpu_suite.sh); no effect without MPS.
        if a.backend == "native" and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in os.environ:
            gpus = max(1, gpu_count())
            a.mps_pct = min(100, max(5, 100 * gpus // (a.npes * a.parallel)))
        rows = rows_for(a)
        plan = []
        for row in rows:
            for kind in row["kinds"]:
                for _ in range(row["runs"]):
                    victim = rng.randrange(a.npes) if row["fault"] != "settings" else a.npes - 1
                    plan.append((row, kind, victim, rng.randrange(50, 800)))
        print("fault_matrix: %s backend, %d PEs, %d runs (%d alone), seed %d%s" % (
            a.backend, a.npes, len(plan), sum(alone(a, p[0], p[1]) for p in plan), seed,
            ", under MPS" if a.under_mps else ""), flush=True)
        lock = threading.Lock()

        def run_logged(row, kind, victim, ms):
            if stopping.is_set() or (a.budget > 0 and time.monotonic() - t0 > a.budget):
                with lock:
                    skipped.append("%s / %s" % (row["name"], kind))
                return
            rec = run_one(a, row, kind, victim, ms)
            if rec["mps_refused"] and a.under_mps:
                # (at most once: a second refusal after the server answered
                # a probe is a result)
                with lock:
                    a.restarts.append("%s / %s" % (row["name"], kind))
                    print("  restarting %s / %s: the MPS server refused its PEs at init" % (row["name"], kind),
                          flush=True)
                a.mps_gate.wait("a run its server refused")
                rec = run_one(a, row, kind, victim, ms)
                rec["restarted"] = True
            with lock:
                if stopping.is_set():  # cut short by the stop: no result
                    skipped.append("%s / %s" % (row["name"], kind))
                    return
                recs.append(rec)
                if not rec["ok"]:
                    print("  FAILED: %s / %s, victim %d at %d ms: %s" % (
                        row["name"], kind, victim, ms,
                        json.dumps({k: rec[k] for k in ("hung", "leaked_processes", "gpu_left", "survivors")})),
                        flush=True)

        def worker(items):
            for item in items:
                run_logged(*item)
        a.mps_gate = MpsGate(a)
        a.mps_gate.wait("the start")
        side = [p for p in plan if not alone(a, p[0], p[1])]
        rng.shuffle(side)  # a budget that runs out cuts every row alike

        def run_side():
            threads = [threading.Thread(target=worker, args=(side[i::a.parallel],)) for i in range(a.parallel)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        # Without MPS the runs alone go first (a budget then cuts the side
        # runs, of which there are many per row); under MPS last, each after
        # the server serves clients again.
        if a.under_mps:
            run_side()
        for item in [p for p in plan if alone(a, p[0], p[1])]:
            if a.under_mps:
                a.mps_gate.wait("the previous run")
            run_logged(*item)
        if not a.under_mps:
            run_side()
        if a.under_mps:
            a.mps_gate.wait("the last run")
    except (MpsDown, Interrupted) as e:
        aborted = str(e)
        stopping.set()
        print("fault_matrix: %s; the remaining runs were not made" % aborted, flush=True)
    finally:
        kill_live()  # (an interrupted run): no PE outlives the script or holds the daemon
        if mps:
            mps.stop()
    for t in threading.enumerate():  # runs cut short by kill_live end at once
        if t is not threading.current_thread() and not t.daemon:
            t.join(timeout=10)
    kill_live()
    elapsed = time.monotonic() - t0
    mem1 = gpu_memory_used() if a.backend == "native" else None
    # an MPS daemon the script started is gone by now; one that outlives
    # the runs (a server still counting a dead client) is a leak
    deadline = time.monotonic() + 20
    while len(mps_processes()) > len(mps0) and time.monotonic() < deadline:
        time.sleep(0.5)
    mps1 = mps_processes()
    table = summarize(recs, rows_for(a))
    if mem0 is not None and mem1 is not None:
        table += "\n\nGPU memory in use (nvidia-smi): %d MiB before the runs, %d MiB after." % (mem0, mem1)
    table += "\n\nMPS daemons and servers: %d before the runs, %d after%s." % (
        len(mps0), len(mps1), " (LEAKED: pids %s)" % sorted(set(mps1) - set(mps0)) if len(mps1) > len(mps0) else "")
    if skipped:
        table += "\n\nNot run: %d runs (%s)." % (
            len(skipped), aborted if aborted else "the --budget of %.0f s ran out" % a.budget)
    if a.under_mps and a.mps_gate:
        table += "\n\nUnder MPS: %s; %d runs started again because the server refused their PEs at init%s." % (
            a.mps_gate.summary(), len(a.restarts), (" (" + "; ".join(a.restarts) + ")") if a.restarts else "")
    if aborted:
        table += "\n\nSTOPPED: %s." % aborted
    head = ("Fault matrix, %s backend, %d PEs%s: %d runs in %.0f s (seed %d; "
            "`python3 scripts/fault_matrix.py --backend %s --npes %d --runs-per-kind %d%s`)." % (
                a.backend, a.npes, " under MPS" if a.under_mps else "", len(recs), elapsed, seed,
                a.backend, a.npes, a.runs_per_kind, (" --mps" if a.mps else "") + (" --quick" if a.quick else "") +
                (" --parallel %d" % a.parallel if a.parallel != 1 else "") +
                (" --budget %g" % a.budget if a.budget else "")))
    with open(os.path.join(a.out, "fault_matrix.md"), "w") as f:
        f.write(head + "\n\n" + table + "\n")
    with open(os.path.join(a.out, "fault_matrix.json"), "w") as f:
        json.dump({"seed": seed, "elapsed_s": elapsed, "runs": recs}, f, indent=1)
    print(head)
    print(table)
    if a.doc:
        tag = a.doc_tag or a.backend
        begin, end = "<!-- fault-matrix:%s -->" % tag, "<!-- /fault-matrix:%s -->" % tag
        text = open(a.doc).read()
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            print("fault_matrix: %s has no %s ... %s markers" % (a.doc, begin, end), file=sys.stderr)
        else:
            text = text[:i + len(begin)] + "\n" + head + "\n\n" + table + "\n" + text[j:]
            with open(a.doc, "w") as f:
                f.write(text)
    bad = sum(not r["ok"] for r in recs)
    mps_leak = len(mps1) > len(mps0)
    print("fault_matrix: %s%s%s%s" % ("all %d runs met their bounds" % len(recs) if not bad else "%d runs FAILED" % bad,
                                      "; STOPPED early" if aborted else "",
                                      "; %d runs not made (%s)" % (len(skipped), "stopped" if aborted else "budget")
                                      if skipped else "",
                                      "; an MPS daemon LEAKED" if mps_leak else ""))
    return 1 if bad or aborted or mps_leak else 0


if __name__ == "__main__":
    sys.exit(main())
