/*
 * The exact data of the wgmma probes (wgmma_issue.cu, ring_probe.cu), host side: 128 weight rows
 * (two warpgroups of 64) of one 128-wide k-block, codes 0…15, scales 0.5 / 1 / 2, biases
 * -8 / -4 / 0 / 2 (every dequantized weight in [-8, 32], exact in bf16), and up to 256 tokens of
 * activations, multiples of 0.5 in [-2, 2]; a dot product over the k-block is a multiple of 0.25
 * below 2^13 in magnitude, so a few k-blocks' sums are exact in fp32 and a wrong layout cannot
 * hide in rounding.
 */
#ifndef QMM_BENCH_PROBE_W4_PROBE_DATA_H
#define QMM_BENCH_PROBE_W4_PROBE_DATA_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

/* The probes' start: `NAME [ITER [REPS]]` (defaults 200 and 5) on device 0, which must be an
 * sm_90 GPU; prints the '#' device line. Returns 0 to go on, else the exit status (2 for bad
 * arguments, 1 for a CUDA error or another GPU). */
inline int probe_sm90_start(const char *name, int argc, char **argv, int *iters, int *reps, int *sms)
{
    *iters = argc > 1 ? atoi(argv[1]) : 200, *reps = argc > 2 ? atoi(argv[2]) : 5;
    if (*iters < 1 || *reps < 1) {
        fprintf(stderr, "usage: %s [ITER [REPS]]\n", name);
        return 2;
    }
    int dev = 0;
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", name, cudaGetErrorString(e));
        return 1;
    }
    printf("# device %s, %d SMs, sm_%d%d; ITER %d, REPS %d\n", prop.name, *sms, prop.major, prop.minor, *iters, *reps);
    if (prop.major != 9) {
        fprintf(stderr, "%s: needs an sm_90 GPU\n", name);
        return 1;
    }
    return 0;
}

inline double probe_median(std::vector<double> v)
{
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

inline uint16_t probe_bf16_bits(float x) /* x exactly representable in bf16 */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

struct ProbeData {
    static constexpr int ROWS = 128, K = 128, NMAX = 256;
    std::vector<float> wa, act; /* dequantized weights [ROWS][K], activations [NMAX][K] */
    /* the kernel's stage layout of the codes: warp tile r / 16 at word 256·(r / 16), row r % 16
     * at 16·(r % 16), thread t4's four words at 4·t4; word jj's byte kp, nibble h holds
     * k = 16·(2·jj + kp) + 2·t4 + 8·h, the bits 16 higher k + 1 (dequant_pair's pairs) */
    std::vector<uint32_t> packed;
    std::vector<uint32_t> sbw; /* a scale|bias bf16 pair a row */

    ProbeData() : wa(ROWS * K), act(NMAX * K), packed(ROWS * 16, 0u), sbw(ROWS)
    {
        std::vector<int> code(ROWS * K);
        std::vector<float> scale(ROWS), bias(ROWS);
        uint32_t seed = 12345u;
        auto rnd = [&]() { return seed = seed * 1664525u + 1013904223u, (int)(seed >> 8); };
        const float scales[3] = {0.5f, 1.f, 2.f}, biases[4] = {-8.f, -4.f, 0.f, 2.f};
        for (int r = 0; r < ROWS; r++) scale[r] = scales[rnd() % 3], bias[r] = biases[rnd() % 4];
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < K; k++)
                code[r * K + k] = rnd() % 16, wa[r * K + k] = code[r * K + k] * scale[r] + bias[r];
        for (auto &x : act) x = 0.5f * (float)(rnd() % 9 - 4);
        for (int r = 0; r < ROWS; r++) {
            for (int t4 = 0; t4 < 4; t4++)
                for (int jj = 0; jj < 4; jj++) {
                    uint32_t w = 0;
                    for (int kp = 0; kp < 2; kp++)
                        for (int h = 0; h < 2; h++) {
                            const int k = 16 * (2 * jj + kp) + 2 * t4 + 8 * h, sh = 8 * kp + 4 * h;
                            w |= (uint32_t)code[r * K + k] << sh;
                            w |= (uint32_t)code[r * K + k + 1] << (sh + 16);
                        }
                    packed[(r / 16) * 256 + 16 * (r % 16) + 4 * t4 + jj] = w;
                }
            sbw[r] = probe_bf16_bits(scale[r]) | (uint32_t)probe_bf16_bits(bias[r]) << 16;
        }
    }

    /* wgmma's B operand for n_tok tokens as TMA's 128-byte swizzle writes it (n_tok · 256
     * bytes): element (n, k) at box k / 64 of n_tok · 128 bytes, row n, 16-byte chunk
     * (k % 64) / 8 ^ (n % 8), 2 · (k % 8) into the chunk */
    std::vector<uint16_t> b_image(int n_tok) const
    {
        std::vector<uint16_t> img((size_t)n_tok * K);
        for (int n = 0; n < n_tok; n++)
            for (int k = 0; k < K; k++) {
                const size_t byte = (size_t)(k / 64) * n_tok * 128 + n * 128 + ((((k % 64) / 8) ^ (n % 8)) * 16) +
                                    (k % 8) * 2;
                img[byte / 2] = probe_bf16_bits(act[n * K + k]);
            }
        return img;
    }

    /* One k-block's exact product of weight row `row` and token `tok`. */
    double dot(int row, int tok) const
    {
        double ref = 0;
        for (int k = 0; k < K; k++) ref += (double)wa[row * K + k] * act[tok * K + k];
        return ref;
    }

    /* Accumulator i of consumer thread t (warpgroup t / 128) in wgmma's m64nN f32 layout:
     * token 8·(i / 4) + 2·t4 + i % 2, weight row 64·wg + 16·warp + g (+ 8 for i % 4 ≥ 2). */
    static void acc_place(int t, int i, int *row, int *tok)
    {
        const int wg = t / 128, warp = (t % 128) / 32, lane = t % 32, g = lane / 4, t4 = lane % 4, e = i % 4;
        *row = 64 * wg + 16 * warp + g + (e >= 2 ? 8 : 0);
        *tok = 8 * (i / 4) + 2 * t4 + (e & 1);
    }
};

#endif
