"""The NumPy path of the qmm package against NumPy references: dequantize bit-exact against the
layout's formula evaluated here, quantize within half a step, matmul against fp64 on the
dequantized weight, and every argument check (raised before any C call) and C-side error."""
import numpy as np
import pytest

import qmm

# (M, N, K, group): decode and prefill rows, every group size, odd N
CASES = [(1, 64, 256, 128), (3, 40, 128, 32), (8, 33, 192, 64), (17, 128, 512, 128),
         (64, 96, 384, 32)]


def rng(seed):
    return np.random.default_rng(seed)


def unpack(q):
    """codes [N, K] from packed words: column j at bits 4*(j%8), LSB first."""
    shifts = (np.arange(8, dtype=np.uint32) * 4)
    codes = (q.packed[:, :, None] >> shifts) & 0xF
    return codes.reshape(q.shape[0], q.shape[1]).astype(np.int64)


def dequant_ref(q):
    """W in fp64 from the layout, rounded once to f32 (= fmaf: s*q + b is exact in fp64)."""
    g = q.group_size
    s = np.repeat(qmm.bf16_to_f32(q.scales).astype(np.float64), g, axis=1)
    b = np.repeat(qmm.bf16_to_f32(q.biases).astype(np.float64), g, axis=1)
    return (s * unpack(q) + b).astype(np.float32)


@pytest.mark.parametrize("m,n,k,g", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_quantize_dequantize(m, n, k, g, dtype):
    w = (rng(m * n + k) .standard_normal((n, k)) * 0.05).astype(dtype)
    q, (max_abs, _, rel) = qmm.quantize(w, g, return_error=True)
    assert q.packed.shape == (n, k // 8) and q.scales.shape == (n, k // g)
    deq = qmm.dequantize(q)
    np.testing.assert_array_equal(deq, dequant_ref(q))
    # round to nearest: within half a step of the (bf16-rounded) scale, plus bf16 slack
    step = np.repeat(np.abs(qmm.bf16_to_f32(q.scales)), g, axis=1).astype(np.float64)
    err = np.abs(deq.astype(np.float64) - w.astype(np.float64))
    assert np.all(err <= 0.5 * step + 0.02 * step + 1e-6)
    assert 0 < rel < 0.2 and abs(err.max() - max_abs) < 1e-6


@pytest.mark.parametrize("m,n,k,g", CASES)
def test_matmul_vs_fp64(m, n, k, g):
    r = rng(1000 + m + n + k)
    q = qmm.quantize(r.standard_normal((n, k)).astype(np.float32), g)
    a = r.standard_normal((m, k)).astype(np.float32)
    a_bf = qmm.bf16_to_f32(qmm.f32_to_bf16(a)).astype(np.float64)
    want = a_bf @ dequant_ref(q).astype(np.float64).T
    # fp32 accumulation of K terms, then one bf16 rounding (2^-8 relative)
    tol = 2.0 ** -8 * np.abs(want) + 1e-4 * np.sqrt(k) * np.abs(a_bf).max() * 4
    for threads in (0, 1, 3):
        c = qmm.matmul(a, q, threads=threads)
        assert c.shape == (m, n) and c.dtype == np.float32
        assert np.all(np.abs(c - want) <= tol), np.abs(c - want).max()
    ref = qmm.matmul(qmm.f32_to_bf16(a), q, reference=True)
    assert np.all(np.abs(ref - want) <= tol)


def test_bf16_rounding():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 3.4e38, np.inf, np.nan],
                 dtype=np.float32)
    b = qmm.f32_to_bf16(x)
    assert list(b[:6]) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80, 0x7F80]
    assert np.isnan(qmm.bf16_to_f32(b)[6])


def test_from_arrays_roundtrip():
    q = qmm.quantize(rng(7).standard_normal((16, 64)).astype(np.float32), 32)
    q2 = qmm.QuantizedWeight(q.packed.copy(), q.scales.copy(), q.biases.copy(), 32)
    np.testing.assert_array_equal(qmm.dequantize(q2), qmm.dequantize(q))


W = np.zeros((8, 128), dtype=np.float32)
BAD_QUANTIZE = [
    (W.astype(np.float64), 128, TypeError, "dtype float64"),
    (W.tolist(), 128, TypeError, "numpy.ndarray"),
    (np.zeros((8, 100), np.float32), 32, ValueError, "multiple of group_size"),
    (W, 16, ValueError, "group_size = 16"),
    (np.zeros((4, 8, 128), np.float32), 128, ValueError, "2-D"),
    (np.zeros((8, 256), np.float32)[:, ::2], 128, ValueError, "C-contiguous"),
    (np.zeros((0, 128), np.float32), 128, ValueError, "empty"),
]


@pytest.mark.parametrize("w,g,exc,msg", BAD_QUANTIZE)
def test_quantize_rejects(w, g, exc, msg):
    with pytest.raises(exc, match=msg):
        qmm.quantize(w, g)


def test_errors_from_c_carry_last_error():
    w = rng(3).standard_normal((8, 128)).astype(np.float32)
    w[2, 5] = np.inf
    with pytest.raises(qmm.QmmError, match=r"src\[2\]\[5\]") as e:
        qmm.quantize(w, 128)
    assert e.value.status == "range" and "not finite" in e.value.detail


def test_matmul_rejects():
    q = qmm.quantize(rng(4).standard_normal((8, 128)).astype(np.float32), 128)
    with pytest.raises(ValueError, match="K = 64"):
        qmm.matmul(np.zeros((2, 64), np.float32), q)
    with pytest.raises(TypeError, match="float64"):
        qmm.matmul(np.zeros((2, 128)), q)
    with pytest.raises(ValueError, match="C-contiguous"):
        qmm.matmul(np.zeros((128, 2), np.float32).T, q)
    with pytest.raises(TypeError, match="QuantizedWeight"):
        qmm.matmul(np.zeros((2, 128), np.float32), "w")
    with pytest.raises(ValueError, match="scales"):
        qmm.QuantizedWeight(q.packed, q.scales[:, :0], q.biases, 128)
