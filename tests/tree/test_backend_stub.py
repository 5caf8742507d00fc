"""A backend added by the steps of docs/backends.md ("Adding a backend") and
nothing else builds and is listed everywhere the list reaches.

    python3 tests/tree/test_backend_stub.py CC [CLANG19] [CMAKE] [NVCC]

On a copy of the tree it adds a `stub` backend in the documented steps, from
the files of tests/tree/stub_backend/:
  1. folder   src/backend/stub/stub.c (its ops table)
  2. header   include/symm/device/backend/stub.h, and its include line in dispatch.h
  3. list     its line in include/symm/device/backend/list.h, its kind in
              enum symm_backend_kind (include/symm/symm_types.h)
  4. cmake    cmake/backend/stub.cmake
  5. Python   python/tools/gen_consts.py and gen_backends.py rerun
and checks, in the copy:
  - every C file of src/ that includes the ops table (backend/backend.h) or
    the list compiles with -Wall -Wextra -Werror (the host expansions of the
    list: registry, ops declarations), stub.c among them;
  - the registry finds every backend of the list, the stub as its own table
    (registry.c and stub.c linked with placeholders for the other tables);
  - with CLANG19: the device API compiles for nvptx as the bitcode is built,
    without the stub (no call into the stub's library), with
    SYMM_DEVICE_WITH_STUB and with SYMM_DEVICE_BACKEND=stub (calls into it);
  - with CMAKE (and NVCC, the CUDA compiler): the copy configures; it includes
    cmake/backend/stub.cmake; the bitcode rules (bitcode/CMakeLists.txt) build
    libsymm_device_stub_sm90.bc and its traced twin from the C source fixed to
    the stub (where clang-19 is); `ctest -N` lists the tests every backend of
    the list gets (the collectives' 1-PE suite on it, its library's loading
    messages) for the stub, beside nvshmem's and nccl's, and no test of the
    original tree is lost; the device suites that need the stub's library,
    which it has none of, are left out with the reason printed;
  - symm._backends lists stub with its kind and columns, and symm._lib
    counts it among the backends kernels are compiled for.
None of the bitcode rules or test lists is edited: they loop over the list.
libsymm's CUDA files are not rebuilt (minutes of nvcc): the stub has no code
in them beyond the dispatch, which the nvptx compilation covers.
"""
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUB = os.path.join(REPO, "tests", "tree", "stub_backend")

LIST_LINE = ('    X(stub,    STUB,    far,  "libsymm_device_stub",    "",                  '
             '"SYMM_STUB_INCLUDE_DIR",    0)')

REGISTRY_MAIN = r'''
#include <stdio.h>
#include <string.h>
#include "backend/backend.h"
#include "bootstrap/agree.h"

/* Placeholders for the tables this program does not link: a backend's own
 * file (stub.c) defines the real one. */
#define SYMM__X(be, KIND, ...) \
    __attribute__((weak)) const symm__backend_ops_t symm__backend_##be##_ops = {.name = #be, .kind = SYMM_BACKEND_##KIND};
SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X

__attribute__((weak)) symm_status_t symm__bootstrap_agree(symm__bootstrap_t *b, symm_status_t mine,
                                                          symm_status_t code, const char *what) {
    (void)b; (void)code; (void)what;
    return mine;
}

int main(void) {
    int bad = 0;
#define SYMM__X(be, ...)                                                                     \
    {                                                                                        \
        const symm__backend_ops_t *o = symm__backend_find(#be);                             \
        if (!o || strcmp(o->name, #be) != 0) {                                               \
            printf("registry: %s not found\n", #be);                                        \
            bad = 1;                                                                         \
        }                                                                                    \
    }
    SYMM__BACKEND_LIST(SYMM__X)
#undef SYMM__X
    const symm__backend_ops_t *s = symm__backend_find("stub");
    if (s != &symm__backend_stub_ops || !s->open || s->kind != SYMM_BACKEND_STUB) {
        printf("registry: stub is not its own table (kind %u)\n", s ? s->kind : 0u);
        bad = 1;
    }
    if (symm__backend_find("nonesuch")) {
        printf("registry: found a backend that is not listed\n");
        bad = 1;
    }
    printf(bad ? "registry: FAILED\n" : "registry: every listed backend found, stub as its own table\n");
    return bad;
}
'''

# what every backend of the list gets, whatever its library (cmake/symm_backends.cmake)
STUB_TESTS = ("coll_errors_stub_1", "coll_move_stub_1", "coll_matrix_stub_1",
              "backend_load_stub_missing_1", "backend_load_stub_missing_2")
STUB_BITCODE = ("libsymm_device_stub_sm90.bc", "libsymm_device_stub_sm90_trace.bc")
# the top folders a configure reads
TREE = ("CMakeLists.txt", "cmake", "include", "src", "tools", "tests", "bench", "bitcode", "python")


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        sys.exit("test_backend_stub: %s: expected one %r" % (path, old))
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def add_stub(root):
    """The steps of docs/backends.md, on the tree at root."""
    os.makedirs(os.path.join(root, "src", "backend", "stub"))
    shutil.copy(os.path.join(STUB, "stub.c"), os.path.join(root, "src", "backend", "stub", "stub.c"))
    dev = os.path.join(root, "include", "symm", "device", "backend")
    shutil.copy(os.path.join(STUB, "stub.h"), os.path.join(dev, "stub.h"))
    edit(os.path.join(dev, "dispatch.h"), '#include "symm/device/backend/nccl.h"\n',
         '#include "symm/device/backend/nccl.h"\n#include "symm/device/backend/stub.h"\n')
    with open(os.path.join(dev, "list.h")) as f:
        text = f.read()
    # the new line after the list's last one
    m = re.search(r"(#define SYMM__BACKEND_LIST\(X\)(?:[^\n]*\\\n)*)([^\n]*)\n", text)
    if not m:
        sys.exit("test_backend_stub: no SYMM__BACKEND_LIST in list.h")
    last = m.group(2).rstrip()
    text = text[:m.start(2)] + last + " \\\n" + LIST_LINE + text[m.end(2):]
    with open(os.path.join(dev, "list.h"), "w") as f:
        f.write(text)
    types_h = os.path.join(root, "include", "symm", "symm_types.h")
    with open(types_h) as f:
        text = f.read()
    m = re.search(r"(enum symm_backend_kind \{.*?)(\n\};)", text, re.S)
    if not m:
        sys.exit("test_backend_stub: no enum symm_backend_kind in symm_types.h")
    text = text[:m.end(1)] + ",\n    SYMM_BACKEND_STUB    = 4" + text[m.end(1):]
    with open(types_h, "w") as f:
        f.write(text)
    shutil.copy(os.path.join(STUB, "stub.cmake"), os.path.join(root, "cmake", "backend", "stub.cmake"))
    for tool in ("gen_consts.py", "gen_backends.py"):
        subprocess.run([sys.executable, os.path.join(root, "python", "tools", tool)], check=True,
                       capture_output=True)


def run(cmd, what, failures, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        failures.append("%s failed (%s):\n%s%s" % (what, " ".join(cmd[:3]) + " ...", r.stdout, r.stderr))
    return r


def check_host(root, cc, work, failures):
    src = os.path.join(root, "src")
    inc = ["-I", os.path.join(root, "include"), "-I", src]
    flags = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-DSYMM_BUILDING_LIB=1"]
    files = []  # the C files that expand the list: through the ops table or the list itself
    for dirpath, _, names in os.walk(src):
        for n in sorted(names):
            path = os.path.join(dirpath, n)
            if n.endswith(".c"):
                with open(path) as f:
                    text = f.read()
                if '"backend/backend.h"' in text or '"symm/device/backend/' in text:
                    files.append(path)
    if not any(f.endswith(os.path.join("backend", "stub", "stub.c")) for f in files):
        failures.append("src/backend/stub/stub.c not among the sources")
    # in parallel: these are the slow part
    procs = [(f, subprocess.Popen([cc] + flags + inc + ["-fsyntax-only", f], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)) for f in files]
    for f, p in procs:
        out = p.communicate()[0]
        if p.returncode != 0:
            failures.append("%s does not compile with the stub:\n%s" % (os.path.relpath(f, root), out))
    main = os.path.join(work, "registry_main.c")
    with open(main, "w") as f:
        f.write(REGISTRY_MAIN)
    exe = os.path.join(work, "registry_main")
    r = run([cc] + flags + inc + [main, os.path.join(src, "backend", "registry.c"),
                                  os.path.join(src, "backend", "stub", "stub.c"),
                                  ] + sorted(os.path.join(src, "core", n) for n in os.listdir(os.path.join(src, "core"))
                                             if n.endswith(".c")) +
            ["-o", exe, "-lpthread"], "linking the registry with the stub", failures)
    if r.returncode == 0:
        r = run([exe], "the registry program", failures)
        print(r.stdout.strip())
    return len(files)


def check_device(root, clang, work, failures):
    src = os.path.join(root, "bitcode", "symm_device_bitcode.c")
    # -O0: the exported functions still call through the dispatch, and it is fast
    base = [clang, "-x", "c", "-std=gnu11", "--target=nvptx64-nvidia-cuda", "-nostdlibinc", "-O0", "-S",
            "-emit-llvm", "-DSYMM_BITCODE=1", "-march=sm_90", "-I", os.path.join(root, "include"),
            "-Wall", "-Wextra", "-Werror", src]
    for what, extra, want in (("without the stub", [], False),
                              ("with SYMM_DEVICE_WITH_STUB", ["-DSYMM_DEVICE_WITH_STUB=1"], True),
                              ("with SYMM_DEVICE_BACKEND=stub", ["-DSYMM_DEVICE_BACKEND=stub"], True)):
        out = os.path.join(work, "dev.ll")
        r = run(base + extra + ["-o", out], "the device API for nvptx " + what, failures)
        if r.returncode != 0:
            continue
        with open(out) as f:
            calls = "symm_stub_lib_call" in f.read()
        if calls != want:
            failures.append("the device API %s %s the stub's library" % (what, "does not call" if want else "calls"))
        else:
            print("device: %s: %s the stub's library" % (what, "calls" if want else "does not call"))


def ctest_names(build):
    r = subprocess.run(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True)
    return set(re.findall(r"^\s*Test\s+#\d+: (\S+)", r.stdout, re.M))


def configure(root, build, cmake, cc, nvcc):
    cmd = [cmake, "-S", root, "-B", build, "-DCMAKE_C_COMPILER=" + cc, "-DCMAKE_BUILD_TYPE=Release"]
    if nvcc:
        cmd.append("-DCMAKE_CUDA_COMPILER=" + nvcc)
    return subprocess.run(cmd, capture_output=True, text=True)


def check_cmake(root, work, cmake, cc, nvcc, clang, failures):
    """Configure the copy: the stub's cmake file, bitcode rule and tests come
    from the list alone; the tree without the stub gives the tests to keep."""
    r = configure(root, os.path.join(work, "build"), cmake, cc, nvcc)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        failures.append("the tree with the stub does not configure:\n" + out[-4000:])
        return
    if "symm: stub backend: nothing to find" not in out:
        failures.append("cmake/backend/stub.cmake was not included:\n" + out[-2000:])
    else:
        print("cmake: the top CMakeLists.txt includes cmake/backend/stub.cmake")
    why = re.search(r"symm: the device suites on the stub backend are NOT built: ([^\n]*)", out)
    if not why:
        failures.append("configure does not say why the stub's device suites are not built")
    else:
        print("cmake: %s" % why.group(0))
    if clang:
        rules = os.path.join(work, "build", "bitcode", "CMakeFiles", "symm_device_bitcode.dir", "build.make")
        try:
            with open(rules) as f:
                text = f.read()
        except OSError:
            text = ""
        for bc in STUB_BITCODE:
            # the rule's block: its dependency lines and its commands, up to a blank line
            rule = re.search(r"^bitcode/%s:[^\n]*\n(?:[^\n]+\n)*" % re.escape(bc), text, re.M)
            if not rule or "-DSYMM_DEVICE_BACKEND=stub" not in rule.group(0) or \
                    "symm_device_bitcode.c" not in rule.group(0):
                failures.append("bitcode/: no rule building %s from symm_device_bitcode.c with "
                                "-DSYMM_DEVICE_BACKEND=stub (%s)" % (bc, rules))
        else:
            print("bitcode: rules for %s" % ", ".join(STUB_BITCODE))
    with_stub = ctest_names(os.path.join(work, "build"))
    missing = [t for t in STUB_TESTS if t not in with_stub]
    if missing:
        failures.append("ctest -N does not list %s (stub tests listed: %s)" % (
            ", ".join(missing), ", ".join(sorted(t for t in with_stub if "stub" in t)) or "none"))
    else:
        print("ctest: lists %s" % ", ".join(STUB_TESTS))
    return with_stub


def check_python(root, failures):
    pkg = types.ModuleType("symm_stub_copy")
    pkg.__path__ = [os.path.join(root, "python", "symm")]
    sys.modules["symm_stub_copy"] = pkg
    consts = importlib.import_module("symm_stub_copy._consts")
    backends = importlib.import_module("symm_stub_copy._backends")
    lib = importlib.import_module("symm_stub_copy._lib")
    b = backends.BACKENDS.get("stub")
    if b is None:
        failures.append("_backends does not list stub: %s" % list(backends.BACKENDS))
        return
    want = backends.Backend("stub", 4, True, "libsymm_device_stub", None, "SYMM_STUB_INCLUDE_DIR", False)
    if b != want or consts.BACKEND_STUB != 4:
        failures.append("_backends lists stub as %r (want %r)" % (b, want))
    if "stub" not in lib.BACKENDS or "stub" not in lib.SCALE_OUT_BACKENDS:
        failures.append("symm._lib does not count stub: %s / %s" % (lib.BACKENDS, lib.SCALE_OUT_BACKENDS))
    print("python: _backends lists %s" % ", ".join(backends.BACKENDS))


def main():
    cc = sys.argv[1] if len(sys.argv) > 1 else "cc"
    clang = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    cmake = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    nvcc = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
    failures = []
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "tree")
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
        for top in TREE:
            src = os.path.join(REPO, top)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(root, top), ignore=ignore)
            else:
                os.makedirs(root, exist_ok=True)
                shutil.copy(src, os.path.join(root, top))
        before = None
        if cmake:
            # the tree as it is, for the tests the stub must not take away
            r = configure(root, os.path.join(work, "build-before"), cmake, cc, nvcc)
            if r.returncode != 0:
                failures.append("the tree without the stub does not configure:\n" + (r.stdout + r.stderr)[-4000:])
            else:
                before = ctest_names(os.path.join(work, "build-before"))
        add_stub(root)
        n = check_host(root, cc, work, failures)
        print("host: the %d C files of src/ that include the ops table or the list compile with the stub" % n)
        if clang:
            check_device(root, clang, work, failures)
        else:
            print("device: SKIPPED (no clang-19 given)")
        if cmake:
            after = check_cmake(root, work, cmake, cc, nvcc, clang, failures)
            if before is not None and after is not None:
                lost = sorted(before - after)
                if lost:
                    failures.append("the stub takes tests away: %s" % ", ".join(lost[:20]))
                else:
                    print("ctest: %d tests without the stub, all kept; %d with it" % (len(before), len(after)))
        else:
            print("cmake: SKIPPED (no cmake given)")
        check_python(root, failures)
    if failures:
        print("\n".join(failures))
        return 1
    print("test_backend_stub: a backend added by the documented steps builds and is listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
