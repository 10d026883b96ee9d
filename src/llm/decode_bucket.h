/* Decode graphs per context bucket (session.cu, forward.cu). The fused decode attention launched
 * with s splits instead of the session's nsplit_fused (> s) gives the same bits while the context
 * is short enough (llm_ad_split, decode_split.h): up to LLM_AD_SINGLE positions every split count
 * runs the one-split path, and up to LLM_AD_TILE · s positions s splits or more all cut the
 * context into the same 64-row chunks, merged in index order. So a session keeps one decode graph
 * per bucket (s splits: a grid of max(s, G) blocks a KV head, not nsplit_fused mostly idle ones)
 * and replays the smallest bucket exact at each step. The cluster kernel (session.cu,
 * QMM_DECODE_ATTN=cluster) cuts and merges the same way wherever every split holds one tile
 * (llm_ad_split_even), so its buckets (clusters of s / 2) are exact where the fused kernel's are.
 * The rule is host code, so that the CPU tests check it against the kernels' cuts. */
#ifndef QMM_LLM_DECODE_BUCKET_H
#define QMM_LLM_DECODE_BUCKET_H

#include <stdint.h>

#include "qmm.h"
#include "llm/decode_split.h"

#ifdef __cplusplus
extern "C" {
#endif

/* at most 1, 4, 8, 16, 32 splits (decode_bucket.c); the kernel's splits are at most 64 */
#define LLM_DECODE_BUCKETS 5

/* The buckets' split counts below nsplit, ascending, into out; returns how many. */
int llm_decode_buckets(int nsplit, int out[LLM_DECODE_BUCKETS]);
/* 1 when the attention at len cached positions (the new one included) gives the same bits
 * launched with `splits` splits as with any larger count. */
int llm_decode_bucket_exact(int64_t len, int splits);
/* The first of splits[count] (ascending) exact at len; count when none is (the full graph). */
int llm_decode_bucket_of(int64_t len, const int *splits, int count);
/* The same for the decode step of the row at position pos: its attention sees pos + 1
 * positions, the new row's K/V appended. */
int llm_decode_bucket_of_step(int64_t pos, const int *splits, int count);
/* The cluster-merged attention's splits for a session whose fused kernel would launch `fused`
 * splits, on a device that holds up to `most` (attention_decode_cluster_splits) and heads of
 * `group` query heads a KV head: `fused` rounded up to 4, 8, 16 or 32 (and to `group`, whose
 * query heads the one-split path takes one a split), at most `most`; 0 where the session keeps
 * the fused kernel (one split, no cluster fits, or too few splits for `group`). */
int llm_decode_cluster_splits(int fused, int most, int group);
/* For the tests: the bucket graphs session s holds beside its full decode graph (session.cu): 0
 * without graphs, with the persistent step or the reference attention, or without CUDA. */
int llm_cuda_decode_buckets(const qmm_llm_cuda_session *s);
/* For the tests: the splits of session s's cluster-merged decode attention (session.cu,
 * QMM_DECODE_ATTN=cluster), 0 where its steps run the fused kernel only. */
int llm_cuda_decode_cluster_splits(const qmm_llm_cuda_session *s);

#ifdef __cplusplus
}
#endif

#endif
