/* The device weight layout (src/w4_layout.h): the kernels' extraction, emulated here, must give
 * back every code of the MLX layout, and scales/biases must land in sb[group][row], at groups of
 * 128, 64 and 32 (the codes' layout is the same at every group size; a block's chunk c reads
 * group b·G + c/(8/G), G = 128/g). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "w4_layout.h"

static uint32_t code_mlx(const qmm_w4 *w, int64_t r, int64_t j)
{
    return (w->packed[r * (w->k / 8) + j / 8] >> (4 * (j % 8))) & 0xF;
}

static void extraction_matches_fragments(void)
{
    /* 1030 x 2048 (1 MB of codes) takes the threaded transform, with a ragged last tile */
    static const int64_t shapes[][2] = {{1, 128}, {31, 256}, {130, 384}, {7, 2560}, {1030, 2048}};
    for (int gs = 128; gs >= 32; gs /= 2)
    for (int s = 0; s < 5; s++) {
        qmm_w4 w;
        CHECK_OK(qmm_w4_alloc_group(shapes[s][0], shapes[s][1], gs, &w));
        test_random_w4(&w, 0.01, 0.1);
        const int G = 128 / gs; /* groups per block */
        int64_t n_pad = qmm_w4_device_rows(w.n), kw = w.k / 8, groups = w.k / 128, ng = w.k / gs;
        CHECK(n_pad % QMM_W4_ROW_PAD == 0 && n_pad >= w.n);
        /* the offsets tile the array exactly: every word of n_pad*K/8 is one (row, group, word) */
        CHECK(qmm_w4_device_offset(n_pad - 1, groups - 1, groups) + 16 == n_pad * kw);
        uint32_t *packed = malloc((size_t)(n_pad * kw) * 4), *sb = malloc((size_t)(ng * n_pad) * 4);
        memset(packed, 0xA5, (size_t)(n_pad * kw) * 4); /* poison: padding must come out zero */
        memset(sb, 0xA5, (size_t)(ng * n_pad) * 4);
        CHECK_OK(qmm_w4_to_device_layout(&w, packed, sb));
        int bad = 0;
        for (int64_t r = 0; r < n_pad; r++)
            for (int64_t g = 0; g < groups; g++) {
                for (int t = 0; t < 4; t++)
                    for (int c = 0; c < 8; c++) {
                        /* the kernels: lane t reads words 4t..4t+3, chunk c uses word c/2 */
                        uint32_t word = packed[qmm_w4_device_offset(r, g, groups) + 4 * t + c / 2];
                        int h = (c % 2) * 8;
                        uint32_t lo = (word >> h) & 0x000F000F, hi = (word >> (h + 4)) & 0x000F000F;
                        int64_t k0 = g * 128 + 16 * c + 2 * t;
                        uint32_t want[4] = {0, 0, 0, 0};
                        if (r < w.n)
                            want[0] = code_mlx(&w, r, k0), want[1] = code_mlx(&w, r, k0 + 1),
                            want[2] = code_mlx(&w, r, k0 + 8), want[3] = code_mlx(&w, r, k0 + 9);
                        bad += (lo & 0xF) != want[0] || (lo >> 16) != want[1] ||
                               (hi & 0xF) != want[2] || (hi >> 16) != want[3];
                        /* the kernels' group of chunk c holds all four columns */
                        int64_t kg = g * G + c / (8 / G);
                        bad += k0 / gs != kg || (k0 + 9) / gs != kg;
                    }
                for (int j = 0; j < G; j++) {
                    int64_t gi = g * G + j;
                    uint32_t v = sb[gi * n_pad + r];
                    uint32_t sw = r < w.n ? w.scales[r * ng + gi] : 0, bw = r < w.n ? w.biases[r * ng + gi] : 0;
                    bad += (v & 0xFFFF) != sw || (v >> 16) != bw;
                }
            }
        CHECKF(bad == 0, "g%d N=%lld K=%lld: %d mismatches", gs, (long long)w.n, (long long)w.k, bad);
        printf("    g%-3d N=%lld K=%lld n_pad=%lld ok\n", gs, (long long)w.n, (long long)w.k, (long long)n_pad);
        free(packed), free(sb);
        qmm_w4_free(&w);
    }
}

static void positions_are_a_permutation(void)
{
    int seen[16 * 32] = {0};
    for (int k = 0; k < 128; k++) {
        int word, bit;
        qmm_w4_device_position(k, &word, &bit);
        CHECK(word >= 0 && word < 16 && bit >= 0 && bit <= 28 && bit % 4 == 0);
        seen[word * 32 + bit]++;
    }
    for (int i = 0; i < 16 * 32; i++) CHECK(seen[i] <= 1);
}

static void rejects_bad_input(void)
{
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(4, 128, &w));
    uint32_t buf[1024];
    CHECK_STATUS(qmm_w4_to_device_layout(&w, NULL, buf), QMM_ERR_NULL);
    w.k = 100;
    CHECK_STATUS(qmm_w4_to_device_layout(&w, buf, buf), QMM_ERR_SHAPE);
    w.k = 128;
    qmm_w4_free(&w);
    /* groups of 64 with K = 192: valid on the CPU, not a whole number of 128-column blocks */
    CHECK_OK(qmm_w4_alloc_group(4, 192, 64, &w));
    CHECK_STATUS(qmm_w4_to_device_layout(&w, buf, buf), QMM_ERR_SHAPE);
    CHECK(strstr(qmm_last_error(), "multiple of 128") != NULL);
    size_t pb, sbb;
    CHECK_STATUS(qmm_w4_device_image_bytes_group(4, 192, 64, &pb, &sbb), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_w4_device_image_bytes_group(4, 256, 48, &pb, &sbb), QMM_ERR_ARG);
    qmm_w4_free(&w);
}

static void device_image(void)
{
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(40, 256, &w));
    test_random_w4(&w, 0.01, 0.1);
    size_t pb = 0, sbb = 0;
    CHECK_OK(qmm_w4_device_image_bytes(40, 256, &pb, &sbb));
    CHECK(pb == 128 * 32 * 4 && sbb == 128 * 2 * 4);
    uint32_t *p1 = malloc(pb), *s1 = malloc(sbb), *p2 = malloc(pb), *s2 = malloc(sbb);
    CHECK_OK(qmm_w4_device_image(&w, p1, pb, s1, sbb));
    CHECK_OK(qmm_w4_to_device_layout(&w, p2, s2));
    CHECK(memcmp(p1, p2, pb) == 0 && memcmp(s1, s2, sbb) == 0);
    memset(p2, 0x5A, pb);
    CHECK_STATUS(qmm_w4_device_image(&w, p2, pb - 4, s2, sbb), QMM_ERR_SIZE_MISMATCH);
    CHECK(((unsigned char *)p2)[0] == 0x5A);
    CHECK_STATUS(qmm_w4_device_image(&w, NULL, pb, s2, sbb), QMM_ERR_NULL);
    CHECK_STATUS(qmm_w4_device_image_bytes(40, 100, &pb, &sbb), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_w4_device_image_bytes(40, 256, NULL, &sbb), QMM_ERR_NULL);
    free(p1), free(s1), free(p2), free(s2);
    qmm_w4_free(&w);
    /* groups of 32: the same codes, four times the scale|bias rows */
    CHECK_OK(qmm_w4_alloc_group(40, 256, 32, &w));
    test_random_w4(&w, 0.01, 0.1);
    CHECK_OK(qmm_w4_device_image_bytes_group(40, 256, 32, &pb, &sbb));
    CHECK(pb == 128 * 32 * 4 && sbb == 128 * 8 * 4);
    p1 = malloc(pb), s1 = malloc(sbb), p2 = malloc(pb), s2 = malloc(sbb);
    CHECK_OK(qmm_w4_device_image(&w, p1, pb, s1, sbb));
    CHECK_OK(qmm_w4_to_device_layout(&w, p2, s2));
    CHECK(memcmp(p1, p2, pb) == 0 && memcmp(s1, s2, sbb) == 0);
    CHECK_STATUS(qmm_w4_device_image(&w, p2, pb, s2, sbb - 4), QMM_ERR_SIZE_MISMATCH);
    free(p1), free(s1), free(p2), free(s2);
    qmm_w4_free(&w);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, positions_are_a_permutation, extraction_matches_fragments, rejects_bad_input,
               device_image);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
