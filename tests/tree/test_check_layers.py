"""scripts/check_layers.py on a made-up tree: it passes a tree whose calls go
down, and names every include and call that goes up, sideways between
siblings, or into a folder src/LAYERS does not list.

    python3 tests/tree/test_check_layers.py CC
"""
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(REPO, "scripts", "check_layers.py")

LAYERS = "core\nruntime\ncoll moe\n"
# an asm label on a declaration is not PTX: allowed anywhere
LABEL = 'extern int symm__vprintf(const char *f, void *a) __asm__("vprintf");\n'

FILES = {
    "core/log.c": "int core_log(void) { return 1; }\n",
    "runtime/init.c": '#include "core/log.h"\nint core_log(void);\nint rt_init(void) { return core_log(); }\n',
    "core/log.h": "int core_log(void);\n" + LABEL,
    "coll/host.c": "int rt_init(void);\nint coll_run(void) { return rt_init(); }\n",
    "moe/moe.c": "int rt_init(void);\nint moe_run(void) { return rt_init(); }\n",
    # a backend's own PTX header: allowed
    "../include/symm/device/backend/lib_ptx.h": 'static inline void s(void) { asm volatile("st.global.wt.u32 [%0], 0;" ::"l"(0)); }\n',
}


def tree(root, files, layers=LAYERS, cc="cc"):
    src = os.path.join(root, "src")
    objdir = os.path.join(root, "build", "src", "CMakeFiles", "symm.dir")
    for rel, text in files.items():
        path = os.path.join(src, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for rel in files:
        if rel.endswith(".c"):
            obj = os.path.join(objdir, rel + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run([cc, "-c", "-I", src, os.path.join(src, rel), "-o", obj], check=True)
    with open(os.path.join(src, "LAYERS"), "w") as f:
        f.write(layers)
    return src, os.path.join(root, "build")


def check(src, build):
    r = subprocess.run([sys.executable, CHECK, "--src", src, "--build", build],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    cc = sys.argv[1] if len(sys.argv) > 1 else "cc"
    failures = []
    with tempfile.TemporaryDirectory() as d:
        rc, out = check(*tree(os.path.join(d, "good"), FILES, cc=cc))
        if rc != 0 or "all downward" not in out:
            failures.append("a downward tree was refused:\n" + out)

        bad = dict(FILES)
        bad["core/log.c"] = '#include "runtime/rt.h"\nint rt_init(void);\nint core_log(void) { return rt_init(); }\n'
        bad["runtime/rt.h"] = "int rt_init(void);\n"
        bad["moe/moe.c"] = "int coll_run(void);\nint moe_run(void) { return coll_run(); }\n"
        bad["stray/x.c"] = "int stray(void) { return 0; }\n"
        bad["runtime/fence.h"] = 'static inline void f(void) { asm volatile("fence.sc.sys;" ::: "memory"); }\n'
        bad["../include/symm/device/backend/lib.h"] = bad["runtime/fence.h"]  # a backend's device file, not its _ptx.h

        rc, out = check(*tree(os.path.join(d, "bad"), bad, cc=cc))
        want = ['core -> runtime: core/log.c includes "runtime/rt.h"',
                "core -> runtime: core/log.c uses rt_init",
                "moe -> coll: moe/moe.c uses coll_run",
                "src/stray/ is not in src/LAYERS",
                "src/runtime/fence.h: hand-written PTX outside",
                "include/symm/device/backend/lib.h: hand-written PTX outside"]
        if rc != 1:
            failures.append("a tree with upward calls passed:\n" + out)
        for w in want:
            if w not in out:
                failures.append("not reported: %s\n%s" % (w, out))
    if failures:
        print("\n".join(failures))
        return 1
    print("check_layers: passes a downward tree; names an upward include, an upward call, a call "
          "between siblings, an unlisted folder and PTX outside impl_ptx.h and backend/*_ptx.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
