# The backends of include/symm/device/backend/list.h, read at configure time,
# so that the bitcode rules (bitcode/CMakeLists.txt) and the per-backend test
# lists loop over the one list instead of naming backends (docs/backends.md).
#
# After include():
#   SYMM_BACKENDS       every backend, in the list's order
#   SYMM_BACKENDS_GPU   those kernels are compiled for (a bitcode stem): the
#                       suites that run symm's kernels run on each
#   SYMM_BACKENDS_FAR   those with device calls of their own (dev "far")
#   SYMM_BACKEND_<name>_KIND, _FAR (ON/OFF), _BITCODE, _DEVICE_LIB,
#   _INCLUDE_VAR, _MODULE_INIT   the list line's columns
#
# What cmake/backend/<name>.cmake sets for them (all optional; a backend
# without a library sets none):
#   <include_var>                 the library's include folder ("" if not found)
#   SYMM_BACKEND_<name>_LIBRARY   the library opened at run time, if found here
#                                 (its loading test with no GPU runs then)
#   SYMM_BACKEND_<name>_DEVICE_LINK  what a CUDA C program built with its
#                                 device calls links (a "" or *-NOTFOUND
#                                 entry: not found, its device suites are
#                                 not built)
#   SYMM_BACKEND_<name>_HINT      how to install the library (skip messages)
#   SYMM_BACKEND_<name>_FORCE_REMOTE  ON: every device call can take the
#                                 library's own path on one GPU, so the device
#                                 suites also run with SYMM_DEBUG_FORCE_REMOTE=1
#
# Functions:
#   symm_backend_headers(<name> <out>)   the include folder its device code
#                                        needs, "" when it needs none, and
#                                        NOTFOUND when it needs one not found
#   symm_backend_device_ok(<name> <ok> <why>)  CUDA C with its device calls
#                                        compiles and links here; else why not
#   symm_backend_device_use(<name> <ok> <why> <incs> <defs> <links>)  the
#                                        same, and where ok appends what a
#                                        target compiling its calls needs
#   symm_backend_bitcode(<name> <how> <why>)   how its own bitcode file is
#                                        built: "c" (bitcode/symm_device_bitcode.c
#                                        fixed to it), "cuda" (clang in CUDA mode
#                                        on bitcode/symm_device_<name>_bitcode.cu,
#                                        the library's headers inside), "" (none;
#                                        why says so when it has a stem)
set(_symm_list_h ${CMAKE_CURRENT_LIST_DIR}/../include/symm/device/backend/list.h)
get_filename_component(_symm_list_h "${_symm_list_h}" ABSOLUTE)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_symm_list_h}")
set(SYMM_BACKENDS_BITCODE_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/../bitcode)
get_filename_component(SYMM_BACKENDS_BITCODE_SOURCE_DIR "${SYMM_BACKENDS_BITCODE_SOURCE_DIR}" ABSOLUTE)

# one CMake list element per line; the macro's line continuations (and any
# ';') would otherwise glue lines together
file(READ "${_symm_list_h}" _symm_list_text)
string(REPLACE "\\" "" _symm_list_text "${_symm_list_text}")
string(REPLACE ";" "," _symm_list_text "${_symm_list_text}")
string(REPLACE "\n" ";" _symm_list_lines "${_symm_list_text}")
list(FILTER _symm_list_lines INCLUDE REGEX "^[ \t]*X\\(")
set(SYMM_BACKENDS "")
set(SYMM_BACKENDS_GPU "")
set(SYMM_BACKENDS_FAR "")
# X(name, KIND, none|far, "bitcode", "device_lib", "include_var", 0|1), as python/tools/gen_backends.py reads it
set(_w "[ \t]*")
set(_q "\"([^\"]*)\"")
string(CONCAT _symm_list_re "^${_w}X\\(${_w}([A-Za-z0-9_]+)${_w},${_w}([A-Za-z0-9_]+)${_w},${_w}(none|far)${_w},"
       "${_w}${_q}${_w},${_w}${_q}${_w},${_w}${_q}${_w},${_w}([01])${_w}\\)${_w}$")
foreach(_line IN LISTS _symm_list_lines)
  if(NOT _line MATCHES "${_symm_list_re}")
    message(FATAL_ERROR "symm: ${_symm_list_h}: a line of SYMM__BACKEND_LIST that is not "
                        "X(name, KIND, none|far, \"bitcode\", \"device_lib\", \"include_var\", 0|1): ${_line}")
  endif()
  set(_n ${CMAKE_MATCH_1})
  if(_n IN_LIST SYMM_BACKENDS)
    message(FATAL_ERROR "symm: ${_symm_list_h} names the backend ${_n} twice")
  endif()
  list(APPEND SYMM_BACKENDS ${_n})
  set(SYMM_BACKEND_${_n}_KIND ${CMAKE_MATCH_2})
  set(SYMM_BACKEND_${_n}_BITCODE "${CMAKE_MATCH_4}")
  set(SYMM_BACKEND_${_n}_DEVICE_LIB "${CMAKE_MATCH_5}")
  set(SYMM_BACKEND_${_n}_INCLUDE_VAR "${CMAKE_MATCH_6}")
  set(SYMM_BACKEND_${_n}_MODULE_INIT ${CMAKE_MATCH_7})
  if(CMAKE_MATCH_3 STREQUAL "far")
    set(SYMM_BACKEND_${_n}_FAR ON)
    list(APPEND SYMM_BACKENDS_FAR ${_n})
  else()
    set(SYMM_BACKEND_${_n}_FAR OFF)
  endif()
  if(NOT CMAKE_MATCH_4 STREQUAL "")
    list(APPEND SYMM_BACKENDS_GPU ${_n})
  endif()
endforeach()
if(NOT SYMM_BACKENDS)
  message(FATAL_ERROR "symm: no X(...) line in ${_symm_list_h}")
endif()
unset(_w)
unset(_q)

function(symm_backend_headers name out)
  set(_var "${SYMM_BACKEND_${name}_INCLUDE_VAR}")
  if(_var STREQUAL "")
    set(${out} "" PARENT_SCOPE)
  elseif(${_var})
    set(${out} "${${_var}}" PARENT_SCOPE)
  else()
    set(${out} NOTFOUND PARENT_SCOPE)
  endif()
endfunction()

function(symm_backend_device_ok name ok why)
  symm_backend_headers(${name} _inc)
  set(_why "")
  if(NOT _inc AND NOT _inc STREQUAL "")
    set(_why "${SYMM_BACKEND_${name}_KIND}'s headers not found")
  else()
    foreach(_l IN LISTS SYMM_BACKEND_${name}_DEVICE_LINK)
      if(_l STREQUAL "" OR _l MATCHES "NOTFOUND$")
        set(_why "${SYMM_BACKEND_${name}_KIND}'s device libraries not found")
        break()
      endif()
    endforeach()
  endif()
  if(_why AND SYMM_BACKEND_${name}_HINT)
    string(APPEND _why " (${SYMM_BACKEND_${name}_HINT})")
  endif()
  if(_why)
    set(${ok} OFF PARENT_SCOPE)
  else()
    set(${ok} ON PARENT_SCOPE)
  endif()
  set(${why} "${_why}" PARENT_SCOPE)
endfunction()

# symm_backend_device_use(<name> <ok> <why> <incs> <defs> <links>): as
# symm_backend_device_ok, and where the device code builds, appends its include
# folder, SYMM_DEVICE_WITH_<KIND>=1 and its device link to the caller's lists
# named <incs>, <defs> and <links> (what a target compiling its calls needs).
function(symm_backend_device_use name ok why incs defs links)
  symm_backend_device_ok(${name} _ok _why)
  set(${ok} ${_ok} PARENT_SCOPE)
  set(${why} "${_why}" PARENT_SCOPE)
  if(NOT _ok)
    return()
  endif()
  symm_backend_headers(${name} _inc)
  set(_i ${${incs}})
  set(_d ${${defs}})
  set(_l ${${links}})
  list(APPEND _i ${_inc})
  list(APPEND _d SYMM_DEVICE_WITH_${SYMM_BACKEND_${name}_KIND}=1)
  list(APPEND _l ${SYMM_BACKEND_${name}_DEVICE_LINK})
  set(${incs} ${_i} PARENT_SCOPE)
  set(${defs} ${_d} PARENT_SCOPE)
  set(${links} ${_l} PARENT_SCOPE)
endfunction()

function(symm_backend_bitcode name how why)
  set(_how "")
  set(_why "")
  if(SYMM_BACKEND_${name}_FAR AND NOT SYMM_BACKEND_${name}_BITCODE STREQUAL "")
    if(EXISTS ${SYMM_BACKENDS_BITCODE_SOURCE_DIR}/symm_device_${name}_bitcode.cu)
      symm_backend_headers(${name} _inc)
      if(_inc)
        set(_how cuda)
      else()
        set(_why "${SYMM_BACKEND_${name}_KIND}'s device headers not found")
      endif()
    else()
      set(_how c)
    endif()
  endif()
  set(${how} "${_how}" PARENT_SCOPE)
  set(${why} "${_why}" PARENT_SCOPE)
endfunction()
