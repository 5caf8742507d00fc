"""`pip wheel .` builds the package (libsymm through CMake and
scikit-build-core), and the installed package finds its library, bitcode and
headers inside itself, with no GPU and no source tree around."""
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import REPO, in_ci  # noqa: E402


def _require(cond, why):
    if not cond:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


def _env_with_nvcc():
    env = dict(os.environ)
    if not shutil.which("nvcc") and os.path.exists("/usr/local/cuda/bin/nvcc"):
        env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    for var in ("SYMM_LIBRARY", "SYMM_BITCODE_DIR", "PYTHONPATH"):
        env.pop(var, None)
    return env


CHECK = r"""
import os, sys
site = sys.argv[1]
import symm
assert symm.__file__.startswith(site), symm.__file__
lib = os.path.join(site, "symm", "lib")
assert symm.library_path() == os.path.join(lib, "libsymm.so.0"), symm.library_path()
assert symm.include_dir() == os.path.join(site, "symm", "include")
assert os.path.isfile(os.path.join(symm.include_dir(), "symm", "symm_device.h"))
if sys.argv[2] == "1":
    assert symm.bitcode_path(80) == os.path.join(lib, "libsymm_device_sm80.bc")
    assert symm.bitcode_path(90) == os.path.join(lib, "libsymm_device_sm90.bc")
    assert os.path.isfile(symm.bitcode_path())
try:
    symm.init()
except symm.NoDeviceError as e:
    print("NODEVICE", e)
else:
    symm.finalize()
    print("GPU")
os.environ["SYMM_BACKEND"] = "host"
symm.init()
p = symm.malloc(4096)
assert symm.n_pes() == 1 and p
symm.free(p)
symm.finalize()
print("OK")
"""


def test_wheel_builds_and_finds_its_parts(tmp_path):
    _require(importlib.util.find_spec("scikit_build_core") is not None,
             "scikit-build-core not installed (pip install scikit-build-core)")
    env = _env_with_nvcc()
    _require(shutil.which("nvcc", path=env["PATH"]) is not None, "nvcc not found")
    build_dir = os.environ.get("SYMM_WHEEL_BUILD_DIR") or str(tmp_path / "build")
    dist = tmp_path / "dist"
    # One CUDA architecture keeps this build short; the layout is what is tested.
    cmd = [sys.executable, "-m", "pip", "wheel", REPO, "--no-build-isolation", "--no-deps",
           "-w", str(dist), "-Cbuild-dir=" + build_dir,
           "-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=850)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    wheels = glob.glob(str(dist / "symm-*.whl"))
    assert len(wheels) == 1, wheels
    assert os.path.basename(wheels[0]).endswith("-py3-none-linux_x86_64.whl"), wheels[0]

    names = set(zipfile.ZipFile(wheels[0]).namelist())
    for need in ("symm/__init__.py", "symm/lib/libsymm.so.0", "symm/bin/symmrun", "symm/bin/symm-info",
                 "symm/include/symm/symm.h",
                 "symm/include/symm/symm_device.h", "symm/include/symm/device/impl.h",
                 "symm/include/symm/device/backend/list.h", "symm/include/symm/device/backend/dispatch.h",
                 "symm/include/symm/contract/coll_layout.h", "symm/_backends.py",
                 "symm/triton/__init__.py", "symm/triton/_api.py", "symm/triton/raw.py",
                 "symm/cute/__init__.py", "symm/cute/raw.py", "symm/cubin.py",
                 "symm/moe/__init__.py", "symm/moe/deep_ep.py"):
        assert need in names, need
    have_bitcode = bool(shutil.which("clang-19")) and bool(shutil.which("llvm-dis-19"))
    if have_bitcode:
        for bc in ("libsymm_device.bc", "libsymm_device_sm80.bc", "libsymm_device_sm90.bc"):
            assert "symm/lib/" + bc in names, bc
    assert not any("__pycache__" in n or n.startswith(("lib/", "bin/", "include/")) for n in names)

    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                        "--target", str(site), wheels[0]], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    run_env = dict(env, PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-c", CHECK, str(site), "1" if have_bitcode else "0"],
                       env=run_env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("OK"), r.stdout
    if not os.path.exists("/dev/nvidia0"):
        assert "NODEVICE symm_init failed: SYMM_ERR_NO_DEVICE" in r.stdout, r.stdout
        assert "no GPU found" in r.stdout, r.stdout
        # the message comes once, in the exception: nothing on stderr
        assert "no GPU found" not in r.stderr, r.stderr

    # the console commands pip made (--target puts them in site/bin) run the
    # wheel's programs, which find the wheel's libsymm
    r = subprocess.run([str(site / "bin" / "symm-info")], env=run_env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "symm 0.1.0" in r.stdout and "SYMM_LOG_LEVEL" in r.stdout, \
        r.stdout + r.stderr
    if not os.path.exists("/dev/nvidia0"):
        assert "GPUs: no GPU found" in r.stdout, r.stdout
    r = subprocess.run([str(site / "bin" / "symmrun"), "-n", "2", "true"], env=run_env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
