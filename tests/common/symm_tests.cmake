# Helpers shared by the test folders.
#
# symm_add_test_exe(name SOURCES...)  - a test executable linked with symm.
# symm_add_gpu_test(name EXE exe NPES n [ARGS ...] [TIMEOUT s] [TRAPS])
#   - runs `symmrun -n n exe args` under the "gpu" label; exit 77 = skipped.
#     TRAPS: the test stops a kernel on purpose (a device trap) and is also
#     labelled "traps": under MPS a client's fault can leave the server refusing
#     new clients, so scripts/gpu_suite.sh runs these apart, each with its own daemon.
function(symm_add_test_exe name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE symm symm_test_common symm_warnings symm_sanitize)
endfunction()

function(symm_add_gpu_test name)
  cmake_parse_arguments(T "TRAPS" "EXE;NPES;TIMEOUT" "ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  # A GPU run on a lent machine caps every test (symmrun stops it and says so).
  if(SYMM_GPU_TEST_TIMEOUT AND T_TIMEOUT GREATER SYMM_GPU_TEST_TIMEOUT)
    set(T_TIMEOUT ${SYMM_GPU_TEST_TIMEOUT})
  endif()
  add_test(NAME ${name}
    COMMAND $<TARGET_FILE:symmrun> -n ${T_NPES} --timeout ${T_TIMEOUT} $<TARGET_FILE:${T_EXE}> ${T_ARGS})
  set(labels gpu)
  if(T_TRAPS)
    list(APPEND labels traps)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
endfunction()

add_library(symm_test_common INTERFACE)
target_include_directories(symm_test_common INTERFACE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/src)
