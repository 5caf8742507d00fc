"""python/tools/gen_consts.py's scan names hand copies of C constants and
lets derived values and unrelated tables through.

    python3 tests/tree/test_gen_consts.py
"""
import importlib.util
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("gen_consts", os.path.join(REPO, "python", "tools", "gen_consts.py"))
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)

COPIES = [
    'OPS = {"sum": 0, "min": 1, "max": 2}',
    'SCOPES = {"cta": 0,\n          "gpu": 1, "sys": 2}',
    '_DT = {"float32": 0, "bfloat16": 2}',
    "CMP_EQ, CMP_NE = (tl.constexpr(i) for i in range(2))",
    "DTYPE_DEFAULT = -1",
    "ALGO_PUSH = tl.constexpr(5)",
]
FINE = [
    'OPS = C.names("symm_redop", "SYMM_OP_")',
    "DTYPE_DEFAULT = C.DTYPE_DEFAULT",
    "SIGNAL_ADD = _consts.SIGNAL_ADD",
    '_BYTES = {"i32": 4, "u32": 4, "f32": 4, "i64": 8}',
    'SIZES = {"experts": 8, "topk": 3}',
    "OTHER_NAME = 3",
]


def main():
    enums, defines = gen.parse()
    tables = gen._member_tables(enums)
    names = {gen.py_name(n) for _, _, m in enums for n, _ in m} | {gen.py_name(n) for n, _, _ in defines}
    names |= {n[len("COLL_"):] for n in names if n.startswith("COLL_ALGO_")}
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for i, text in enumerate(COPIES + FINE):
            path = os.path.join(d, "m%d.py" % i)
            with open(path, "w") as f:
                f.write(text + "\n")
            found = gen._copies(path, names, tables)
            if (text in COPIES) != bool(found):
                failures.append("%s: %s" % ("missed" if text in COPIES else "flagged", text))
    if gen.render(enums, defines) != open(gen.OUT).read():
        failures.append("python/symm/_consts.py is stale")
    if failures:
        print("\n".join(failures))
        return 1
    print("gen_consts: %d copies named, %d derived or unrelated lines let through"
          % (len(COPIES), len(FINE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
