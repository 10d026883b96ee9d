"""The NumPy API: argument checks, then one call into libqmm per operation."""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib

GROUPS = (32, 64, 128)


class QmmError(RuntimeError):
    """A libqmm call failed: .status is the short status name ("shape"), the message is
    qmm_last_error()."""

    def __init__(self, func, status):
        self.status = lib.qmm_status_name(status).decode()
        self.detail = lib.qmm_last_error().decode()
        super().__init__(f"{func}: {self.status}: {self.detail}")


def _call(name, *args):
    st = getattr(lib, name)(*args)
    if st != 0:
        raise QmmError(name, st)


def version():
    """The library's version string (qmm_version())."""
    return lib.qmm_version().decode()


def f32_to_bf16(x):
    """float32 array -> bf16 bits (uint16), round to nearest even; NaN stays a quiet NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> 16).astype(np.uint16) | np.uint16(0x0040))
    return r


def bf16_to_f32(b):
    """bf16 bits (uint16 array) -> float32, exact."""
    b = np.ascontiguousarray(b, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def _ptr(arr, ctype):
    return arr.ctypes.data_as(ctypes.POINTER(ctype))


def _check_2d(name, x, dtypes):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, not {type(x).__name__}")
    if x.dtype not in dtypes:
        want = " or ".join(str(np.dtype(d)) for d in dtypes)
        raise TypeError(f"{name} has dtype {x.dtype}; expected {want} (cast it first)")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (np.ascontiguousarray)")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{name} has an empty dimension: shape {x.shape}")


class QuantizedWeight:
    """One 4-bit weight W[N, K] in the MLX layout: packed uint32 [N, K/8], scales and biases as
    bf16 bits (uint16) [N, K/group]. Construct from existing arrays (e.g. an MLX checkpoint's
    .weight/.scales/.biases viewed as uint32/uint16) or with qmm.quantize."""

    def __init__(self, packed, scales, biases, group_size=128):
        if group_size not in GROUPS:
            raise ValueError(f"group_size = {group_size}; expected one of {GROUPS}")
        _check_2d("packed", packed, (np.uint32,))
        _check_2d("scales", scales, (np.uint16,))
        _check_2d("biases", biases, (np.uint16,))
        n, k = packed.shape[0], packed.shape[1] * 8
        if k % group_size:
            raise ValueError(f"K = {k} (packed has {k // 8} words a row) is not a multiple of "
                             f"group_size = {group_size}")
        want = (n, k // group_size)
        if scales.shape != want or biases.shape != want:
            raise ValueError(f"scales {scales.shape} and biases {biases.shape} must be {want} for "
                             f"W[{n}, {k}] in groups of {group_size}")
        self.packed, self.scales, self.biases = packed, scales, biases
        self.group_size = group_size
        self.shape = (n, k)
        _call("qmm_w4_validate", ctypes.byref(self._desc()))

    def _desc(self):
        n, k = self.shape
        return _lib.W4(n, k, _ptr(self.packed, ctypes.c_uint32), _ptr(self.scales, ctypes.c_uint16),
                       _ptr(self.biases, ctypes.c_uint16), self.packed.size, self.scales.size,
                       self.biases.size, self.group_size)

    def __repr__(self):
        return f"QuantizedWeight(shape={self.shape}, group_size={self.group_size})"


def quantize(w, group_size=128, return_error=False):
    """float32 or float16 W[N, K] -> QuantizedWeight (round-to-nearest affine per group, as
    mx.quantize). return_error=True also returns (max_abs, rms, rel_frob) of the quantization."""
    _check_2d("w", w, (np.float32, np.float16))
    if group_size not in GROUPS:
        raise ValueError(f"group_size = {group_size}; expected one of {GROUPS}")
    n, k = w.shape
    if k % group_size:
        raise ValueError(f"K = {k} is not a multiple of group_size = {group_size}")
    # poisoned, so that a word the C code failed to write cannot pass for a code
    packed = np.full((n, k // 8), 0xFFFFFFFF, dtype=np.uint32)
    scales = np.full((n, k // group_size), 0x7FC1, dtype=np.uint16)
    biases = np.full((n, k // group_size), 0x7FC1, dtype=np.uint16)
    q = QuantizedWeight.__new__(QuantizedWeight)
    q.packed, q.scales, q.biases, q.group_size, q.shape = packed, scales, biases, group_size, (n, k)
    err = _lib.QuantError()
    dtype = _lib.F32 if w.dtype == np.float32 else _lib.F16
    _call("qmm_quantize", w.ctypes.data_as(ctypes.c_void_p), dtype, ctypes.byref(q._desc()),
          ctypes.byref(err))
    if return_error:
        return q, (err.max_abs, err.rms, err.rel_frob)
    return q


def dequantize(w):
    """QuantizedWeight -> float32 W[N, K]: fmaf(scale, q, bias) per element (qmm_dequantize)."""
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"w must be a qmm.QuantizedWeight, not {type(w).__name__}")
    out = np.full(w.shape, np.nan, dtype=np.float32)  # poisoned: an unwritten element shows
    _call("qmm_dequantize", ctypes.byref(w._desc()), out.ctypes.data_as(ctypes.c_void_p),
          _lib.F32, out.size)
    return out


def matmul(a, w, threads=0, reference=False):
    """C[M, N] = A[M, K] · W[N, K]ᵀ on the CPU. a: float32 (rounded to bf16 first: W4A16) or bf16
    bits as uint16. Returns float32 holding the bf16 results (fp32 accumulation). threads <= 0: one
    per CPU; reference=True runs qmm_matmul_ref (the definition: scalar, one thread)."""
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"w must be a qmm.QuantizedWeight, not {type(w).__name__}")
    _check_2d("a", a, (np.float32, np.uint16))
    n, k = w.shape
    if a.shape[1] != k:
        raise ValueError(f"a has K = {a.shape[1]} columns; the weight has K = {k}")
    a16 = a if a.dtype == np.uint16 else f32_to_bf16(a)
    m = a.shape[0]
    c = np.full((m, n), 0x7FC1, dtype=np.uint16)  # poisoned (a bf16 NaN)
    desc = w._desc()
    if reference:
        _call("qmm_matmul_ref", a16.ctypes.data_as(ctypes.c_void_p), m, ctypes.byref(desc),
              c.ctypes.data_as(ctypes.c_void_p))
    else:
        _call("qmm_matmul_cpu", a16.ctypes.data_as(ctypes.c_void_p), m, ctypes.byref(desc),
              c.ctypes.data_as(ctypes.c_void_p), int(threads))
    return bf16_to_f32(c)
