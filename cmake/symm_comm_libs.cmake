# Where NVSHMEM and NCCL are, for the scale-out backends (src/backend/nvshmem,
# src/backend/nccl: headers at build time, libraries opened at run time), their
# tests and symm-bench. Nothing here is required: what is not found is left
# out with a message, and libsymm still builds.
#
# In order:
#   SYMM_NCCL_HOME / SYMM_NVSHMEM_HOME (cmake -D or environment): <home>/include, <home>/lib
#   NCCL only: the CUDA toolkit's include and lib folders
#   the pip packages nvidia-nccl-cu13 / nvidia-nvshmem-cu13 (python3 on PATH,
#   then SYMM_COMM_PYTHON, then /opt/torch/.venv/bin/python3)
#
# Sets:
#   SYMM_NCCL_INCLUDE_DIR, SYMM_NCCL_LIBRARY                  (libnccl.so.2)
#   SYMM_NVSHMEM_INCLUDE_DIR, SYMM_NVSHMEM_HOST_LIBRARY,      (libnvshmem_host.so.3)
#   SYMM_NVSHMEM_DEVICE_LIBRARY, SYMM_NVSHMEM_DEVICE_BITCODE  (libnvshmem_device.a / .bc)

set(SYMM_NCCL_HOME "$ENV{SYMM_NCCL_HOME}" CACHE PATH "NCCL install prefix (include/nccl.h, lib/libnccl.so.2)")
set(SYMM_NVSHMEM_HOME "$ENV{SYMM_NVSHMEM_HOME}" CACHE PATH
    "NVSHMEM install prefix (include/nvshmem.h, lib/libnvshmem_host.so.3, lib/libnvshmem_device.a)")
set(SYMM_COMM_PYTHON "" CACHE FILEPATH "python3 that has the nvidia-*-cu13 pip packages")

# The folder of pip package nvidia.<module>, or "" (tries each python).
function(symm_pip_package_dir module out)
  find_program(_symm_comm_py3 python3)
  set(pythons ${_symm_comm_py3} ${SYMM_COMM_PYTHON} /opt/torch/.venv/bin/python3)
  set(found "")
  foreach(py IN LISTS pythons)
    if(NOT py OR NOT EXISTS "${py}")
      continue()
    endif()
    execute_process(
      COMMAND "${py}" -c "import nvidia.${module} as m; print(m.__path__[0])"
      OUTPUT_VARIABLE dir RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND IS_DIRECTORY "${dir}/include")
      set(found "${dir}")
      break()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# ---- NCCL ------------------------------------------------------------------------------
# The device communicator needs ncclDevCommRequirements' GIN fields (NCCL 2.28's later
# releases); headers without them fail to compile nccl_devcomm.cu. TRUE in `out` if
# `dir` holds such headers.
function(symm_nccl_headers_usable dir out)
  set(gin "")
  if(EXISTS "${dir}/nccl_device/core.h")
    file(STRINGS "${dir}/nccl_device/core.h" gin REGEX "ginContextCount")
  endif()
  if(gin)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# a cached choice is checked again: a build folder can come from another machine
if(SYMM_NCCL_INCLUDE_DIR)
  symm_nccl_headers_usable("${SYMM_NCCL_INCLUDE_DIR}" _ok)
  if(NOT _ok OR NOT EXISTS "${SYMM_NCCL_LIBRARY}")
    message(STATUS "symm: NCCL at ${SYMM_NCCL_INCLUDE_DIR} / ${SYMM_NCCL_LIBRARY} is gone or lacks "
                   "ncclDevCommRequirements::ginContextCount: looking again")
    unset(SYMM_NCCL_INCLUDE_DIR CACHE)
    unset(SYMM_NCCL_LIBRARY CACHE)
  endif()
endif()
if(NOT SYMM_NCCL_INCLUDE_DIR OR NOT SYMM_NCCL_LIBRARY)
  unset(SYMM_NCCL_INCLUDE_DIR CACHE)
  unset(SYMM_NCCL_LIBRARY CACHE)
  set(_roots "")
  if(SYMM_NCCL_HOME)
    list(APPEND _roots "${SYMM_NCCL_HOME}")
  endif()
  list(APPEND _roots "CUDA")
  symm_pip_package_dir(nccl _pip)
  if(_pip)
    list(APPEND _roots "${_pip}")
  endif()
  foreach(root IN LISTS _roots)
    if(root STREQUAL "CUDA")
      set(_inc ${CUDAToolkit_INCLUDE_DIRS})
      set(_lib ${CUDAToolkit_LIBRARY_DIR})
    else()
      set(_inc "${root}/include")
      set(_lib "${root}/lib" "${root}/lib64")
    endif()
    find_path(SYMM_NCCL_INCLUDE_DIR nccl_device.h PATHS ${_inc} NO_DEFAULT_PATH)
    find_library(SYMM_NCCL_LIBRARY NAMES libnccl.so.2 nccl PATHS ${_lib} NO_DEFAULT_PATH)
    if(SYMM_NCCL_INCLUDE_DIR)
      symm_nccl_headers_usable("${SYMM_NCCL_INCLUDE_DIR}" _ok)
      if(NOT _ok)
        message(STATUS "symm: NCCL headers in ${SYMM_NCCL_INCLUDE_DIR} lack "
                       "ncclDevCommRequirements::ginContextCount: passed over")
        unset(SYMM_NCCL_INCLUDE_DIR CACHE)
      endif()
    endif()
    if(SYMM_NCCL_INCLUDE_DIR AND SYMM_NCCL_LIBRARY)
      break()
    endif()
    unset(SYMM_NCCL_INCLUDE_DIR CACHE)
    unset(SYMM_NCCL_LIBRARY CACHE)
  endforeach()
endif()
if(SYMM_NCCL_INCLUDE_DIR AND SYMM_NCCL_LIBRARY)
  message(STATUS "symm: NCCL ${SYMM_NCCL_LIBRARY} (headers ${SYMM_NCCL_INCLUDE_DIR})")
else()
  message(STATUS "symm: NCCL 2.28+ with its device headers not found: the nccl backend is built without "
                 "its device communicator (set SYMM_NCCL_HOME or pip install nvidia-nccl-cu13)")
endif()

# ---- NVSHMEM ----------------------------------------------------------------------------
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
