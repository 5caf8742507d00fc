# Compile the device API on its own, as every consumer will:
#   - include/symm/symm_device.h alone, as CUDA, with nvcc (sm_80, sm_90);
#   - with clang as plain C for nvptx64 (sm_80, sm_90), inline (static) and
#     as bitcode (SYMM_BITCODE), warnings as errors; the bitcode form and
#     use_all.cu (every call, inlined) are lowered to PTX and assembled with
#     ptxas, which is what checks the inline PTX of the clang path.
# Run by ctest in CI (no GPU needed). Variables: NVCC, PTXAS, CLANG (may be
# empty), SRC (source root), OUT (scratch directory).
file(MAKE_DIRECTORY ${OUT})
set(hdr ${SRC}/include/symm/symm_device.h)
set(use ${SRC}/tests/device/use_all.cu)

include(${SRC}/tests/common/symm_run.cmake)

foreach(arch 80 90)
  symm_run(${NVCC} -x cu -arch=sm_${arch} -I${SRC}/include -Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror
      -c ${hdr} -o ${OUT}/hdr_nvcc_sm${arch}.o)
  message(STATUS "nvcc sm_${arch}: symm_device.h alone compiles as CUDA")
endforeach()

if(NOT CLANG)
  message(STATUS "clang not found: skipped the plain-C nvptx64 checks")
  return()
endif()

set(cflags -x c --target=nvptx64-nvidia-cuda -O2 -ffreestanding -Wall -Wextra -Werror -I${SRC}/include)
foreach(arch 80 90)
  symm_run(${CLANG} ${cflags} -march=sm_${arch} -emit-llvm -c ${hdr} -o ${OUT}/hdr_sm${arch}.bc)
  symm_run(${CLANG} ${cflags} -march=sm_${arch} -DSYMM_BITCODE -emit-llvm -c ${hdr} -o ${OUT}/hdr_sm${arch}_bitcode.bc)
  symm_run(${CLANG} ${cflags} -march=sm_${arch} -DSYMM_BITCODE -S ${hdr} -o ${OUT}/hdr_sm${arch}_bitcode.ptx)
  symm_run(${PTXAS} -arch=sm_${arch} ${OUT}/hdr_sm${arch}_bitcode.ptx -o ${OUT}/hdr_sm${arch}_bitcode.cubin)
  # The copy variants do not depend on the architecture: all of them on
  # sm_90, the default on sm_80.
  set(variants "")
  if(arch EQUAL 90)
    set(variants "-DSYMM_COPY_VARIANT=1" "-DSYMM_COPY_UNROLL=8")
  endif()
  foreach(variant "" ${variants})
    string(MAKE_C_IDENTIFIER "use${arch}${variant}" tag)
    symm_run(${CLANG} ${cflags} -march=sm_${arch} ${variant} -S ${use} -o ${OUT}/${tag}.ptx)
    symm_run(${PTXAS} -arch=sm_${arch} ${OUT}/${tag}.ptx -o ${OUT}/${tag}.cubin)
  endforeach()
  message(STATUS "clang sm_${arch}: symm_device.h compiles as C (inline and SYMM_BITCODE); ptxas accepts it")
endforeach()
