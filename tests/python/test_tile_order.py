"""The fused GEMMs take their tiles in the order their inputs arrive, checked
on the CPU with the kernels' own tile-order functions:

  - Triton ag_gemm (examples/triton/_gemm.py ag_tile, run under Triton's
    interpreter by tile_order_orders.py in a process of its own): every tile
    exactly once; this PE's rows first (they never wait), then the peers'
    chunks in the order the copy engines deliver them (ag_push_order: each PE
    pushes to me-1 first, chunk by chunk), so no tile comes before a tile
    whose chunk lands earlier; a chunk's tiles are not split (a group of row
    tiles never spans two chunks); with the default chunk size the order is
    the GEMM alone's (gemm_kernel's band_tile), the bands rotated.
  - Triton gemm_rs (chunk_tile, the own band's kernel): every tile once,
    chunk 0 before chunk 1 (each sender copies its chunks in order);
    rs_band_order makes PE q receive its band from q-1 first and from q+1
    last, the order the kernel's epilogue waits in.
  - CuTe DSL ag_hgemm (examples/cute/hopper_gemm.py ag_tile, called on ints,
    its tile_coords unwrapped from cute.jit): the same properties against
    examples/cute/ag_gemm.py's push_order and CHUNK_ROWS (skips without
    CuTe DSL).
  - CuTe DSL rs_hgemm_ce (tile_coords on ints): bands me+1, ..., me, each
    sub-chunk finished before the next starts: the order of gemm_rs.py's
    copy-engine program.
"""
import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from symm_testutil import REPO, optional_import  # noqa: E402

if optional_import("triton") is None or optional_import("torch") is None:
    pytest.skip("needs triton and torch", allow_module_level=True)


def _load_gemm():
    """examples/triton/_gemm.py under a private name (the push orders and
    chunk sizes are plain Python)."""
    spec = importlib.util.spec_from_file_location("_gemm_orders", os.path.join(REPO, "examples", "triton",
                                                                               "_gemm.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = _load_gemm()
BM, BN = 128, 256

# (PEs, rows per PE, N per PE, rows per chunk or 0 for the default, GROUP_M):
# the default chunk; chunks smaller than a group (groups must shrink to
# them); a shard not a multiple of a group; ragged last column tile
AG_CASES = [(4, 1024, 1024, 0, 8), (4, 1024, 1024, 256, 8), (3, 768, 512, 384, 8),
            (2, 384, 1000, 0, 8), (4, 512, 768, 128, 4)]
ALONE_CASES = [(4, 2048, 1024), (2, 1024, 768)]          # (PEs, rows per PE, N per PE)
RS_CASES = [(1024, 1024, 512, 8), (1024, 768, 256, 8), (2048, 512, 1024, 8), (512, 1000, 512, 8)]


def cdiv(a, b):
    return -(-a // b)


def chunk_rows(m_loc, chunk_m, group_m):
    return chunk_m or G.auto_chunk_rows(m_loc, BM, group_m)


@functools.lru_cache(maxsize=None)
def orders():
    """Every case's tile order, from one interpreter process."""
    cases = {"ag": [], "chunk": [], "band": []}
    for npes, m_loc, n, chunk_m, gm in AG_CASES:
        cases["ag"] += [[me, npes, m_loc, n, chunk_rows(m_loc, chunk_m, gm), gm] for me in range(npes)]
    for npes, m_loc, n in ALONE_CASES:
        cases["ag"] += [[me, npes, m_loc, n, chunk_rows(m_loc, 0, 8), 8] for me in range(npes)]
        cases["band"].append([npes * m_loc, n, m_loc, 8])
    cases["chunk"] = [list(c) for c in RS_CASES]
    proc = subprocess.run([sys.executable, os.path.join(HERE, "tile_order_orders.py"), json.dumps(cases)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return ({tuple(c): [tuple(t) for t in r] for c, r in zip(cases["ag"], res["ag"])},
            {tuple(c): [tuple(t) for t in r] for c, r in zip(cases["chunk"], res["chunk"])},
            {tuple(c): [tuple(t) for t in r] for c, r in zip(cases["band"], res["band"])})


def arrival(me, src, chunk, npes, chunks, push_order):
    """When (src's shard, chunk) is readable on PE me, as a rank: this PE's
    own rows at once; a peer's chunk in the push stage at which src copies
    to me, chunk by chunk (all PEs push side by side)."""
    if src == me:
        return -1
    return push_order(src, npes).index(me) * chunks + chunk


def check_ag_order(order, me, npes, m_loc, tiles_n, chunk_m, push_order):
    """order: (source PE, first row in its shard, column tile) per tile, in
    the order this PE takes them."""
    chunks = m_loc // chunk_m
    want = {(s, r, c) for s in range(npes) for r in range(0, m_loc, BM) for c in range(tiles_n)}
    assert len(order) == len(want) and set(order) == want, "PE %d: a tile missing or taken twice" % me
    ranks = [arrival(me, s, r // chunk_m, npes, chunks, push_order) for s, r, _ in order]
    assert ranks == sorted(ranks), "PE %d: a tile comes before one whose rows arrive earlier" % me
    own = (m_loc // BM) * tiles_n
    assert all(s == me for s, _, _ in order[:own]), "PE %d: its first tiles are not its own rows" % me
    # chunk by chunk: once the order leaves a chunk it never comes back to it
    runs = [(s, r // chunk_m) for s, r, _ in order]
    runs = [u for i, u in enumerate(runs) if i == 0 or u != runs[i - 1]]
    assert len(runs) == len(set(runs)) == npes * chunks, "PE %d: a chunk's tiles are split" % me


@pytest.mark.parametrize("npes,m_loc,n,chunk_m,group_m", AG_CASES)
def test_ag_gemm_order_follows_arrival(npes, m_loc, n, chunk_m, group_m):
    ag, _, _ = orders()
    cm = chunk_rows(m_loc, chunk_m, group_m)
    for me in range(npes):
        check_ag_order(ag[(me, npes, m_loc, n, cm, group_m)], me, npes, m_loc, cdiv(n, BN), cm,
                       G.ag_push_order)


@pytest.mark.parametrize("npes,m_loc,n", ALONE_CASES)
def test_ag_gemm_default_order_is_the_gemm_alone_order(npes, m_loc, n):
    """With one group of row tiles per chunk, ag_gemm's order is gemm_kernel's
    (which tune_gemm.py and the "GEMM alone" column time), bands rotated so
    this PE's come first: the fused GEMM keeps the tuned L2 reuse."""
    ag, _, band = orders()
    cm = chunk_rows(m_loc, 0, 8)
    assert cm == 8 * BM
    alone = band[(npes * m_loc, n, m_loc, 8)]
    per_band = len(alone) // npes
    for me in range(npes):
        rotated = [((me + b) % npes, r - b * m_loc, c) for b in range(npes)
                   for r, c in alone[b * per_band:(b + 1) * per_band]]
        assert ag[(me, npes, m_loc, n, cm, 8)] == rotated


@pytest.mark.parametrize("m_loc,n,chunk_m,group_m", RS_CASES)
def test_gemm_rs_own_band_goes_chunk_by_chunk(m_loc, n, chunk_m, group_m):
    _, chunk, _ = orders()
    order = chunk[(m_loc, n, chunk_m, group_m)]
    want = {(r, c) for r in range(0, m_loc, BM) for c in range(cdiv(n, BN))}
    assert len(order) == len(want) and set(order) == want
    chunks = [r // chunk_m for r, _ in order]
    assert chunks == sorted(chunks), "a tile of a later chunk comes before one of an earlier chunk"


@pytest.mark.parametrize("npes", [2, 3, 4, 8])
def test_gemm_rs_band_order(npes):
    """PE q's band: from q-1 first, q+1 last (the own kernel waits in that
    order), and every PE computes its own band last (rs_band_order leaves it out)."""
    for q in range(npes):
        stage = {p: G.rs_band_order(p, npes).index(q) for p in range(npes) if p != q}
        assert sorted(stage, key=stage.get) == [(q - i) % npes for i in range(1, npes)]
        assert q not in G.rs_band_order(q, npes) and len(set(G.rs_band_order(q, npes))) == npes - 1


@pytest.mark.parametrize("npes", [2, 3, 4, 8])
def test_ag_push_order_reaches_every_peer_once(npes):
    for me in range(npes):
        order = G.ag_push_order(me, npes)
        assert sorted(order) == sorted(set(range(npes)) - {me}) and order[0] == (me - 1) % npes


@functools.lru_cache(maxsize=None)
def _cute_modules():
    """examples/cute's hopper_gemm (tile_coords unwrapped from cute.jit so
    that ag_tile runs on ints) and ag_gemm, or a skip without CuTe DSL."""
    if optional_import("cutlass") is None:
        pytest.skip("needs CuTe DSL (nvidia-cutlass-dsl)")
    cute_dir = os.path.join(REPO, "examples", "cute")
    sys.path.insert(0, os.path.join(REPO, "python"))
    sys.path.insert(0, cute_dir)
    # examples/triton has modules of the same names: keep whatever another
    # test file imported, and give it back after
    names = ("_common", "ag_gemm", "hopper_gemm")
    saved = {k: sys.modules.pop(k) for k in names if k in sys.modules}
    try:
        import ag_gemm as cute_ag
        import hopper_gemm as H
    finally:
        sys.path.remove(cute_dir)
        for k in names:
            sys.modules.pop(k, None)
        sys.modules.update(saved)
    assert cute_ag.BM == H.BM and cute_ag.GROUP_M == H.GROUP_M
    H.tile_coords = getattr(H.tile_coords, "__wrapped__", H.tile_coords)
    return H, cute_ag


# (PEs, rows per PE, column tiles): the examples' square and LLM shapes on 4
# PEs, a shard of one chunk, 3 PEs
@pytest.mark.parametrize("npes,m_loc,tiles_n", [(4, 2048, 8), (4, 1024, 28), (2, 512, 4), (3, 3072, 2)])
def test_cute_ag_hgemm_order_follows_arrival(npes, m_loc, tiles_n):
    H, cute_ag = _cute_modules()
    # the chunk size ag_gemm.py passes to the kernel
    chunk_m = cute_ag.CHUNK_ROWS if m_loc % cute_ag.CHUNK_ROWS == 0 else m_loc
    chunks, ctm = m_loc // chunk_m, chunk_m // H.BM
    tiles = npes * (m_loc // H.BM) * tiles_n
    for me in range(npes):
        order = []
        for t in range(tiles):
            src, chunk, tm, tn = H.ag_tile(t, ctm, tiles_n, chunks, npes, me)
            assert tm // ctm == chunk
            order.append((src, tm * H.BM, tn))
        check_ag_order(order, me, npes, m_loc, tiles_n, chunk_m, cute_ag.push_order)


# (PEs, rows per band, column tiles): square and LLM on 4 and 2 PEs, a band smaller than a group
@pytest.mark.parametrize("npes,m_loc,tiles_n", [(4, 2048, 32), (4, 1024, 32), (2, 4096, 32), (2, 512, 4),
                                                (3, 3072, 2)])
def test_cute_rs_hgemm_ce_order_follows_the_copies(npes, m_loc, tiles_n):
    """rs_hgemm_ce's tiles (hopper_gemm.tile_coords on ints): every tile
    once; bands in the order me+1, ..., me (the order of the side stream's
    copies, own band last); inside a band, a sub-chunk (the rows one count
    covers, as gemm_rs.py's GemmRSCE picks them) is finished before the next
    one starts, so the copy engines' sub-chunk order is the GEMM's. The CPU
    model of the protocol (cute_rs_protocol_sim.py) takes the same order."""
    H, _ = _cute_modules()
    sys.path.insert(0, HERE)
    import cute_rs_protocol_sim as sim
    sub_m = H.GROUP_M * H.BM if m_loc % (H.GROUP_M * H.BM) == 0 else m_loc
    band_tiles_m = m_loc // H.BM
    for me in range(npes):
        order = []
        for t in range(npes * band_tiles_m * tiles_n):
            owner, tm, tn = H.tile_coords(t, band_tiles_m, tiles_n, npes, (me + 1) % npes)
            assert (owner, tm, tn) == sim.tile_coords(t, band_tiles_m, tiles_n, npes, (me + 1) % npes, H.GROUP_M)
            order.append((owner, tm, tn))
        assert len(set(order)) == len(order) == npes * band_tiles_m * tiles_n
        units = [(owner, tm * H.BM // sub_m) for owner, tm, _ in order]
        firsts = list(dict.fromkeys(units))        # sub-chunks in order of their first tile
        want = [((me + 1 + b) % npes, j) for b in range(npes) for j in range(m_loc // sub_m)]
        assert firsts == want, (me, firsts[:6], want[:6])
        # contiguous: no tile of a sub-chunk after the next one started
        assert [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u] == want
