/*
 * device/backend/list.h - the backends, one line each: the one list from
 * which the device dispatch (dispatch.h), the host registry
 * (src/backend/registry.c) and python/symm/_backends.py
 * (python/tools/gen_backends.py) are made, and which CMake reads
 * (cmake/symm_backends.cmake) for the bitcode rules and the per-backend
 * tests. Adding a backend: docs/backends.md.
 * Internal: not part of the public API.
 *
 * X(name, KIND, dev, bitcode, device_lib, include_var, module_init)
 *   name         SYMM_BACKEND=<name>, symm_backend_name(), src/backend/<name>/,
 *                symm__backend_<name>_ops, and device/backend/<name>.h
 *   KIND         enum symm_backend_kind is SYMM_BACKEND_<KIND>
 *   dev          far: peers outside the load/store window go through the
 *                backend's device file (device/backend/<name>.h, compiled in
 *                with SYMM_DEVICE_WITH_<KIND> or SYMM_DEVICE_BACKEND=<name>);
 *                none: no device calls of its own
 *   bitcode      stem of the device bitcode a DSL links (<stem>_sm<arch>.bc),
 *                "" when kernels cannot be compiled for it
 *   device_lib   the library's own device bitcode linked beside it, "" if none
 *   include_var  the CMake variable holding the library's include folder, ""
 *                if none (cmake/backend/<name>.cmake sets it)
 *   module_init  1: every module that links the device library needs a
 *                set-up before its first launch (symm_backend_module_init)
 */
#ifndef SYMM_DEVICE_BACKEND_LIST_H
#define SYMM_DEVICE_BACKEND_LIST_H

/* clang-format off */
#define SYMM__BACKEND_LIST(X)                                                                                   \
    X(native,  NATIVE,  none, "libsymm_device",         "",                  "",                         0)       \
    X(host,    HOST,    none, "",                       "",                  "",                         0)       \
    X(nvshmem, NVSHMEM, far,  "libsymm_device_nvshmem", "libnvshmem_device", "SYMM_NVSHMEM_INCLUDE_DIR", 1)       \
    X(nccl,    NCCL,    far,  "libsymm_device_nccl",    "",                  "SYMM_NCCL_INCLUDE_DIR",    0)
/* clang-format on */

#endif /* SYMM_DEVICE_BACKEND_LIST_H */
