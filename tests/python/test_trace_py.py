"""The device trace from Python, without a GPU (docs/trace.md):

- SYMM_TRACE / trace= pick the traced bitcode (symm.triton, symm.cute) or
  -DSYMM_TRACE=1 (symm.tilelang), and a Triton kernel compiled with it
  records (inline: no call more than the plain one) where the plain one
  does not;
- symm.trace (the block) and the function form over the host backend on 2
  PEs: events written into the buffer as a kernel would, counts, drops,
  names, the JSON file, the argument errors;
- symm.trace_tools: summary figures on a known trace, the table, the plot
  (skipped, saying so, without matplotlib), the symm-trace command.
"""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import PYTHON_DIR, describe, have_library, run_pes  # noqa: E402

sys.path.insert(0, PYTHON_DIR)
import symm  # noqa: E402
from symm import _lib, trace_tools  # noqa: E402

needs_lib = pytest.mark.skipif(not have_library(), reason="libsymm.so not built (set SYMM_LIBRARY)")


def _have_bitcode():
    try:
        return os.path.isfile(_lib.bitcode_path(90, trace=True))
    except _lib.LibraryNotFoundError:
        return False


needs_bitcode = pytest.mark.skipif(not _have_bitcode(), reason="traced device bitcode not built (clang-19)")


# ---------------------------------------------------------------------------
# choosing the traced code
# ---------------------------------------------------------------------------

def test_trace_requested(monkeypatch):
    monkeypatch.delenv("SYMM_TRACE", raising=False)
    assert _lib.trace_requested() is False
    for v, want in (("1", True), ("on", True), ("YES", True), ("true", True), ("0", False), ("off", False),
                    ("", False)):
        monkeypatch.setenv("SYMM_TRACE", v)
        assert _lib.trace_requested() is want, v
        assert _lib.trace_requested(not want) is (not want), "an argument wins over the variable"
    monkeypatch.setenv("SYMM_TRACE", "sometimes")
    with pytest.raises(ValueError, match="SYMM_TRACE='sometimes'"):
        _lib.trace_requested()
    with pytest.raises(TypeError):
        _lib.trace_requested(1)


@needs_bitcode
def test_bitcode_path_trace(monkeypatch):
    monkeypatch.delenv("SYMM_TRACE", raising=False)
    assert _lib.bitcode_path(90).endswith("libsymm_device_sm90.bc")
    assert _lib.bitcode_path(90, trace=True).endswith("libsymm_device_sm90_trace.bc")
    assert _lib.bitcode_path(86, trace=True).endswith("libsymm_device_sm80_trace.bc")
    assert _lib.bitcode_path(trace=True).endswith("libsymm_device_trace.bc")
    assert _lib.bitcode_path(90, backend="nvshmem", trace=True).endswith("libsymm_device_nvshmem_sm90_trace.bc")
    monkeypatch.setenv("SYMM_TRACE", "1")
    assert _lib.bitcode_path(90).endswith("_trace.bc")
    assert _lib.bitcode_path(90, trace=False).endswith("libsymm_device_sm90.bc")


def test_bitcode_path_trace_missing(tmp_path, monkeypatch):
    (tmp_path / "libsymm_device.bc").write_bytes(b"x")
    (tmp_path / "libsymm_device_sm90.bc").write_bytes(b"x")
    monkeypatch.setenv("SYMM_BITCODE_DIR", str(tmp_path))
    with pytest.raises(_lib.LibraryNotFoundError, match="traced device bitcode"):
        _lib.bitcode_path(90, trace=True)


@needs_bitcode
def test_triton_picks_and_records(monkeypatch):
    pytest.importorskip("triton")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    import symm.triton as st
    monkeypatch.delenv("SYMM_TRACE", raising=False)
    assert st.extern_libs(90, backend="native")["symm"].endswith("libsymm_device_sm90.bc")
    assert st.extern_libs(90, backend="native", trace=True)["symm"].endswith("libsymm_device_sm90_trace.bc")
    monkeypatch.setenv("SYMM_TRACE", "1")
    assert st.extern_libs(90, backend="native")["symm"].endswith("libsymm_device_sm90_trace.bc")
    monkeypatch.delenv("SYMM_TRACE")

    @triton.jit
    def k(ctx, sig):
        st.trace_begin(ctx, 3)
        st.signal_wait_until(ctx, sig, st.CMP_GE, 1)
        st.trace_end(ctx, 3)

    ptx = {}
    for traced in (False, True):
        src = triton.compiler.ASTSource(fn=k, signature={"ctx": "i64", "sig": "*u64"}, constexprs={})
        out = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                             options={"extern_libs": st.extern_libs(90, backend="native", trace=traced)})
        ptx[traced] = out.asm["ptx"]
    assert "%smid" not in ptx[False]
    assert "%smid" in ptx[True], "the traced kernel records"
    assert len(re.findall("globaltimer", ptx[True])) > len(re.findall("globaltimer", ptx[False]))
    # the recorder is inline: no call a plain build does not have (a call
    # serialises a kernel's wgmma)
    calls = {t: len(re.findall(r"\bcall(\.uni)?\b", ptx[t])) for t in ptx}
    assert calls[True] == calls[False], calls


def test_launch_keeps_a_kernel_parameter_named_trace():
    from symm.triton import _launch

    class K:
        arg_names = ["ctx", "trace"]

    class L:
        arg_names = ["ctx"]
    kw = {"trace": 1}
    assert _launch._pop_trace(K(), kw) is None and kw == {"trace": 1}
    assert _launch._pop_trace(L(), kw) == 1 and kw == {}


@needs_bitcode
def test_cute_picks_traced_bitcode(monkeypatch):
    pytest.importorskip("cutlass")
    from symm.cute import _bitcode
    monkeypatch.delenv("SYMM_TRACE", raising=False)
    assert _bitcode.link_files(90, "native")[0].endswith("libsymm_device_sm90.bc")
    assert _bitcode.link_files(90, "native", trace=True)[0].endswith("libsymm_device_sm90_trace.bc")
    with _bitcode.target(90, "native", trace=True):
        assert _bitcode.BITCODE.path.endswith("libsymm_device_sm90_trace.bc")
        assert "traced" in repr(_bitcode.BITCODE)
    with _bitcode.target(90, "native"):
        assert _bitcode.BITCODE.path.endswith("libsymm_device_sm90.bc")
    monkeypatch.setenv("SYMM_TRACE", "1")
    assert _bitcode.BITCODE.path.endswith("_trace.bc")


def test_tilelang_trace_flags(monkeypatch):
    pytest.importorskip("tilelang")
    from symm.tilelang import _build
    monkeypatch.delenv("SYMM_TRACE", raising=False)
    assert _build.trace_flags() == [] and _build.trace_flags(True) == ["-DSYMM_TRACE=1"]
    assert "-DSYMM_TRACE=1" in _build.compile_flags("native", trace=True)
    assert "-DSYMM_TRACE=1" not in _build.compile_flags("native")
    assert "-DSYMM_TRACE=1" in _build.nvcc_command("a.cu", "a.cubin", trace=True)
    monkeypatch.setenv("SYMM_TRACE", "1")
    assert "-DSYMM_TRACE=1" in _build.nvcc_command("a.cu", "a.cubin", trace=None)


# ---------------------------------------------------------------------------
# symm.trace over the host backend
# ---------------------------------------------------------------------------

# Each PE writes what a kernel would: 6 claims into a buffer of 4 events (a
# region, a put_signal to the next PE and a wait for the previous one's; 2
# dropped). symm_ctx_t.trace is at byte 112 (symm_types.h).
TRACE_PES = r"""
import ctypes, json, os, sys, symm
from symm import _lib
symm.init()
me, n = symm.my_pe(), symm.n_pes()
out = sys.argv[1] if len(sys.argv) > 1 else os.environ["T_OUT"]
for bad, exc in (((-1,), ValueError), ((True,), ValueError), (("x",), ValueError)):
    try:
        symm.trace_start(*bad)
    except exc:
        pass
    else:
        raise AssertionError("trace_start%r did not raise" % (bad,))
for call, args, exc in ((symm.trace_dump, (3,), TypeError), (symm.trace_name, (-1, "a"), ValueError),
                        (symm.trace_name, (1, 5), TypeError), (symm.trace_name, (1, "x" * 64), ValueError)):
    try:
        call(*args)
    except exc:
        pass
    else:
        raise AssertionError("%s%r did not raise" % (call.__name__, args))
try:
    symm.trace(5)
except TypeError:
    pass
sig = symm.malloc(64, zero=True)
for args, kw, exc in (((sig, "x"), {}, ValueError), ((sig, "y" * 50), {"nbytes": 8}, symm.SymmError),
                      ((sig, "z"), {"nbytes": 8, "pe": n}, symm.SymmError), (("a", "b"), {}, TypeError)):
    try:
        symm.trace_label(*args, **kw)
    except exc:
        pass
    else:
        raise AssertionError("trace_label%r%r did not raise" % (args, kw))
symm.trace_label(sig, "not this", nbytes=64)
symm.trace_label(sig, "ring flag", nbytes=8, pe=(me - 1) % n)   # the same address: replaced
ev = lambda kind, group, flags, peer, addr, a, b, t0, t1: (
    [t0, t1, addr, a, b, 0 | (1 << 32)],
    [(peer & 0xffff) | (kind << 48) | (flags << 56), group | (1 << 8) | (n << 16) | (me << 32)])
assert not symm.trace_active()
with symm.trace(out, capacity=4, names={3: "step"}) as t:
    assert symm.trace_active()
    ctx = ctypes.c_uint64.from_address(symm.ctx() + 112).value
    assert ctx != 0
    events = ctypes.c_uint64.from_address(ctx).value
    base = 1000 + 100 * me
    evs = [ev(10, 0, 0, -1, 0, 3, 0, base, base),
           ev(3, 2, 2, (me + 1) % n, sig, 64, 1, base + 10, base + 20),
           ev(5, 0, (3 | (1 << 3)), -1, sig, 1, 1, base + 30, base + 300),
           ev(11, 0, 0, -1, 0, 3, 0, base + 400, base + 400)]
    for i, (w, x) in enumerate(evs):
        words = w + x
        for j, v in enumerate(words):
            ctypes.c_uint64.from_address(events + 64 * i + 8 * j).value = v & 0xffffffffffffffff
    ctypes.c_uint64.from_address(ctx + 64).value = 6     # six claims: two past the end
    assert symm.trace_counts() == (4, 2), symm.trace_counts()
assert not symm.trace_active()
assert t.counts == (4, 2), t.counts
assert ctypes.c_uint64.from_address(symm.ctx() + 112).value == 0, "stopped: off the context"
symm.trace_start(8)         # the function form: a new trace starts empty
assert symm.trace_counts() == (0, 0)
symm.trace_stop()
symm.trace_dump(out + ".empty")
symm.free(sig)
symm.finalize()
print("DONE", me)
"""


@needs_lib
def test_trace_block_over_host_backend(tmp_path):
    out = str(tmp_path / "t.json")
    res = run_pes(TRACE_PES, 2, env={"T_OUT": out})
    for r in res:
        assert r.returncode == 0 and "DONE" in r.stdout, describe(res)
    doc = json.load(open(out))
    meta = doc["otherData"]["symm_trace"]
    assert [(d["recorded"], d["dropped"]) for d in meta["pes"]] == [(4, 2), (4, 2)]
    assert meta["names"] == {"3": "step"}
    names = sorted(e["name"] for e in doc["traceEvents"] if e.get("ph") == "X")
    assert names.count("step") == 2
    waits = [e for e in doc["traceEvents"] if e.get("cat") == "wait"]
    assert {e["pid"]: e["args"]["peer"] for e in waits} == {0: 1, 1: 0}
    assert all(e["args"]["from"] == "label" and e["args"]["label"] == "ring flag" for e in waits), waits
    assert all(re.match(r"wait ring flag@0x[0-9a-f]+ from PE [01] >= 1$", e["name"]) for e in waits), waits
    empty = json.load(open(out + ".empty"))
    assert [d["recorded"] for d in empty["otherData"]["symm_trace"]["pes"]] == [0, 0]


# ---------------------------------------------------------------------------
# symm.trace_tools and symm-trace
# ---------------------------------------------------------------------------

def _trace_doc():
    """Two PEs, one track each plus a second on PE 0; PE 0 waits 30 us of a
    100 us span on block 0 (two overlapping waits: 10..30 and 20..40 make
    30 us), PE 1 waits 5 us."""
    def x(pid, tid, ts, dur, name, cat, **args):
        return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name, "cat": cat, "args": args}
    ev = [
        {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "PE 0"}},
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "PE 1"}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "block 0"}},
        x(0, 0, 0.0, 5.0, "put_signal 4 KiB -> PE 1, sig += 1", "transfer", block=0, thread=0, peer=1),
        x(0, 0, 10.0, 20.0, "wait sig@0x10 from PE 1 >= 1", "wait", block=0, thread=0, peer=1, **{"from": "inferred"}),
        x(0, 0, 20.0, 20.0, "wait barrier from PE 1 >= 3", "wait", block=0, thread=0, peer=1, **{"from": "call"}),
        x(0, 0, 0.0, 100.0, "step", "region", block=0, thread=0),
        x(0, 1024, 50.0, 10.0, "all_reduce 1 MiB", "coll", block=1, thread=0),
        x(1, 0, 0.0, 50.0, "step", "region", block=0, thread=0),
        x(1, 0, 40.0, 5.0, "wait word@0x20 >= 1", "wait", block=0, thread=0),
    ]
    return {"traceEvents": ev, "otherData": {"symm_trace": {"n_pes": 2, "clock": "test", "pes": [
        {"pe": 0, "recorded": 6, "dropped": 0}, {"pe": 1, "recorded": 3, "dropped": 7}]}}}


def test_summary_figures():
    s = trace_tools.summarize(trace_tools.Trace(_trace_doc()), top=2)
    p0, p1 = s["pes"]
    assert p0["tracks"] == 2 and p0["span_us"] == pytest.approx(110.0)
    assert p0["wait_us"] == pytest.approx(30.0), "overlapping waits count once"
    assert p0["work_us"] == pytest.approx(80.0)
    assert p0["waited_for"] == {1: pytest.approx(40.0)}
    assert p1["wait_us"] == pytest.approx(5.0) and p1["dropped"] == 7 and p1["waited_for"] == {"?": 5.0}
    assert [w["dur_us"] for w in s["longest"]] == [20.0, 20.0]
    text = trace_tools.format_summary(s)
    assert "PE 1 40.0 us" in text and "unknown 5.0 us" in text and "(inferred)" in text
    assert re.search(r"PE 1 +1 +50\.0 +5\.0 +45\.0 +10\.0% +7", text), text


def test_cli_summary_and_errors(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    r = subprocess.run([sys.executable, "-m", "symm.trace_tools", "summary", str(path)], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0 and "Longest waits" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "symm.trace_tools", "summary", str(path), "--json"],
                       capture_output=True, text=True, env=env)
    assert json.loads(r.stdout)["pes"][1]["dropped"] == 7
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "symm.trace_tools", "summary", str(bad)], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 1 and "is not JSON" in r.stderr


def test_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: symm-trace plot not checked")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    out = tmp_path / "t.png"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    r = subprocess.run([sys.executable, "-m", "symm.trace_tools", "plot", str(path), "-o", str(out),
                        "--max-tracks", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert "Per PE" in r.stdout, "plot prints the summary too"
    rows, note = trace_tools._tracks_to_show(trace_tools.Trace(_trace_doc()), 1)
    assert rows == [(0, 0), (1, 0)] and "PE 0: 1 of 2 tracks" in note, "the track with the most waiting stays"


def test_plot_without_matplotlib_says_so(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from symm import trace_tools\n"
            "sys.exit(trace_tools.main(['plot', %r, '-o', %r]))" % (str(path), str(tmp_path / "x.png")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert r.returncode == 2 and "needs matplotlib (pip install matplotlib)" in r.stderr, r.stderr
