"""Loading libqmm.so and the C declarations the package uses (ctypes).

Why ctypes: nothing to compile when the package is installed (pip needs no compiler, no CUDA, no
Python headers), and the C API is small and flat: plain structs, pointers and status codes. The
library is found, in order: $QMM_LIBRARY (a path), libqmm.so beside this file, the system's
loader paths (an installed qmm: cmake --install, with LD_LIBRARY_PATH when outside ld.so.conf).
"""
import ctypes
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class W4(ctypes.Structure):
    """struct qmm_w4 (include/qmm.h): a view of one quantized weight in host memory."""
    _fields_ = [
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("packed", ctypes.POINTER(ctypes.c_uint32)),
        ("scales", ctypes.POINTER(ctypes.c_uint16)),
        ("biases", ctypes.POINTER(ctypes.c_uint16)),
        ("packed_count", ctypes.c_size_t),
        ("scales_count", ctypes.c_size_t),
        ("biases_count", ctypes.c_size_t),
        ("group", ctypes.c_int),
    ]


class QuantError(ctypes.Structure):
    """struct qmm_quant_error."""
    _fields_ = [("max_abs", ctypes.c_double), ("rms", ctypes.c_double),
                ("rel_frob", ctypes.c_double)]


# enum qmm_dtype
BF16, F16, F32 = 0, 1, 2


def _candidates():
    env = os.environ.get("QMM_LIBRARY")
    if env:
        return [env]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libqmm.so")
    return [here, "libqmm.so", "libqmm.so.0.4"]


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("qmm: cannot load libqmm.so (build it with CMake, install it, or set "
                      "QMM_LIBRARY to its path): " + "; ".join(errors))


lib = _load()


def _declare(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_W4p = ctypes.POINTER(W4)
_declare("qmm_version", ctypes.c_char_p)
_declare("qmm_last_error", ctypes.c_char_p)
_declare("qmm_status_name", ctypes.c_char_p, ctypes.c_int)
_declare("qmm_quantize", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, _W4p,
         ctypes.POINTER(QuantError))
_declare("qmm_dequantize", ctypes.c_int, _W4p, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
_declare("qmm_w4_validate", ctypes.c_int, _W4p)
_declare("qmm_matmul_cpu", ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, _W4p, ctypes.c_void_p,
         ctypes.c_int)
_declare("qmm_matmul_ref", ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, _W4p, ctypes.c_void_p)
