# Finds the LLVM 19 tools the device bitcode needs (Debian: apt-get install
# clang-19 llvm-19). Included by bitcode/ and tests/bitcode/, so both agree on
# whether the bitcode exists. Sets SYMM_CLANG19, SYMM_LLVM_DIS19 (cached) and
# SYMM_HAVE_LLVM19.
find_program(SYMM_CLANG19 NAMES clang-19 PATHS /usr/lib/llvm-19/bin
  DOC "clang 19, which compiles the device API to LLVM bitcode for the nvptx64 target")
find_program(SYMM_LLVM_DIS19 NAMES llvm-dis-19 PATHS /usr/lib/llvm-19/bin
  DOC "llvm-dis 19, used by the bitcode symbol check")
if(SYMM_CLANG19 AND SYMM_LLVM_DIS19)
  set(SYMM_HAVE_LLVM19 ON)
else()
  set(SYMM_HAVE_LLVM19 OFF)
endif()
# One bitcode file per GPU architecture (see bitcode/README.md).
set(SYMM_BITCODE_ARCHS 80 90)
set(SYMM_BITCODE_DEFAULT_ARCH 90)
