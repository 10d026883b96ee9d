/* Element types: bf16 and f16 <-> f32 conversions (round to nearest even), sizes and names. */
#include <string.h>

#include "internal.h"

/* ---- bf16: the top half of an f32 ---- */

float qmm_bf16_to_f32(qmm_bf16 x) { return qmm_f32_from_bits((uint32_t)x << 16); }

qmm_bf16 qmm_f32_to_bf16(float x)
{
    uint32_t u = qmm_f32_bits(x);
    /* NaN: keep sign and top payload bits, force the quiet bit so it cannot turn into Inf. */
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (qmm_bf16)((u >> 16) | 0x0040u);
    /* Round to nearest even on the 16 dropped bits; a carry into the exponent is the right
     * answer (it also turns the largest finites into Inf, as IEEE overflow does). */
    uint32_t lsb = (u >> 16) & 1u;
    return (qmm_bf16)((u + 0x7FFFu + lsb) >> 16);
}

/* ---- f16: IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits, bias 15) ---- */

float qmm_f16_to_f32(qmm_f16 x)
{
    uint32_t sign = (uint32_t)(x & 0x8000u) << 16;
    uint32_t exp = (x >> 10) & 0x1Fu;
    uint32_t man = x & 0x3FFu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 is exact in f32 */
        float v = (float)man * 0x1p-24f;
        return qmm_f32_from_bits(qmm_f32_bits(v) | sign);
    }
    if (exp == 31) /* Inf, or NaN kept quiet with its payload */
        return qmm_f32_from_bits(sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0));
    return qmm_f32_from_bits(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

/* q + 1 if the dropped part rem (of `bits` bits) is above half, or exactly half and q is odd. */
static uint32_t round_even(uint32_t q, uint32_t rem, int bits)
{
    uint32_t half = 1u << (bits - 1);
    return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

qmm_f16 qmm_f32_to_f16(float x)
{
    uint32_t u = qmm_f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) /* NaN: quiet, top payload bits kept */
        return (qmm_f16)(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
    if (abs == 0x7F800000u) return (qmm_f16)(sign | 0x7C00u);

    int e = (int)(abs >> 23) - 127 + 15; /* biased f16 exponent */
    uint32_t man = abs & 0x7FFFFFu;
    if (e >= 31) return (qmm_f16)(sign | 0x7C00u); /* too large: overflow to Inf */
    if (e <= 0) {
        /* subnormal (or zero): the f16 mantissa is the full significand shifted right */
        int shift = 14 - e;
        if (shift > 24) return (qmm_f16)sign; /* below half the smallest subnormal */
        uint32_t sig = man | 0x800000u;
        uint32_t q = round_even(sig >> shift, sig & ((1u << shift) - 1), shift);
        return (qmm_f16)(sign | q); /* q = 0x400 is the smallest normal: still right */
    }
    /* a carry out of the mantissa bumps the exponent; from exponent 30 it gives 0x7C00 = Inf */
    uint32_t q = round_even(((uint32_t)e << 10) | (man >> 13), man & 0x1FFFu, 13);
    return (qmm_f16)(sign | q);
}

/* ---- names ---- */

size_t qmm_dtype_size(qmm_dtype t)
{
    switch (t) {
    case QMM_BF16: return 2;
    case QMM_F16: return 2;
    case QMM_F32: return 4;
    }
    return 0;
}

const char *qmm_dtype_name(qmm_dtype t)
{
    switch (t) {
    case QMM_BF16: return "bf16";
    case QMM_F16: return "f16";
    case QMM_F32: return "f32";
    }
    return "unknown-dtype";
}

const char *qmm_path_name(qmm_path p)
{
    switch (p) {
    case QMM_PATH_AUTO: return "auto";
    case QMM_PATH_MATVEC: return "matvec";
    case QMM_PATH_TILED: return "tiled";
    case QMM_PATH_SPLITK: return "splitk";
    case QMM_PATH_STREAMK: return "streamk";
    case QMM_PATH_DENSE: return "dense";
    case QMM_PATH_WGMMA: return "wgmma";
    }
    return "unknown-path";
}
