"""A backend added by the steps of docs/backends.md ("Adding a backend") and
nothing else builds and is listed everywhere the list reaches.

    python3 tests/tree/test_backend_stub.py CC [CLANG19] [CMAKE]

On a copy of the tree (include/, src/, cmake/, bitcode/, python/) it adds a
`stub` backend in the documented steps, from the files of
tests/tree/stub_backend/:
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
  - with CMAKE: cmake/backend/stub.cmake is included (a script that does what
    the top CMakeLists.txt does with cmake/backend/*.cmake);
  - symm._backends lists stub with its kind and columns, and symm._lib
    counts it among the backends kernels are compiled for.
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

CMAKE_SCRIPT = r'''
file(GLOB _files "${ROOT}/cmake/backend/*.cmake")
list(SORT _files)
foreach(_f IN LISTS _files)
  get_filename_component(_n "${_f}" NAME_WE)
  message(STATUS "backend cmake: ${_n}")
endforeach()
include("${ROOT}/cmake/backend/stub.cmake")
if(NOT DEFINED SYMM_STUB_INCLUDE_DIR)
  message(FATAL_ERROR "cmake/backend/stub.cmake did not set SYMM_STUB_INCLUDE_DIR")
endif()
'''


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
    failures = []
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "tree")
        for top in ("include", "src", "cmake", "bitcode"):
            shutil.copytree(os.path.join(REPO, top), os.path.join(root, top))
        shutil.copytree(os.path.join(REPO, "python", "tools"), os.path.join(root, "python", "tools"))
        shutil.copytree(os.path.join(REPO, "python", "symm"), os.path.join(root, "python", "symm"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        add_stub(root)
        n = check_host(root, cc, work, failures)
        print("host: the %d C files of src/ that include the ops table or the list compile with the stub" % n)
        if clang:
            check_device(root, clang, work, failures)
        else:
            print("device: SKIPPED (no clang-19 given)")
        if cmake:
            script = os.path.join(work, "backends.cmake")
            with open(script, "w") as f:
                f.write(CMAKE_SCRIPT)
            r = run([cmake, "-DROOT=" + root, "-P", script], "cmake/backend/stub.cmake", failures)
            if "backend cmake: stub" in r.stdout + r.stderr:
                print("cmake: cmake/backend/*.cmake includes stub.cmake")
            elif r.returncode == 0:
                failures.append("cmake/backend/stub.cmake not found by the glob:\n" + r.stdout + r.stderr)
        check_python(root, failures)
    if failures:
        print("\n".join(failures))
        return 1
    print("test_backend_stub: a backend added by the documented steps builds and is listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
