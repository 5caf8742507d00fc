"""scripts/_gpu_env.sh and the GPU scripts that source it (no GPU).

Every scripts/gpu_*.sh must source the shared environment before it runs a
step, and none may turn multicast back on afterwards: a multicast object can
take a shared host's GPUs down (docs/design.md, decision 7).
"""
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = os.path.join(REPO, "scripts", "_gpu_env.sh")
SAFE = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
SOURCES_ENV = re.compile(r"^\s*(\.|source)\s+scripts/(_gpu_env|_gemm_common)\.sh\s*$")
RUNS = re.compile(r"\b(steps_exec|symmrun|torchrun|ctest|symm-bench)\b")
# what would undo the shared environment: multicast asked for, or a safe setting dropped or flipped
UNDO = re.compile(r"SYMM_ENABLE_MULTICAST=|NCCL_NVLS_ENABLE=(?!0\b)|NVSHMEM_DISABLE_NVLS=(?!1\b)|"
                  r"TORCH_SYMM_MEM_DISABLE_MULTICAST=(?!1\b)|"
                  r"unset\b.*\b(NCCL_NVLS_ENABLE|NVSHMEM_DISABLE_NVLS|TORCH_SYMM_MEM_DISABLE_MULTICAST)\b")

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def code_lines(path):
    """(number, line) of the lines that are not comments."""
    with open(path) as f:
        return [(i + 1, l) for i, l in enumerate(f) if not l.lstrip().startswith("#")]


def sourced_in_order():
    for path in sorted(glob.glob(os.path.join(REPO, "scripts", "gpu_*.sh"))):
        name = os.path.relpath(path, REPO)
        lines = code_lines(path)
        src = [n for n, l in lines if SOURCES_ENV.match(l)]
        runs = [n for n, l in lines if RUNS.search(l)]
        check(bool(src), "%s sources scripts/_gpu_env.sh (or _gemm_common.sh)" % name)
        if src and runs:
            check(src[0] < runs[0], "%s sources it (line %d) before its first step (line %d)" % (name, src[0], runs[0]))
        undo = ["%d: %s" % (n, l.strip()) for n, l in lines if UNDO.search(l)]
        check(not undo, "%s never undoes the multicast settings%s" % (name, "" if not undo else ": " + "; ".join(undo)))
    common = os.path.join(REPO, "scripts", "_gemm_common.sh")
    check(any(re.match(r"^\s*(\.|source)\s+scripts/_gpu_env\.sh\s*$", l) for _, l in code_lines(common)),
          "scripts/_gemm_common.sh sources scripts/_gpu_env.sh")


BASH = shutil.which("bash") or "/bin/bash"
VARS = ("NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "SYMM_ENABLE_MULTICAST",
        "SYMM_WAIT_TIMEOUT", "LD_LIBRARY_PATH", "rc")


def sourced_env(extra_env, body=":"):
    """The VARS that are set after sourcing _gpu_env.sh and running body, with
    bash builtins only (PATH may hold no programs); None and stderr on failure."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra_env)
    show = "".join('[ -n "${%s+set}" ] && printf "%%s=%%s\\n" %s "$%s"; ' % (v, v, v) for v in VARS)
    out = subprocess.run([BASH, "-c", 'set -u; . "$1"; ' + body + "; " + show + "true", "bash", ENV], env=env,
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return None, out.stderr
    return dict(l.split("=", 1) for l in out.stdout.splitlines() if "=" in l), out.stderr


def hostile_caller():
    got, err = sourced_env({"NCCL_NVLS_ENABLE": "1", "NVSHMEM_DISABLE_NVLS": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0",
                            "SYMM_ENABLE_MULTICAST": "1"})
    check(got is not None, "_gpu_env.sh sources under set -u" + ("" if got is not None else ": " + err))
    if got is None:
        return
    for k, v in SAFE.items():
        check(got.get(k) == v, "a caller's %s is replaced by %s (got %r)" % (k, v, got.get(k)))
    check("SYMM_ENABLE_MULTICAST" not in got, "a caller's SYMM_ENABLE_MULTICAST is removed")
    check(got.get("SYMM_WAIT_TIMEOUT") == "15", "SYMM_WAIT_TIMEOUT defaults to 15 (got %r)" % got.get("SYMM_WAIT_TIMEOUT"))
    kept, _ = sourced_env({"SYMM_WAIT_TIMEOUT": "40"})
    check(kept is not None and kept.get("SYMM_WAIT_TIMEOUT") == "40", "a caller's SYMM_WAIT_TIMEOUT is kept")


def pip_libs():
    d = tempfile.mkdtemp(prefix="symm_gpu_env_")
    empty = tempfile.mkdtemp(prefix="symm_gpu_env_nopy_")
    fake = os.path.join(d, "python3")
    try:
        # a python3 that has the nccl wheel only
        with open(fake, "w") as f:
            f.write('#!%s\ncase "$2" in *nvidia.nccl*) echo /opt/wheels/nccl ;; *) exit 1 ;; esac\n' % BASH)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        got, _ = sourced_env({"PATH": d, "LD_LIBRARY_PATH": "/usr/lib/x"}, "gpu_env_pip_libs; rc=$?")
        check(got is not None and got.get("LD_LIBRARY_PATH") == "/opt/wheels/nccl/lib:/usr/lib/x" and got.get("rc") == "0",
              "gpu_env_pip_libs puts an installed wheel's lib first and skips a missing one (got %r)"
              % (got or {}).get("LD_LIBRARY_PATH"))
        got, _ = sourced_env({"PATH": d}, "gpu_env_pip_libs; rc=$?")
        check(got is not None and got.get("LD_LIBRARY_PATH") == "/opt/wheels/nccl/lib",
              "gpu_env_pip_libs with LD_LIBRARY_PATH unset sets it to the wheel's lib alone (got %r)"
              % (got or {}).get("LD_LIBRARY_PATH"))
        got, err = sourced_env({"PATH": empty}, "gpu_env_pip_libs; rc=$?")
        check(got is not None and got.get("rc") == "0" and "LD_LIBRARY_PATH" not in got,
              "gpu_env_pip_libs without python3 changes nothing and succeeds (%r)" % (got if got is not None else err))
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)


if __name__ == "__main__":
    sourced_in_order()
    hostile_caller()
    pip_libs()
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)
