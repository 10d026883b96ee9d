"""qmm: W4A16 quantized matmul in the MLX 4-bit layout, from NumPy (CPU path of libqmm).

    import numpy as np, qmm
    w = qmm.quantize(np.random.randn(4096, 2560).astype(np.float32), group_size=128)
    c = qmm.matmul(a, w)          # a: float32 [M, K] (rounded to bf16), c: float32 [M, N]

Weights: packed uint32 [N, K/8] (8 codes a word, LSB first), scales and biases bf16 bits as
uint16 [N, K/group]; w[n][j] = scale * q + bias: byte-compatible with mx.quantize(bits=4).
Every argument is checked here before any call into C; C-side failures raise QmmError carrying
qmm_last_error().
"""
from ._api import (QmmError, QuantizedWeight, bf16_to_f32, dequantize, f32_to_bf16, matmul,
                   quantize, version)

__all__ = ["QmmError", "QuantizedWeight", "bf16_to_f32", "dequantize", "f32_to_bf16", "matmul",
           "quantize", "version"]
__version__ = "0.4.0"
