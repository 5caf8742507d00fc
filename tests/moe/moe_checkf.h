/*
 * moe_checkf.h - CHECKF(cond, fmt, ...) for the MoE tests that run on PEs: a failed check is
 * counted and the first 20 are printed with the PE, file and line. The including file
 * defines `me` (its PE) and `failures`.
 */
#ifndef SYMM_TEST_MOE_CHECKF_H
#define SYMM_TEST_MOE_CHECKF_H

#include <stdio.h>

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            if (failures++ < 20) {                                               \
                fprintf(stderr, "FAIL [pe %d] %s:%d: ", me, __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                                    \
                fprintf(stderr, "\n");                                           \
            }                                                                    \
        }                                                                        \
    } while (0)

#endif /* SYMM_TEST_MOE_CHECKF_H */
