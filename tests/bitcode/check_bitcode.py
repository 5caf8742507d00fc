#!/usr/bin/env python3
"""Check that libsymm_device*.bc is exactly the documented device API.

The documented API is what include/symm/symm_device.h (with
symm_device_coll.h) declares. The declarations are taken from the header run
through the C preprocessor in host mode, where SYMM_DEVICE_FN is `extern` and
the SYMM_FOR_EACH_*_TYPE lists are expanded by the same macros users get.
The bitcode is read through llvm-dis. The check fails when

  - a declared function is not defined by the bitcode, or is not exported;
  - the bitcode exports a function the headers do not declare (internal
    helpers must be static);
  - a function's LLVM return or parameter types differ from what its C
    declaration lowers to (including signext/zeroext on 8/16-bit integers,
    which a DSL's call must match);
  - the bitcode has global state a loader would have to set up per module:
    an externally visible global, a writable global, shared memory, or a
    __constant__ (addrspace 4) object;
  - it calls an external function other than LLVM intrinsics and the PTX
    system calls the CUDA driver provides (vprintf, __assertfail), or, in the
    nvshmem file (libsymm_device_nvshmem_*.bc), NVSHMEM's device functions,
    which NVSHMEM's libnvshmem_device.bc provides beside it;
  - it is not built for nvptx64-nvidia-cuda and the architecture its name says.

Usage: check_bitcode.py --cc CC --llvm-dis LLVM_DIS --include DIR BITCODE...
The functions are importable for the checker's own tests.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# C types of the device API and their LLVM IR types (nvptx64: LP64).
C_TO_LLVM = {
    "void": "void",
    "int": "i32", "unsigned": "i32", "unsigned int": "i32",
    "long": "i64", "unsigned long": "i64", "long long": "i64", "unsigned long long": "i64",
    "int8_t": "i8", "int16_t": "i16", "int32_t": "i32", "int64_t": "i64",
    "uint8_t": "i8", "uint16_t": "i16", "uint32_t": "i32", "uint64_t": "i64",
    "size_t": "i64", "ptrdiff_t": "i64", "uintptr_t": "i64",
    "float": "float", "double": "double",
    "char": "i8", "signed char": "i8", "unsigned char": "i8",
    "short": "i16", "unsigned short": "i16",
    "_Bool": "i1", "bool": "i1",
}
# Small integers are passed extended; the attribute says how.
SIGNED_SMALL = {"int8_t", "int16_t", "char", "signed char", "short"}
UNSIGNED_SMALL = {"uint8_t", "uint16_t", "unsigned char", "unsigned short", "_Bool", "bool"}

ALLOWED_EXTERNAL_CALLS = {"vprintf", "__assertfail"}
# Files of one scale-out backend may also call its library's device functions.
ALLOWED_EXTERNAL_PREFIXES = {"nvshmem": ("nvshmem_", "nvshmemx_")}
LLVM_TYPES = re.compile(r"^(void|i\d+|half|bfloat|float|double|ptr)$")
LINKAGES = {"private", "internal", "available_externally", "linkonce", "weak", "common",
            "appending", "extern_weak", "linkonce_odr", "weak_odr", "external"}
QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "extern", "struct", "enum"}


class Decl:
    """One function signature: name, return type, parameter types (C or LLVM)
    and, from the header, parameter names."""

    def __init__(self, name, ret, params, names=None):
        self.name, self.ret, self.params = name, ret, list(params)
        self.names = list(names) if names is not None else None

    def __repr__(self):
        return "%s %s(%s)" % (self.ret, self.name, ", ".join(self.params))


# ---------------------------------------------------------------------------
# The header side
# ---------------------------------------------------------------------------

def preprocess_header(cc, include_dir):
    """The device headers after the host-mode preprocessor, as one string."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "decls.c")
        with open(src, "w") as f:
            f.write('#include "symm/symm_device.h"\n')
        out = subprocess.run([cc, "-E", "-P", "-x", "c", "-std=c11", "-I", include_dir, src],
                             check=True, capture_output=True, text=True)
    return out.stdout


def c_base_type(text):
    """'const symm_ctx_t *' -> ('symm_ctx_t', 1); 'int' -> ('int', 0)."""
    stars = text.count("*")
    words = [w for w in re.split(r"[\s*]+", text) if w and w not in QUALIFIERS]
    return " ".join(words), stars


def split_param(text):
    """A C parameter 'const T *restrict name' -> (its type, its name)."""
    text = " ".join(text.split())
    if text in ("void", ""):
        return None
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    if not m or not m.group(1).strip():
        raise ValueError("cannot read parameter %r (every parameter needs a name)" % text)
    return m.group(1).strip(), m.group(2)


def header_declarations(preprocessed):
    """Every `extern <ret> symm_<name>(<params>);` in the preprocessed header."""
    flat = " ".join(preprocessed.split())
    decls = {}
    for m in re.finditer(r"\bextern\s+([\w\s\*]+?)\s*\b(symm_\w+)\s*\(([^()]*)\)\s*;", flat):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3)
        types, names = [], []
        for p in params.split(","):
            t = split_param(p)
            if t is not None:
                types.append(t[0])
                names.append(t[1])
        if name in decls:
            raise ValueError("%s is declared twice" % name)
        decls[name] = Decl(name, ret, types, names)
    return decls


def c_to_llvm(ctype):
    """LLVM type and extension attribute ('signext', 'zeroext' or None) of a C type."""
    base, stars = c_base_type(ctype)
    if stars:
        return "ptr", None
    if base not in C_TO_LLVM:
        raise ValueError("C type %r has no LLVM mapping in check_bitcode.py" % ctype)
    ext = "signext" if base in SIGNED_SMALL else "zeroext" if base in UNSIGNED_SMALL else None
    return C_TO_LLVM[base], ext


# ---------------------------------------------------------------------------
# The bitcode side (llvm-dis text)
# ---------------------------------------------------------------------------

def split_top(text, sep=","):
    """Split at `sep` outside parentheses, brackets and braces."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def read_type(tokens):
    """The IR type at the start of `tokens` (a list of words) and its index."""
    for i, tok in enumerate(tokens):
        if LLVM_TYPES.match(tok):
            typ = tok
            if tok == "ptr" and i + 1 < len(tokens) and tokens[i + 1].startswith("addrspace("):
                typ += " " + tokens[i + 1]
            return typ, i
    return None, -1


def parse_function_line(line):
    """'define dso_local signext i8 @f(ptr noundef %0, i32 %1) #0 {' ->
    (kind, linkage, name, (ret_type, ret_attrs), [(type, attrs)...])."""
    m = re.match(r"^(define|declare)\s+(.*?)@([\w.$]+|\"[^\"]+\")\((.*)$", line)
    if not m:
        return None
    kind, head, name, rest = m.group(1), m.group(2).split(), m.group(3).strip('"'), m.group(4)
    linkage = next((w for w in head if w in LINKAGES), "external")
    ret, idx = read_type(head)
    ret_attrs = set(head[:idx]) if idx >= 0 else set()
    # the parameter list ends at the matching ')'
    depth, end = 1, 0
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    params = []
    for p in split_top(rest[:end]):
        words = p.split()
        if words == ["..."]:
            params.append(("...", set()))
            continue
        typ, i = read_type(words)
        attrs = set(w for w in words[i + 1:] if not w.startswith("%")) if typ else set(words)
        params.append((typ, attrs))
    return kind, linkage, name, (ret, ret_attrs), params


def parse_ir(text):
    """Defined functions, declared (external) functions, globals, and module facts."""
    defs, decls, globals_, facts = {}, {}, [], {}
    for line in text.splitlines():
        if line.startswith("define ") or line.startswith("declare "):
            f = parse_function_line(line)
            if f is None:
                continue
            kind, linkage, name, ret, params = f
            (defs if kind == "define" else decls)[name] = (linkage, ret, params)
        elif line.startswith("@"):
            m = re.match(r"^@([\w.$]+|\"[^\"]+\")\s*=\s*(.*)$", line)
            if m:
                globals_.append((m.group(1).strip('"'), m.group(2)))
        elif line.startswith("target triple"):
            facts["triple"] = line.split('"')[1]
        elif line.startswith("attributes #"):
            m = re.search(r'"target-cpu"="([^"]+)"', line)
            if m:
                facts.setdefault("cpus", set()).add(m.group(1))
    return defs, decls, globals_, facts


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------

def check_module(header_decls, ir_text, expect_cpu=None, backend=None):
    """Every problem found, as a list of sentences (empty: the bitcode is right).
    backend: the scale-out backend the file is fixed to (its name says), whose
    library's device functions it may call."""
    problems = []
    defs, decls, globals_, facts = parse_ir(ir_text)
    exported = {n: d for n, d in defs.items() if d[0] not in ("private", "internal")}

    for name in sorted(set(header_decls) - set(defs)):
        problems.append("missing: %s is declared in the header but not defined" % header_decls[name])
    for name in sorted(set(header_decls) & set(defs) - set(exported)):
        problems.append("not exported: %s has %s linkage" % (name, defs[name][0]))
    for name in sorted(set(exported) - set(header_decls)):
        problems.append("extra export: %s is defined with %s linkage but not declared in the "
                        "header (make it static)" % (name, exported[name][0]))

    for name in sorted(set(header_decls) & set(exported)):
        decl = header_decls[name]
        _, (ret, ret_attrs), params = exported[name]
        want_ret, want_ext = c_to_llvm(decl.ret)
        if ret != want_ret:
            problems.append("signature: %s returns %s in the bitcode, %s (%s) in the header"
                            % (name, ret, want_ret, decl.ret))
        elif want_ext and want_ext not in ret_attrs:
            problems.append("signature: %s return value lacks %s" % (name, want_ext))
        if len(params) != len(decl.params):
            problems.append("signature: %s takes %d parameters in the bitcode, %d in the header"
                            % (name, len(params), len(decl.params)))
            continue
        for i, ((typ, attrs), ctype) in enumerate(zip(params, decl.params)):
            want, ext = c_to_llvm(ctype)
            if typ != want:
                problems.append("signature: %s parameter %d is %s in the bitcode, %s (%s) in the header"
                                % (name, i + 1, typ, want, ctype))
            elif ext and ext not in attrs:
                problems.append("signature: %s parameter %d (%s) lacks %s" % (name, i + 1, ctype, ext))

    for name in sorted(decls):
        if name.startswith("llvm.") or name in ALLOWED_EXTERNAL_CALLS:
            continue
        if name.startswith(ALLOWED_EXTERNAL_PREFIXES.get(backend, ())):
            continue
        problems.append("external call: the bitcode calls %s, which nothing provides" % name)

    for name, rest in globals_:
        words = rest.split()
        linkage = next((w for w in words if w in LINKAGES), "external")
        if linkage not in ("private", "internal"):
            problems.append("global state: @%s has %s linkage (module state a loader must set up)"
                            % (name, linkage))
        if "global" in words and "constant" not in words:
            problems.append("global state: @%s is a writable global" % name)
        if "addrspace(3)" in rest:
            problems.append("global state: @%s lives in shared memory" % name)
        if "addrspace(4)" in rest:
            problems.append("global state: @%s is a __constant__ object" % name)

    if facts.get("triple") != "nvptx64-nvidia-cuda":
        problems.append("target: triple is %r, not nvptx64-nvidia-cuda" % facts.get("triple"))
    if expect_cpu is not None and facts.get("cpus", set()) != {expect_cpu}:
        problems.append("target: built for %s, the name says %s"
                        % (sorted(facts.get("cpus", set())) or "no target-cpu", expect_cpu))
    return problems


def backend_of(path):
    """'nvshmem' for libsymm_device_nvshmem_sm90.bc (and its traced
    libsymm_device_nvshmem_sm90_trace.bc), else None."""
    m = re.match(r"libsymm_device_([a-z]+)_sm\d+(?:_trace)?\.bc$", os.path.basename(path))
    return m.group(1) if m else None


def expected_cpu(path):
    m = re.search(r"_sm(\d+)(?:_trace)?\.bc$", os.path.basename(path))
    return "sm_" + m.group(1) if m else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", required=True, help="host C compiler (its preprocessor reads the header)")
    ap.add_argument("--llvm-dis", required=True)
    ap.add_argument("--include", required=True, help="the include/ folder holding symm/")
    ap.add_argument("--same", nargs=2, action="append", default=[], metavar=("A", "B"),
                    help="two bitcode files that must be identical (the default copy)")
    ap.add_argument("bitcode", nargs="+")
    args = ap.parse_args(argv)

    decls = header_declarations(preprocess_header(args.cc, args.include))
    if not decls:
        print("FAIL: no device function declarations found in the header")
        return 1
    failed = 0
    for path in args.bitcode:
        ir = subprocess.run([args.llvm_dis, path, "-o", "-"], check=True,
                            capture_output=True, text=True).stdout
        problems = check_module(decls, ir, expected_cpu(path), backend_of(path))
        name = os.path.basename(path)
        for p in problems:
            print("FAIL %s: %s" % (name, p))
        if problems:
            failed += 1
        else:
            print("ok   %s: defines exactly the %d declared device functions with their "
                  "signatures; no global state" % (name, len(decls)))
    for a, b in args.same:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            if fa.read() != fb.read():
                print("FAIL: %s and %s differ" % (os.path.basename(a), os.path.basename(b)))
                failed += 1
            else:
                print("ok   %s is %s" % (os.path.basename(b), os.path.basename(a)))
    checked = len(args.bitcode) + len(args.same)
    print("%d passed, %d failed" % (checked - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
