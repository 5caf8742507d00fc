/*
 * test_backend_load.c - the scale-out backends' library loading, without a
 * GPU: a missing library is one clear error on every PE (which file, where
 * it looked, what to install), and a found library gets as far as the GPU.
 *
 * Usage (SYMM_BACKEND set by the caller):
 *   test_backend_load missing VAR HINT   VAR (SYMM_<KIND>_LIB) names a file that is not
 *                                        there; the message names VAR and says HINT
 *   test_backend_load no_gpu             the library is found; no GPU is visible
 *   test_backend_load bad_name           SYMM_BACKEND names no backend; the message
 *                                        names every backend of the list
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symm/device/backend/list.h"
#include "symm_test.h"

static void expect_init_error(symm_status_t want, const char *const *words) {
    symm_status_t st = symm_init();
    if (st == SYMM_SUCCESS) {
        symm_finalize();
        TEST_FAIL("symm_init succeeded; expected %s", symm_strerror(want));
    }
    const char *msg = symm_last_error();
    TEST_ASSERT(st == want, "symm_init -> %s (%s), expected %s", symm_strerror(st), msg, symm_strerror(want));
    for (; *words; words++)
        TEST_ASSERT(strstr(msg, *words) != NULL, "the message lacks '%s': %s", *words, msg);
    TEST_ASSERT(symm_backend_name() == NULL, "a backend name after a failed init");
    printf("ok: %s: %s\n", symm_strerror(st), msg);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    const char *backend = getenv("SYMM_BACKEND");
    if (!backend)
        TEST_FAIL("set SYMM_BACKEND");
    if (strcmp(which, "missing") == 0) {
        if (argc < 4)
            TEST_FAIL("usage: test_backend_load missing SYMM_<KIND>_LIB HINT");
        char var[128];
        snprintf(var, sizeof var, "%s=", argv[2]);
        const char *words[] = {var, "cannot open", argv[3], NULL};
        expect_init_error(SYMM_ERR_UNSUPPORTED, words);
    } else if (strcmp(which, "no_gpu") == 0) {
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        if (!visible || strcmp(visible, "-1") != 0)
            TEST_FAIL("run with CUDA_VISIBLE_DEVICES=-1");
        const char *words[] = {"run on a GPU machine", NULL};
        expect_init_error(SYMM_ERR_NO_DEVICE, words);
    } else if (strcmp(which, "bad_name") == 0) {
#define NAME(be, ...) #be,
        const char *words[] = {"is not a backend", SYMM__BACKEND_LIST(NAME) NULL};
#undef NAME
        expect_init_error(SYMM_ERR_ENV, words);
    } else {
        TEST_FAIL("unknown case '%s'", which);
    }
    return 0;
}
