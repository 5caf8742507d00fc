# NCCL, for the nccl backend (src/backend/nccl: headers at build time, the
# library opened at run time), its tests and symm-bench. Not required: when
# not found the backend is built without its device communicator.
#
# Looks at SYMM_NCCL_HOME, then the CUDA toolkit, then the pip package
# nvidia-nccl-cu13 (cmake/symm_pip.cmake). Sets SYMM_NCCL_INCLUDE_DIR (list.h's
# include variable of nccl) and SYMM_NCCL_LIBRARY (libnccl.so.2).

set(SYMM_NCCL_HOME "$ENV{SYMM_NCCL_HOME}" CACHE PATH "NCCL install prefix (include/nccl.h, lib/libnccl.so.2)")

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


# for the per-backend tests (cmake/symm_backends.cmake); NCCL's device API is
# headers only, and GIN has no remote get, signals or atomics to force
set(SYMM_BACKEND_nccl_LIBRARY "${SYMM_NCCL_LIBRARY}")
set(SYMM_BACKEND_nccl_DEVICE_LINK "")
set(SYMM_BACKEND_nccl_HINT "pip install nvidia-nccl-cu13")
set(SYMM_BACKEND_nccl_FORCE_REMOTE OFF)
