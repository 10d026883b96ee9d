/* The decode graphs' context buckets (decode_bucket.h). */
#include "llm/decode_bucket.h"

int llm_decode_buckets(int nsplit, int out[LLM_DECODE_BUCKETS])
{
    int n = 0;
    for (int s = 1; s < nsplit && n < LLM_DECODE_BUCKETS; s = s == 1 ? 4 : 2 * s) out[n++] = s;
    return n;
}

int llm_decode_bucket_exact(int64_t len, int splits)
{
    /* beyond AD_SINGLE, ad_split's chunk is roundup(ceil(len / splits), AD_T): one tile, the
     * same for every larger count, exactly while len <= AD_T · splits */
    return len <= LLM_AD_SINGLE || len <= (int64_t)LLM_AD_TILE * splits;
}

int llm_decode_bucket_of(int64_t len, const int *splits, int count)
{
    int i = 0;
    while (i < count && !llm_decode_bucket_exact(len, splits[i])) i++;
    return i;
}
