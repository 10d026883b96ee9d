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

#endif
