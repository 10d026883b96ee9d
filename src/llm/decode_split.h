/* The fused decode attention's split rule (attention_decode_block.cuh), in C: the kernel, the
 * host's decode graphs per context bucket (decode_bucket.c) and their test use this one
 * definition. */
#ifndef QMM_LLM_DECODE_SPLIT_H
#define QMM_LLM_DECODE_SPLIT_H

#include <stdint.h>

#define LLM_AD_TILE 64                  /* positions a K/V tile (the kernel's AD_T) */
#define LLM_AD_SINGLE (2 * LLM_AD_TILE) /* up to here one split (AD_SINGLE) */

#ifdef __CUDACC__
#define LLM_SPLIT_FN static inline __host__ __device__
#else
#define LLM_SPLIT_FN static inline
#endif

/* Rows per split and splits with work at len cached positions, launched with nsplit splits: up
 * to LLM_AD_SINGLE one split; beyond, ceil(len / nsplit) rounded up to whole tiles. */
LLM_SPLIT_FN void llm_ad_split(int64_t len, int nsplit, int64_t *chunk, int *active)
{
    if (len <= LLM_AD_SINGLE || nsplit <= 1) {
        *chunk = len;
        *active = 1;
        return;
    }
    int64_t c = (len + nsplit - 1) / nsplit;
    c = (c + LLM_AD_TILE - 1) / LLM_AD_TILE * LLM_AD_TILE;
    *chunk = c;
    *active = (int)((len + c - 1) / c);
}

/* The cluster kernel's cut (attention_decode_cluster.cu), row range [*start, *end) of split
 * `split` of nsplit and the splits with work: up to LLM_AD_SINGLE positions one split; beyond,
 * the T = ceil(len / LLM_AD_TILE) tiles dealt in order to min(T, nsplit) splits, the first
 * T % nsplit of them one tile more than the rest (llm_ad_split rounds the chunk up to whole
 * tiles, which can leave a third of the splits idle: 2 049 positions in 16 splits of 3 tiles
 * make 11). While T <= nsplit every split holds one tile, as in llm_ad_split's cut at any split
 * count >= T: the decode buckets stay exact (decode_bucket.h). Splits past *active get an
 * empty range. */
LLM_SPLIT_FN void llm_ad_split_even(int64_t len, int nsplit, int split, int64_t *start,
                                    int64_t *end, int *active)
{
    if (len <= LLM_AD_SINGLE || nsplit <= 1) {
        *active = 1;
        *start = 0;
        *end = split == 0 ? len : 0;
        return;
    }
    const int64_t tiles = (len + LLM_AD_TILE - 1) / LLM_AD_TILE;
    const int64_t n = tiles < nsplit ? tiles : nsplit, q = tiles / n, r = tiles % n;
    *active = (int)n;
    if (split >= n) {
        *start = *end = 0;
        return;
    }
    const int64_t t0 = split * q + (split < r ? split : r), t1 = t0 + q + (split < r ? 1 : 0);
    *start = t0 * LLM_AD_TILE;
    *end = t1 * LLM_AD_TILE < len ? t1 * LLM_AD_TILE : len;
}

#endif
