"""Every TileLang example (the primitives first) on this torchrun job's PEs,
each checked against torch with fresh random data and timed; one table.

    torchrun --nproc-per-node N examples/tilelang/run_all.py --aot build-tilelang [--out table.md] [--only primitives]
    torchrun --nproc-per-node N examples/tilelang/run_all.py        # TileLang compiles here"""
import importlib
import sys
import time
import traceback

from _common import Kernels, all_ok, is_skipped, parse, row, setup, sync_all, table, teardown, title_note
from build import EXAMPLES


GEMM_TABLES = {"gemm": "GEMM alone vs torch.matmul", "ag_gemm": "all-gather + GEMM (copy engines)",
               "gemm_rs": "GEMM + reduce-scatter (copy engines)", "cannon": "Cannon and SUMMA (copy engines)",
               "summa": "Cannon and SUMMA (copy engines)"}


def main():
    args = parse(__doc__.splitlines()[0])
    env = setup()
    ks = Kernels(args.aot)
    rows = []
    unknown = set(args.only or ()) - set(EXAMPLES)
    if unknown:
        raise SystemExit("no example %s (examples: %s)" % (" ".join(sorted(unknown)), " ".join(EXAMPLES)))
    for modname in EXAMPLES:
        if args.only and modname not in args.only:
            continue
        mod = importlib.import_module(modname)
        for cfg in mod.CONFIGS:
            t0 = time.time()
            try:
                got = mod.run(env, ks.module(mod, env.world, cfg), cfg, args)
                ok = True
            except Exception:  # noqa: BLE001 - one example failing must not hide the others
                traceback.print_exc()
                got, ok = [], False
            ok = all_ok(ok)
            if not ok:
                got = [row(modname, "raised (see the log)", env, False)]
            for r in got:
                r["s"] = round(time.time() - t0, 1)
            rows += got
            sync_all()
            if env.rank == 0:
                print("%s %s: %s" % (modname, cfg, ", ".join(r["check"] for r in got)), flush=True)
    how = "built ahead of time for %s" % "/".join(ks.backends()) if ks.mode == "aot" else "compiled by TileLang"
    # the GEMM examples have columns of their own: a table each (Cannon and SUMMA share one)
    groups, order = {}, []
    for r in rows:
        key = GEMM_TABLES.get(r["example"], "")
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(r)
    text = "\n".join(table(groups[k], "symm.tilelang %s, %s, kernels %s" % (k or "examples", title_note(env), how))
                     for k in order)
    if env.rank == 0:
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
    skips = sum(is_skipped(r) for r in rows)
    failed = sum(r["check"] != "ok" and not is_skipped(r) for r in rows)
    if env.rank == 0:
        print("%d passed, %d failed%s" % (len(rows) - failed - skips, failed,
                                          ", %d skipped" % skips if skips else ""))
    teardown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
