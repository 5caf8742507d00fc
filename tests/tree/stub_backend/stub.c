/*
 * stub.c - a backend with no engine behind it: tests/tree/test_backend_stub.py
 * adds it to a copy of the tree by the steps of docs/backends.md, "Adding a
 * backend", as src/backend/stub/stub.c. Opening it fails with a message.
 */
#include "backend/backend.h"
#include "core/log.h"

static symm_status_t stub_open(const symm__backend_args_t *args, symm__backend_t **out) {
    (void)args;
    (void)out;
    return symm__error(SYMM_ERR_UNSUPPORTED, "the stub backend has no engine");
}

const symm__backend_ops_t symm__backend_stub_ops = {
    .name = "stub",
    .kind = SYMM_BACKEND_STUB,
    .on_native = 1,
    .multi_node = 1,
    .open = stub_open,
};
