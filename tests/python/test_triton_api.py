"""symm.triton covers exactly the device API of the headers (no GPU needed).

- The generated table and wrappers are up to date with the headers, and the
  check fails when one of them is stale.
- Every declared function has a symm.triton wrapper and a raw extern, whose
  parameters are the C parameters in order.
- The constants mirror the C enums.
"""
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from symm_testutil import INCLUDE_DIR, PYTHON_DIR, REPO, check_generator_catches_stale, in_ci  # noqa: E402

sys.path.insert(0, PYTHON_DIR)
sys.path.insert(0, os.path.join(REPO, "tests", "bitcode"))
import check_bitcode  # noqa: E402

CC = os.environ.get("CC", "cc")


def _triton():
    try:
        import triton  # noqa: F401
    except ImportError:
        if in_ci():
            raise
        pytest.skip("triton is not installed (pip install triton==3.6.0)")


def test_generated_files_are_fresh():
    r = subprocess.run([sys.executable, os.path.join(PYTHON_DIR, "tools", "gen_triton_api.py"),
                        "--check", "--cc", CC], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


GENERATED = ('_device_api.py', 'triton/_signatures.py', 'triton/_api.py')


@pytest.mark.parametrize("stale", (None,) + GENERATED)
def test_check_fails_on_a_stale_file(tmp_path, stale):
    check_generator_catches_stale(tmp_path, "gen_triton_api.py", GENERATED, stale, CC)


def header_decls():
    return check_bitcode.header_declarations(check_bitcode.preprocess_header(CC, INCLUDE_DIR))


def test_every_device_function_is_wrapped():
    _triton()
    import inspect

    import symm.triton as st
    decls = header_decls()
    assert len(decls) > 100
    names = {n[len("symm_"):] for n in decls}
    assert set(st.MODES) == names
    for cname, d in decls.items():
        name = cname[len("symm_"):]
        wrapper = getattr(st, name)
        assert list(inspect.signature(wrapper.fn).parameters) == d.names, name
        assert callable(getattr(st.raw, name)), name
    # the families the issue names are all there
    for family in ("ctx_ptr", "ctx_my_pe", "p_f32", "g_i64", "put_block_nbi", "get_warp",
                   "put_signal_nbi", "signal_wait_until", "signal_op", "ld_u64", "st_f64",
                   "atomic_compare_swap_u64", "fence_block", "quiet", "barrier_block",
                   "all_reduce_block", "all_gather_grid", "all_to_allv_block",
                   "reduce_scatter_ex_grid", "broadcast_block"):
        assert family in st.MODES, family


def test_modes():
    _triton()
    import symm.triton as st
    m = st.MODES
    assert m["put_block"] == m["put_block_nbi"] == m["all_reduce_grid"] == m["barrier_block"] == "block"
    assert m["put_warp_nbi"] == m["quiet_warp"] == "warp"
    assert m["p_i32"] == m["atomic_fetch_add_u64"] == m["signal_op"] == m["quiet"] == "thread0"
    assert m["g_f32"] == m["atomic_fetch_i32"] == m["signal_wait_until"] == m["ctx_ptr"] == "each"
    assert set(m.values()) == {"block", "warp", "thread0", "each"}


def _enum(path, prefix):
    text = open(os.path.join(INCLUDE_DIR, "symm", path)).read()
    return {k: int(v) for k, v in re.findall(r"\b(%s\w+)\s*=\s*(-?\d+)" % prefix, text)}


def test_constants_match_headers():
    _triton()
    import symm.triton as st
    checks = [("symm_types.h", "SYMM_CMP_", "CMP_"), ("symm_types.h", "SYMM_SIGNAL_", "SIGNAL_"),
              ("symm_types.h", "SYMM_SEM_", "SEM_"), ("symm_types.h", "SYMM_SCOPE_", "SCOPE_"),
              ("symm_coll_types.h", "SYMM_DTYPE_", "DTYPE_"),
              ("symm_coll_types.h", "SYMM_OP_", "OP_"),
              ("symm_coll_types.h", "SYMM_COLL_ALGO_", "ALGO_")]
    for path, cprefix, pyprefix in checks:
        values = _enum(path, cprefix)
        assert values, cprefix
        for cname, v in values.items():
            short = pyprefix + cname[len(cprefix):]
            if short.endswith("_COUNT"):
                continue
            assert hasattr(st, short), short
            assert getattr(st, short).value == v, (short, v)


def test_raw_type_mapping():
    _triton()
    from triton.language import core

    from symm.triton import raw
    assert raw.triton_type("const symm_ctx_t *") == core.int64
    assert raw.triton_type("size_t") == core.uint64
    assert raw.triton_type("int8_t") == core.int8
    assert raw.triton_type("double") == core.float64
    with pytest.raises(TypeError):
        raw.triton_type("__int128")
