# symm_run(cmd args...): for the tests written as `cmake -P` scripts. Runs
# the command, stops the script with the command line and its output when it
# fails, and leaves its stdout in `run_out` in the caller's scope.
function(symm_run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "FAILED (${rc}): ${cmd}\n${out}${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()
