# The stub backend's library (tests/tree/test_backend_stub.py): none to find;
# sets the include variable its list.h line names.
set(SYMM_STUB_INCLUDE_DIR "" CACHE PATH "the stub backend's include folder (none)")
message(STATUS "symm: stub backend: nothing to find")
