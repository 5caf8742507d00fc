#!/usr/bin/env python3
"""Check that src/ keeps its layers: no folder includes or calls one above it.

    python3 scripts/check_layers.py --build BUILD_DIR [--graph]

The layers, lowest first, are the lines of src/LAYERS (the one place that
defines them). A folder of src/ is a module; the modules on one line of
src/LAYERS form one layer and are siblings. A file may include and reference
files of its own module and of lower layers, never of a higher layer or of a
sibling; the backends under src/backend/<name>/ are siblings of each other.
Every folder of src/ must be listed.

Two graphs are checked:
  includes    every #include "..." of the .c/.h/.cu/.cuh files under src/
              (headers of include/symm/ are the public API: allowed anywhere)
  references  from the objects the build made for libsymm (nm): which file
              defines each global symbol and which files use it, so calls
              through macros and inline helpers count as well
Since every edge must point to an equal or lower layer and siblings may not
reference each other, the module graph has no cycle. Exit status 1 lists
every offending edge with the file and the name that makes it.

It also checks that hand-written PTX (an asm statement) appears only in
include/symm/device/impl_ptx.h and in a backend's own PTX header
(include/symm/device/backend/<name>_ptx.h), among the files of src/,
include/ and bitcode/.
"""
import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")  # --src changes it (tests/tree checks the checker on a made-up tree)
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# an asm statement (not an asm label such as __asm__("vprintf") on a declaration)
ASM_RE = re.compile(r'\basm\s*(?:volatile\s*)?\(|__asm__\s+volatile|__asm__\s*\(\s*"[^"]*[\s%;{]')
PTX_HOME = os.path.join("include", "symm", "device", "impl_ptx.h")
# each backend's PTX lives with its device file: <name>_ptx.h in this folder
PTX_BACKEND_DIR = os.path.join("include", "symm", "device", "backend")


def ptx_allowed(rel):
    """Whether the file at rel (from the repository root) may hold PTX."""
    return rel == PTX_HOME or (os.path.dirname(rel) == PTX_BACKEND_DIR and rel.endswith("_ptx.h"))


def read_layers(path):
    """[(layer index, module)] in order, from src/LAYERS."""
    layers = {}
    rank = 0
    with open(path) as f:
        for line in f:
            names = line.split("#")[0].split()
            if not names:
                continue
            for name in names:
                if name in layers:
                    sys.exit("src/LAYERS: %s is listed twice" % name)
                layers[name] = rank
            rank += 1
    return layers


def module_of(rel):
    """Module of a path relative to src/: the top folder, or backend/<name>."""
    parts = rel.split(os.sep)
    if len(parts) < 2:
        return None
    if parts[0] == "backend" and len(parts) >= 3:
        return "backend/" + parts[1]
    return parts[0]


def layer_of(module, layers):
    top = module.split("/")[0]
    return layers.get(top)


def allowed(src_mod, dst_mod, layers):
    """May src_mod include or reference dst_mod?"""
    if src_mod == dst_mod:
        return True
    ls, ld = layer_of(src_mod, layers), layer_of(dst_mod, layers)
    if src_mod.split("/")[0] == dst_mod.split("/")[0] == "backend":
        # backend.h / registry.c and the backends: one family, but no backend
        # reaches into another
        return not (src_mod.startswith("backend/") and dst_mod.startswith("backend/"))
    return ld < ls


def source_files():
    for root, _, files in os.walk(SRC):
        for name in files:
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(root, name), SRC)


def include_edges(files):
    """(file, included module, include text) for every include of another module."""
    for rel in files:
        with open(os.path.join(SRC, rel), errors="replace") as f:
            text = f.read()
        for inc in INCLUDE_RE.findall(text):
            if inc.startswith("symm/"):
                continue  # the public API
            if "/" in inc:
                target = inc
            else:
                target = os.path.join(os.path.dirname(rel), inc)
            if os.path.exists(os.path.join(SRC, target)):
                yield rel, module_of(target), inc


def ptx_outside(root):
    """Files under root's src/, include/ and bitcode/ with an asm statement,
    impl_ptx.h and the backends' <name>_ptx.h excepted."""
    bad = []
    for top in ("src", "include", "bitcode"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if not name.endswith(SOURCE_EXT) or ptx_allowed(rel):
                    continue
                with open(os.path.join(root, rel), errors="replace") as f:
                    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", f.read(), flags=re.S)
                if ASM_RE.search(text):
                    bad.append(rel)
    return bad


def object_symbols(build):
    """{source rel path: (defined set, undefined set)} from libsymm's objects."""
    objdir = os.path.join(build, "src", "CMakeFiles", "symm.dir")
    if not os.path.isdir(objdir):
        sys.exit("check_layers: %s not found: build libsymm first (cmake --build %s)" % (objdir, build))
    out = {}
    for root, _, files in os.walk(objdir):
        for name in files:
            if not name.endswith(".o"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, objdir)[:-2]  # runtime/init.c
            if not os.path.exists(os.path.join(SRC, rel)):
                continue  # an object of a source that no longer exists
            nm = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
            defined, used = set(), set()
            for line in nm.splitlines():
                f = line.split()
                if len(f) < 2:
                    continue
                sym, kind = f[0], f[1]
                if kind == "U":
                    used.add(sym)
                elif kind in "TDBRCG" and not sym.startswith("."):
                    defined.add(sym)
            out[rel] = (defined, used)
    if not out:
        sys.exit("check_layers: no objects under %s" % objdir)
    return out


def reference_edges(objs):
    owner = {}
    dup = set()
    for rel, (defined, _) in objs.items():
        for sym in defined:
            if sym in owner and owner[sym] != rel:
                dup.add(sym)
            owner[sym] = rel
    for rel, (_, used) in objs.items():
        for sym in sorted(used):
            if sym in owner and sym not in dup:
                yield rel, module_of(owner[sym]), sym


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the CMake build folder (libsymm's objects)")
    ap.add_argument("--graph", action="store_true", help="print the module graph")
    ap.add_argument("--src", help="the source tree to check (default: this repository's src/)")
    args = ap.parse_args()
    global SRC
    if args.src:
        SRC = os.path.abspath(args.src)
    layers = read_layers(os.path.join(SRC, "LAYERS"))

    files = sorted(source_files())
    bad = []
    unlisted = sorted({module_of(f).split("/")[0] for f in files if module_of(f)} - set(layers))
    for m in unlisted:
        bad.append("src/%s/ is not in src/LAYERS: add it on the line of its layer" % m)

    graph = {}
    for rel, dst, inc in include_edges(files):
        src = module_of(rel)
        if src is None or dst is None or src == dst:
            continue
        graph.setdefault((src, dst), set()).add('%s includes "%s"' % (rel, inc))
    for rel, dst, sym in reference_edges(object_symbols(args.build)):
        src = module_of(rel)
        if src is None or dst is None or src == dst:
            continue
        graph.setdefault((src, dst), set()).add("%s uses %s" % (rel, sym))

    for (src, dst), why in sorted(graph.items()):
        if layer_of(src, layers) is None or layer_of(dst, layers) is None:
            continue  # reported above
        if not allowed(src, dst, layers):
            for w in sorted(why):
                bad.append("%s -> %s: %s" % (src, dst, w))
    for rel in ptx_outside(os.path.dirname(SRC)):
        bad.append("%s: hand-written PTX outside %s and %s/<name>_ptx.h (add a helper there)"
                   % (rel, PTX_HOME, PTX_BACKEND_DIR))
    if args.graph:
        for (src, dst), why in sorted(graph.items()):
            print("%-16s -> %-16s (%d)" % (src, dst, len(why)))
    if bad:
        print("check_layers: %d problems (a lower layer may not include or call a higher one, nor "
              "a sibling; PTX only in %s and %s/<name>_ptx.h):" % (len(bad), PTX_HOME, PTX_BACKEND_DIR))
        for b in bad:
            print("  " + b)
        return 1
    print("check_layers: %d files, %d module edges, all downward (%s); PTX only in impl_ptx.h and backend/*_ptx.h"
          % (len(files), len(graph), " < ".join(
              "/".join(m for m in layers if layers[m] == r) for r in sorted(set(layers.values())))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
