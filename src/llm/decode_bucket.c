/* The decode graphs' context buckets (decode_bucket.h). */
#include "llm/decode_bucket.h"

/* The buckets' split counts, a speed choice, never a result's: each graph is bit for bit the
 * full one where it is replayed. 2 is left out: exact only up to LLM_AD_SINGLE positions, as 1
 * is, with more blocks. Above 1, doubling keeps the graphs few (a capture each at session
 * creation) while a context is never more than twice a bucket's reach. */
static const int bucket_splits[LLM_DECODE_BUCKETS] = {1, 4, 8, 16, 32};

int llm_decode_buckets(int nsplit, int out[LLM_DECODE_BUCKETS])
{
    int n = 0;
    while (n < LLM_DECODE_BUCKETS && bucket_splits[n] < nsplit) {
        out[n] = bucket_splits[n];
        n++;
    }
    return n;
}

int llm_decode_cluster_splits(int fused, int most, int group)
{
    if (fused <= 1 || most < 4) return 0;
    int n = 4;
    while (n < fused && 2 * n <= most && n < 32) n *= 2;
    if (n < group && 2 * n <= most) n *= 2; /* group 8: clusters of 4 */
    return n >= group ? n : 0;
}

int llm_decode_bucket_exact(int64_t len, int splits)
{
    /* beyond LLM_AD_SINGLE, llm_ad_split's chunk is roundup(ceil(len / splits), LLM_AD_TILE):
     * one tile, the same for every larger count, exactly while len <= LLM_AD_TILE · splits */
    return len <= LLM_AD_SINGLE || len <= (int64_t)LLM_AD_TILE * splits;
}

int llm_decode_bucket_of(int64_t len, const int *splits, int count)
{
    int i = 0;
    while (i < count && !llm_decode_bucket_exact(len, splits[i])) i++;
    return i;
}

int llm_decode_bucket_of_step(int64_t pos, const int *splits, int count)
{
    return llm_decode_bucket_of(pos + 1, splits, count);
}
