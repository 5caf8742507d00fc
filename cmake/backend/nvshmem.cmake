# NVSHMEM, for the nvshmem backend (src/backend/nvshmem: headers at build
# time, the library opened at run time), its tests and symm-bench's NVSHMEM
# columns. Not required.
#
# Looks at SYMM_NVSHMEM_HOME, then the pip package nvidia-nvshmem-cu13
# (cmake/symm_pip.cmake). Sets SYMM_NVSHMEM_INCLUDE_DIR (list.h's include
# variable of nvshmem), SYMM_NVSHMEM_HOST_LIBRARY (libnvshmem_host.so.3),
# SYMM_NVSHMEM_DEVICE_LIBRARY (libnvshmem_device.a) and
# SYMM_NVSHMEM_DEVICE_BITCODE (libnvshmem_device.bc).

set(SYMM_NVSHMEM_HOME "$ENV{SYMM_NVSHMEM_HOME}" CACHE PATH
    "NVSHMEM install prefix (include/nvshmem.h, lib/libnvshmem_host.so.3, lib/libnvshmem_device.a)")

if(SYMM_NVSHMEM_INCLUDE_DIR AND NOT EXISTS "${SYMM_NVSHMEM_INCLUDE_DIR}/nvshmem.h")
  message(STATUS "symm: NVSHMEM at ${SYMM_NVSHMEM_INCLUDE_DIR} is gone: looking again")
  unset(SYMM_NVSHMEM_INCLUDE_DIR CACHE)
endif()
if(NOT SYMM_NVSHMEM_INCLUDE_DIR OR NOT SYMM_NVSHMEM_HOST_LIBRARY)
  unset(SYMM_NVSHMEM_INCLUDE_DIR CACHE)
  unset(SYMM_NVSHMEM_HOST_LIBRARY CACHE)
  unset(SYMM_NVSHMEM_DEVICE_LIBRARY CACHE)
  unset(SYMM_NVSHMEM_DEVICE_BITCODE CACHE)
  set(_root "${SYMM_NVSHMEM_HOME}")
  if(NOT _root)
    symm_pip_package_dir(nvshmem _root)
  endif()
  if(_root)
    find_path(SYMM_NVSHMEM_INCLUDE_DIR nvshmem.h PATHS "${_root}/include" NO_DEFAULT_PATH)
    find_library(SYMM_NVSHMEM_HOST_LIBRARY NAMES libnvshmem_host.so.3 nvshmem_host
                 PATHS "${_root}/lib" "${_root}/lib64" NO_DEFAULT_PATH)
    find_library(SYMM_NVSHMEM_DEVICE_LIBRARY NAMES libnvshmem_device.a nvshmem_device
                 PATHS "${_root}/lib" "${_root}/lib64" NO_DEFAULT_PATH)
    find_file(SYMM_NVSHMEM_DEVICE_BITCODE libnvshmem_device.bc
              PATHS "${_root}/lib" "${_root}/lib64" NO_DEFAULT_PATH)
  endif()
endif()
if(SYMM_NVSHMEM_INCLUDE_DIR AND SYMM_NVSHMEM_HOST_LIBRARY)
  message(STATUS "symm: NVSHMEM ${SYMM_NVSHMEM_HOST_LIBRARY}")
else()
  message(STATUS "symm: NVSHMEM not found (the nvshmem backend opens it at run time all the same; "
                 "its tests and symm-bench's NVSHMEM columns need it here: pip install nvidia-nvshmem-cu13)")
endif()

# for the per-backend tests (cmake/symm_backends.cmake)
set(SYMM_BACKEND_nvshmem_LIBRARY "${SYMM_NVSHMEM_HOST_LIBRARY}")
set(SYMM_BACKEND_nvshmem_DEVICE_LINK "${SYMM_NVSHMEM_DEVICE_LIBRARY}" "${SYMM_NVSHMEM_HOST_LIBRARY}" CUDA::cuda_driver)
set(SYMM_BACKEND_nvshmem_HINT "pip install nvidia-nvshmem-cu13")
# remote get, signals and atomics through NVSHMEM's device library: every call can take it
set(SYMM_BACKEND_nvshmem_FORCE_REMOTE ON)
