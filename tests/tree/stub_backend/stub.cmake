# The stub backend's library (tests/tree/test_backend_stub.py): none to find.
# Sets the include variable its list.h line names (empty: not found) and how
# to get the library (the skip messages of its tests say it).
set(SYMM_STUB_INCLUDE_DIR "" CACHE PATH "the stub backend's include folder (none)")
set(SYMM_BACKEND_stub_HINT "the stub has no library")
message(STATUS "symm: stub backend: nothing to find")
