/*
 * test_pe.c - symm_my_pe() for the core tests, which link the core and
 * bootstrap sources without the runtime (which owns the real one). It only
 * feeds the "[pe N]" of TEST_FAIL messages; tests set it once they know
 * their rank.
 */
#include "symm/symm.h"

int symm_core_test_pe = -1;

int symm_my_pe(void) { return symm_core_test_pe; }
