"""Shared helpers of the Python tests: paths, running snippets as PEs."""
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "python")
INCLUDE_DIR = os.path.join(REPO, "include")


def in_ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def have_library():
    """Is libsymm.so there for the package to load? In CI it must be."""
    sys.path.insert(0, PYTHON_DIR)
    import symm
    try:
        symm.library_path()
        return True
    except symm.LibraryNotFoundError:
        if in_ci():
            raise
        return False


def optional_import(name):
    """Import module `name`; None where it is missing, but in CI (which
    installs it) the ImportError is a failure rather than a skip."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        if in_ci():
            raise
        return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(extra=None):
    """The environment for a child Python that imports symm from this tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                "SLURM_NTASKS"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def run_python(code, env=None, timeout=60):
    """Run `code` in a fresh interpreter; returns CompletedProcess."""
    return subprocess.run([sys.executable, "-c", code], env=child_env(env), capture_output=True,
                          text=True, timeout=timeout)


def run_pes(code, n, env=None, timeout=90):
    """Run `code` as n PEs launched like torchrun does (RANK, WORLD_SIZE...),
    with SYMM_BACKEND=host unless env says otherwise. Returns the
    CompletedProcess-like results, indexed by rank."""
    port = free_port()
    procs = []
    for r in range(n):
        e = {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r),
             "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
             "SYMM_BACKEND": "host", "SYMM_BOOTSTRAP_TIMEOUT": "30"}
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=child_env(e),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += "\n(timed out)"
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def describe(results):
    return "\n".join("--- PE %d rc=%s\nstdout:\n%s\nstderr:\n%s" % (i, r.returncode, r.stdout, r.stderr)
                     for i, r in enumerate(results))


def check_generator_catches_stale(tmp_path, generator, generated, stale, cc):
    """Run python/tools/<generator> --check on a copy of the files it makes
    (`generated`, paths under symm/): it passes on the copy as it is, and
    fails, naming the file, when `stale` (one of them, or None) lost a line."""
    import shutil
    import subprocess
    import sys
    for rel in generated:
        dst = tmp_path / "symm" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(PYTHON_DIR, "symm", rel), dst)
    if stale:
        path = tmp_path / "symm" / stale
        lines = path.read_text().split("\n")
        path.write_text("\n".join(lines[:len(lines) // 2] + lines[len(lines) // 2 + 1:]))
    r = subprocess.run([sys.executable, os.path.join(PYTHON_DIR, "tools", generator), "--check", "--cc", cc,
                        "--python-dir", str(tmp_path)], capture_output=True, text=True)
    if stale is None:
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        assert r.returncode == 1 and "stale: " + os.path.join("symm", stale) in r.stdout, r.stdout + r.stderr
