# cmake -DBUILD= -DSRC= -DOUT= -DNVCC= -DCC= -DARCH= -P check_install.cmake
include(${SRC}/tests/common/symm_run.cmake)

file(REMOVE_RECURSE ${OUT})
set(prefix ${OUT}/prefix)
symm_run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})

# the installed programs find the installed libsymm
symm_run(${prefix}/bin/symm-info)
if(NOT run_out MATCHES "GPUs: ")
  message(FATAL_ERROR "installed symm-info printed: ${run_out}")
endif()

# find_package(symm): every example, warnings as errors
symm_run(${CMAKE_COMMAND} -S ${SRC}/examples/c -B ${OUT}/examples -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_CUDA_COMPILER=${NVCC} -DCMAKE_CUDA_ARCHITECTURES=${ARCH}
    "-DCMAKE_CUDA_FLAGS=-Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror")
symm_run(${CMAKE_COMMAND} --build ${OUT}/examples -j 2)
foreach(ex ring_shift ping_pong all_reduce_kernel put_signal_pipeline)
  if(NOT EXISTS ${OUT}/examples/${ex})
    message(FATAL_ERROR "examples/c built no ${ex}")
  endif()
endforeach()

# pkg-config: the README's one-line nvcc build, and a host program that runs
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
symm_run(${PKG_CONFIG} --cflags --libs symm)
separate_arguments(pc_flags UNIX_COMMAND "${run_out}")
symm_run(${NVCC} -arch=sm_${ARCH} ${SRC}/examples/c/ring_shift.cu ${pc_flags} -o ${OUT}/ring_shift_pc)
file(WRITE ${OUT}/host.c "#include <stdio.h>\n#include <symm/symm.h>\n"
     "int main(void) { printf(\"%s\\n\", symm_strerror(SYMM_ERR_NO_DEVICE)); return symm_initialized(); }\n")
symm_run(${CC} ${OUT}/host.c ${pc_flags} -o ${OUT}/host)
symm_run(${OUT}/host) # finds libsymm through the rpath the .pc file sets
if(NOT run_out MATCHES "SYMM_ERR_NO_DEVICE")
  message(FATAL_ERROR "the pkg-config-built program printed: ${run_out}")
endif()

# the README shows examples/c/ring_shift.cu verbatim
file(READ ${SRC}/README.md readme)
file(READ ${SRC}/examples/c/ring_shift.cu example)
string(FIND "${readme}" "${example}" at)
if(at LESS 0)
  message(FATAL_ERROR "README.md's C example is not examples/c/ring_shift.cu: copy the file into it")
endif()
message(STATUS "install, examples/c, pkg-config: ok")
