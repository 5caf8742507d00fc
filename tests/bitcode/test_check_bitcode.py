"""The bitcode checker's own tests: it must catch each kind of mistake.

Runs on synthetic header text and llvm-dis text, so it needs neither clang nor
a GPU. (The real bitcode is checked by the bitcode_symbols_* tests.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_bitcode as cb  # noqa: E402

HEADER = """
typedef struct symm_ctx symm_ctx_t;
extern int symm_ctx_my_pe(const symm_ctx_t *ctx);
extern void *symm_ctx_ptr(const symm_ctx_t *ctx, const void *ptr, int pe);
extern void symm_p_i8(const symm_ctx_t *ctx, int8_t *dest, int8_t value, int pe);
extern uint16_t symm_g_u16(const symm_ctx_t *ctx, const uint16_t *src, int pe);
extern void symm_put(const symm_ctx_t *ctx, void *dest, const void *src, size_t nbytes, int pe);
extern double symm_g_f64(const symm_ctx_t *ctx, const double *restrict src, int pe);
"""

GOOD_IR = """
target triple = "nvptx64-nvidia-cuda"
@.str = private unnamed_addr constant [4 x i8] c"abc\\00", align 1
define dso_local i32 @symm_ctx_my_pe(ptr nocapture noundef readonly %0) local_unnamed_addr #0 {
define dso_local ptr @symm_ctx_ptr(ptr noundef %0, ptr noundef %1, i32 noundef %2) #0 {
define dso_local void @symm_p_i8(ptr noundef %0, ptr noundef %1, i8 noundef signext %2, i32 noundef %3) #0 {
define dso_local zeroext i16 @symm_g_u16(ptr noundef %0, ptr noundef %1, i32 noundef %2) #0 {
define dso_local void @symm_put(ptr noundef %0, ptr noundef %1, ptr noundef %2, i64 noundef %3, i32 noundef %4) #0 {
define dso_local double @symm_g_f64(ptr noundef %0, ptr noalias noundef %1, i32 noundef %2) #0 {
define internal fastcc void @symm__helper(ptr %0) unnamed_addr #1 {
declare i32 @vprintf(ptr, ptr)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
attributes #0 = { nounwind "target-cpu"="sm_90" "target-features"="+ptx85,+sm_90" }
attributes #1 = { nounwind "target-cpu"="sm_90" }
"""


def decls():
    return cb.header_declarations(HEADER)


def problems(ir, cpu="sm_90"):
    return cb.check_module(decls(), ir, cpu)


def test_header_parsing():
    d = decls()
    assert sorted(d) == ["symm_ctx_my_pe", "symm_ctx_ptr", "symm_g_f64", "symm_g_u16",
                         "symm_p_i8", "symm_put"]
    assert d["symm_ctx_ptr"].ret == "void *"
    assert d["symm_put"].params == ["const symm_ctx_t *", "void *", "const void *", "size_t", "int"]
    assert d["symm_g_f64"].params[1] == "const double *restrict"


def test_good_module_passes():
    assert problems(GOOD_IR) == []


def test_missing_function():
    ir = GOOD_IR.replace("define dso_local void @symm_put(", "define dso_local void @symm_put_renamed(")
    p = problems(ir)
    assert any(x.startswith("missing: ") and "symm_put(" in x for x in p), p
    assert any(x.startswith("extra export: symm_put_renamed") for x in p), p


def test_extra_export():
    ir = GOOD_IR.replace("define internal fastcc void @symm__helper", "define dso_local void @symm__helper")
    p = problems(ir)
    assert p == ["extra export: symm__helper is defined with external linkage but not declared "
                 "in the header (make it static)"], p


def test_not_exported():
    ir = GOOD_IR.replace("define dso_local i32 @symm_ctx_my_pe", "define internal i32 @symm_ctx_my_pe")
    assert problems(ir) == ["not exported: symm_ctx_my_pe has internal linkage"]


def test_wrong_types():
    ir = GOOD_IR.replace("i64 noundef %3, i32 noundef %4", "i32 noundef %3, i32 noundef %4")
    p = problems(ir)
    assert len(p) == 1 and "symm_put parameter 4 is i32" in p[0], p
    ir = GOOD_IR.replace("define dso_local double @symm_g_f64", "define dso_local float @symm_g_f64")
    assert "returns float" in problems(ir)[0]
    ir = GOOD_IR.replace("(ptr noundef %0, ptr noundef %1, i32 noundef %2) #0 {\ndefine dso_local void @symm_p_i8",
                         "(ptr noundef %0, ptr noundef %1) #0 {\ndefine dso_local void @symm_p_i8")
    assert "takes 2 parameters" in problems(ir)[0]


def test_extension_attributes():
    ir = GOOD_IR.replace("i8 noundef signext %2", "i8 noundef zeroext %2")
    assert problems(ir) == ["signature: symm_p_i8 parameter 3 (int8_t) lacks signext"]
    ir = GOOD_IR.replace("zeroext i16 @symm_g_u16", "i16 @symm_g_u16")
    assert problems(ir) == ["signature: symm_g_u16 return value lacks zeroext"]


def test_global_state():
    p = problems(GOOD_IR + "@counter = dso_local global i32 0, align 4\n")
    assert any("@counter has external linkage" in x for x in p), p
    assert any("@counter is a writable global" in x for x in p), p
    p = problems(GOOD_IR + "@tbl = internal addrspace(4) constant [2 x i32] zeroinitializer\n")
    assert p == ["global state: @tbl is a __constant__ object"], p
    p = problems(GOOD_IR + "@buf = internal addrspace(3) global [2 x i32] undef\n")
    assert any("shared memory" in x for x in p), p


def test_external_calls():
    p = problems(GOOD_IR + "declare void @symm__not_provided(ptr)\n")
    assert p == ["external call: the bitcode calls symm__not_provided, which nothing provides"]


def test_backend_library_calls():
    call = "declare void @nvshmem_quiet()\n"
    assert cb.check_module(decls(), GOOD_IR + call, "sm_90", "nvshmem") == []
    assert problems(GOOD_IR + call) == ["external call: the bitcode calls nvshmem_quiet, which nothing provides"]
    assert cb.backend_of("/x/libsymm_device_nvshmem_sm90.bc") == "nvshmem"
    assert cb.backend_of("/x/libsymm_device_sm90.bc") is None


def test_target():
    assert problems(GOOD_IR, "sm_80") == ["target: built for ['sm_90'], the name says sm_80"]
    ir = GOOD_IR.replace("nvptx64-nvidia-cuda", "x86_64-pc-linux-gnu")
    assert "triple" in problems(ir)[0]
    assert cb.expected_cpu("/x/libsymm_device_sm80.bc") == "sm_80"
    assert cb.expected_cpu("/x/libsymm_device.bc") is None


def test_unknown_c_type_is_reported():
    d = cb.header_declarations("extern void symm_x(const symm_ctx_t *ctx, __int128 v);")
    try:
        cb.check_module(d, "target triple = \"nvptx64-nvidia-cuda\"\n"
                           "define void @symm_x(ptr %0, i128 %1) {\n", None)
    except ValueError as e:
        assert "__int128" in str(e)
    else:
        raise AssertionError("an unmapped C type must stop the check")


def test_real_clang_output_with_mistakes(tmp_path):
    """The checker reads real llvm-dis output: a library built from the real
    headers plus an exported helper, a global counter and a __constant__
    table is rejected for exactly those."""
    import shutil
    import subprocess

    import pytest
    clang = os.environ.get("SYMM_CLANG19") or shutil.which("clang-19")
    dis = os.environ.get("SYMM_LLVM_DIS19") or shutil.which("llvm-dis-19")
    if not clang or not dis:
        pytest.skip("clang-19/llvm-dis-19 not installed")
    include = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
    src = tmp_path / "bad.c"
    src.write_text('#include "symm/symm_device.h"\n'
                   "int symm_leaked_counter;\n"
                   "__attribute__((address_space(4))) const int symm_table[2] = {1, 2};\n"
                   "int symm_leaked_helper(int x) { return x + symm_leaked_counter + symm_table[x & 1]; }\n")
    bc = tmp_path / "libsymm_device_sm90.bc"  # -O0: quick, and what is checked does not depend on it
    subprocess.run([clang, "-x", "c", "-std=gnu11", "--target=nvptx64-nvidia-cuda", "-nostdlibinc",
                    "-O0", "-emit-llvm", "-DSYMM_BITCODE=1", "-I", include, "-march=sm_90", "-c",
                    str(src), "-o", str(bc)], check=True)
    ir = subprocess.run([dis, str(bc), "-o", "-"], check=True, capture_output=True, text=True).stdout
    decls = cb.header_declarations(cb.preprocess_header(os.environ.get("CC", "cc"), include))
    p = cb.check_module(decls, ir, "sm_90")
    assert any(x.startswith("extra export: symm_leaked_helper") for x in p), p
    assert any("@symm_leaked_counter has external linkage" in x for x in p), p
    assert any("@symm_leaked_counter is a writable global" in x for x in p), p
    assert any("@symm_table" in x and "__constant__" in x for x in p), p
    assert not any(x.startswith(("missing", "signature")) for x in p), p
