# symm_add_pytest(name ARGS <pytest args...> [ENV VAR=value...] [LABELS ...] [TIMEOUT s])
#   Registers `python3 -m pytest <args>` as a test. Where python3 or pytest is
#   missing the test still runs, prints "SKIP: <why>" and exits 77 (skipped),
#   so a missing tool is visible in the ctest summary rather than silent.
# symm_add_skip_test(name REASON text)
#   A test that only says why it cannot run here.
find_package(Python3 COMPONENTS Interpreter)
set(SYMM_HAVE_PYTEST OFF)
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pytest"
                  RESULT_VARIABLE _symm_pytest_rc OUTPUT_QUIET ERROR_QUIET)
  if(_symm_pytest_rc EQUAL 0)
    set(SYMM_HAVE_PYTEST ON)
  endif()
endif()

function(symm_add_skip_test name)
  cmake_parse_arguments(T "" "REASON" "LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND sh -c "echo 'SKIP: ${T_REASON}'; exit 77")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

function(symm_add_pytest name)
  cmake_parse_arguments(T "" "TIMEOUT" "ARGS;ENV;LABELS" ${ARGN})
  if(NOT SYMM_HAVE_PYTEST)
    symm_add_skip_test(${name} REASON "python3 with pytest not found (pip install pytest)" LABELS "${T_LABELS}")
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${name}
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${T_ARGS}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
