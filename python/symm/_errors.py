"""C status codes as Python exceptions.

Every failing C call becomes a SymmError subclass chosen by its status, with
the C library's message (symm_last_error(): names the PE, the call and the
reason). Arguments that are wrong on the Python side (dtype, shape, device,
a tensor that is not symmetric) raise TypeError/ValueError before any C call.
"""

from . import _consts

# (C name, exception class name, extra base class); the codes come from
# symm._consts (include/symm/symm_types.h); test_package.py checks that every
# status has a class.
_CLASSES = [
    ("SYMM_ERR_INVALID_ARG", "InvalidArgumentError", ValueError),
    ("SYMM_ERR_NOT_INITIALIZED", "NotInitializedError", None),
    ("SYMM_ERR_ALREADY_INITIALIZED", "AlreadyInitializedError", None),
    ("SYMM_ERR_NO_MEMORY", "NoMemoryError", MemoryError),
    ("SYMM_ERR_HEAP_EXHAUSTED", "HeapExhaustedError", MemoryError),
    ("SYMM_ERR_MISMATCH", "MismatchError", None),
    ("SYMM_ERR_INVALID_PE", "InvalidPEError", ValueError),
    ("SYMM_ERR_NOT_SYMMETRIC", "NotSymmetricError", ValueError),
    ("SYMM_ERR_INVALID_POINTER", "InvalidPointerError", ValueError),
    ("SYMM_ERR_BOOTSTRAP", "BootstrapError", None),
    ("SYMM_ERR_PEER_DIED", "PeerDiedError", None),
    ("SYMM_ERR_TIMEOUT", "SymmTimeoutError", TimeoutError),
    ("SYMM_ERR_CUDA", "CudaError", None),
    ("SYMM_ERR_NO_DEVICE", "NoDeviceError", None),
    ("SYMM_ERR_NO_PEER_ACCESS", "NoPeerAccessError", None),
    ("SYMM_ERR_UNSUPPORTED", "UnsupportedError", None),
    ("SYMM_ERR_ENV", "EnvironmentVariableError", None),
    ("SYMM_ERR_INTERNAL", "InternalError", None),
]
# (status, C name, exception class name, base class)
STATUSES = [(_consts.ENUMS["symm_status"][c], c, py, base) for c, py, base in _CLASSES]


class SymmError(RuntimeError):
    """A symm C call failed.

    Attributes: status (the negative C code), code (its C name, e.g.
    "SYMM_ERR_MISMATCH"), call (the C function), detail (symm_last_error()).
    """

    status = None
    code = None

    def __init__(self, call, status, detail, strerror=None):
        self.call = call
        self.status = status
        self.detail = detail
        name = strerror or self.code or "status %d" % status
        msg = "%s failed: %s" % (call, name)
        if detail:
            msg += ": " + detail
        super().__init__(msg)


_BY_STATUS = {}
__all__ = ["SymmError"]
for _status, _cname, _pyname, _extra in STATUSES:
    _bases = (SymmError, _extra) if _extra is not None else (SymmError,)
    _cls = type(_pyname, _bases, {"status": _status, "code": _cname,
                                  "__doc__": "C status %s (%d)." % (_cname, _status),
                                  "__init__": SymmError.__init__,
                                  "__str__": RuntimeError.__str__,
                                  "__module__": "symm"})
    globals()[_pyname] = _cls
    _BY_STATUS[_status] = _cls
    __all__.append(_pyname)


def error_class(status):
    """The exception class for a C status (SymmError for unknown codes)."""
    return _BY_STATUS.get(status, SymmError)


def raise_for(call, status, lib=None):
    """Raise the exception for a non-zero `status` returned by C `call`."""
    if status == 0:
        return
    detail, name = "", None
    if lib is not None:
        raw = lib.symm_last_error()
        detail = raw.decode("utf-8", "replace") if raw else ""
        sname = lib.symm_strerror(status)
        name = sname.decode("utf-8", "replace") if sname else None
    raise error_class(status)(call, status, detail, name)
