# The pip-package lookup the scale-out libraries of cmake/backend/<name>.cmake
# share (included first by the top CMakeLists.txt). Nothing here is required.
#
# In order, each backend file looks at:
#   SYMM_<NAME>_HOME (cmake -D or environment): <home>/include, <home>/lib
#   its own extra places (NCCL: the CUDA toolkit's include and lib folders)
#   the pip package nvidia-<name>-cu13 (python3 on PATH, then SYMM_COMM_PYTHON,
#   then /opt/torch/.venv/bin/python3)

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

