"""The device functions and enum constants symm.cute exports.

FUNCTIONS comes from symm._device_api (generated from the device headers by
python/tools/gen_cute_api.py and gen_triton_api.py); CONSTANTS from
symm._consts (generated from the C headers by python/tools/gen_consts.py).
"""
from .. import _consts
from .._device_api import FUNCTIONS  # noqa: F401  (name, C return type, ((param, C type), ...), scope)

# The enums symm.cute exports, with the prefix its names drop (SYMM_COLL_ALGO_X
# is ALGO_X), in the headers' order.
_ENUMS = (("symm_cmp", "SYMM_CMP_", "CMP_"), ("symm_signal_op", "SYMM_SIGNAL_", "SIGNAL_"),
          ("symm_scope", "SYMM_SCOPE_", "SCOPE_"), ("symm_sem", "SYMM_SEM_", "SEM_"),
          ("symm_dtype", "SYMM_DTYPE_", "DTYPE_"), ("symm_redop", "SYMM_OP_", "OP_"),
          ("symm_coll_algo", "SYMM_COLL_ALGO_", "ALGO_"))

# (name, value, C name): CMP_GE, SIGNAL_ADD, DTYPE_DEFAULT, ALGO_PUSH, ...
CONSTANTS = tuple((short + cname[len(prefix):], value, cname)
                  for enum, prefix, short in _ENUMS
                  for cname, value in _consts.ENUMS[enum].items()
                  if not cname.endswith("_COUNT"))
