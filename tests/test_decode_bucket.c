/* The decode graphs' context buckets (src/llm/decode_bucket.h), against the fused decode
 * attention's own split rule (llm_ad_split, src/llm/decode_split.h, which the kernel calls):
 * wherever the rule calls a bucket exact, its chunk and active splits are those of every larger
 * split count (so the kernel's arithmetic and merge order are too), one position further they
 * are not; the buckets listed for each session split count; the bucket picked at each context
 * and for the step of each row (whose context has the row appended). */
#include "harness.h"
#include "llm/decode_bucket.h"

static int same_split(int64_t len, int a, int b)
{
    int64_t ca, cb;
    int na, nb;
    llm_ad_split(len, a, &ca, &na);
    llm_ad_split(len, b, &cb, &nb);
    return ca == cb && na == nb;
}

static void exact_means_the_same_split(void)
{
    for (int s = 1; s < 64; s++) {
        int64_t last = 0; /* the longest exact context */
        for (int64_t len = 1; len <= 64 * 64 + 300; len++) {
            if (!llm_decode_bucket_exact(len, s)) continue;
            CHECKF(len == last + 1, "%d splits: exact at %lld but not at %lld", s, (long long)len,
                   (long long)len - 1);
            last = len;
            for (int n = s + 1; n <= 64; n++)
                CHECKF(same_split(len, s, n), "%d splits exact at %lld positions, but %d split "
                       "otherwise", s, (long long)len, n);
        }
        /* the bound is tight: one more position and the session's 64 splits cut differently */
        CHECKF(last == (s * 64 > 128 ? s * 64 : 128), "%d splits: exact up to %lld", s,
               (long long)last);
        CHECKF(!same_split(last + 1, s, 64), "%d splits: %lld positions split as 64 do", s,
               (long long)last + 1);
    }
}

static void buckets_of_each_session(void)
{
    static const struct {
        int nsplit, count, splits[LLM_DECODE_BUCKETS];
    } cases[] = {
        {1, 0, {0}},          {2, 1, {1}},          {4, 1, {1}},
        {5, 2, {1, 4}},       {16, 3, {1, 4, 8}},   {17, 4, {1, 4, 8, 16}},
        {33, 5, {1, 4, 8, 16, 32}}, /* Qwen3, 8 KV heads, 40 960 positions, 132 SMs */
        {64, 5, {1, 4, 8, 16, 32}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got[LLM_DECODE_BUCKETS] = {0};
        const int n = llm_decode_buckets(cases[i].nsplit, got);
        printf("    nsplit %2d: %d buckets\n", cases[i].nsplit, n);
        CHECKF(n == cases[i].count, "nsplit %d: %d buckets", cases[i].nsplit, n);
        for (int j = 0; j < n && n == cases[i].count; j++)
            CHECKF(got[j] == cases[i].splits[j], "nsplit %d: bucket %d has %d splits",
                   cases[i].nsplit, j, got[j]);
    }
    for (int nsplit = 1; nsplit <= 64; nsplit++) {
        int got[LLM_DECODE_BUCKETS];
        const int n = llm_decode_buckets(nsplit, got);
        CHECK(n >= 0 && n <= LLM_DECODE_BUCKETS);
        for (int j = 0; j < n; j++) CHECK(got[j] < nsplit && (j == 0 || got[j] > got[j - 1]));
    }
}

static void the_smallest_exact_bucket_is_picked(void)
{
    const int splits[] = {1, 4, 8, 16, 32};
    static const struct {
        int64_t len;
        int bucket;
    } cases[] = {{1, 0},    {128, 0},  {129, 1},  {256, 1},  {257, 2},   {512, 2},
                 {513, 3},  {1024, 3}, {1025, 4}, {2048, 4}, {2049, 5},  {40960, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int b = llm_decode_bucket_of(cases[i].len, splits, 5);
        CHECKF(b == cases[i].bucket, "len %lld: bucket %d, want %d", (long long)cases[i].len, b,
               cases[i].bucket);
    }
    CHECK(llm_decode_bucket_of(129, splits, 1) == 1); /* only the 1-split bucket: the full graph */
    CHECK(llm_decode_bucket_of(1, splits, 0) == 0);   /* no buckets */
    /* a step's context is its row plus the rows before it: the row at 127 is the last of the
     * one-split bucket, the row at 128 the first of the next */
    static const struct {
        int64_t pos;
        int bucket;
    } steps[] = {{0, 0}, {127, 0}, {128, 1}, {255, 1}, {256, 2}, {2047, 4}, {2048, 5}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        const int b = llm_decode_bucket_of_step(steps[i].pos, splits, 5);
        CHECKF(b == steps[i].bucket, "the row at %lld: bucket %d, want %d",
               (long long)steps[i].pos, b, steps[i].bucket);
    }
}

/* The cluster kernel's cut (llm_ad_split_even): its splits cover [0, len) in order with whole
 * tiles (the last may end early), at most one tile apart, none empty below active, all empty
 * past it; and wherever a bucket of s splits is exact, each split's rows are those llm_ad_split
 * gives at s splits, so the fused kernel's bucket graphs and the cluster kernel agree there. */
static void the_even_cut(void)
{
    for (int n = 1; n <= 64; n++)
        for (int64_t len = 1; len <= 64 * 70; len += len < 600 ? 1 : 37) {
            int64_t next = 0, most = 0, least = INT64_MAX;
            int active = 0;
            for (int sp = 0; sp < n + 2; sp++) {
                int64_t a, b;
                int act;
                llm_ad_split_even(len, n, sp, &a, &b, &act);
                if (sp == 0) active = act;
                CHECKF(act == active, "len %lld, %d splits: active %d then %d", (long long)len, n,
                       active, act);
                if (sp >= active) {
                    CHECKF(a == b, "len %lld, %d splits: split %d past %d active has rows",
                           (long long)len, n, sp, active);
                    continue;
                }
                CHECKF(a == next && b > a && (a % LLM_AD_TILE == 0) &&
                           (b % LLM_AD_TILE == 0 || b == len),
                       "len %lld, %d splits: split %d is [%lld, %lld)", (long long)len, n, sp,
                       (long long)a, (long long)b);
                const int64_t t = (b - a + LLM_AD_TILE - 1) / LLM_AD_TILE;
                most = t > most ? t : most;
                least = t < least ? t : least;
                next = b;
            }
            CHECKF(next == len, "len %lld, %d splits: cover %lld", (long long)len, n, (long long)next);
            CHECKF(active == 1 || most - least <= 1,
                   "len %lld, %d splits: %lld to %lld tiles a split", (long long)len, n,
                   (long long)least, (long long)most);
            if (len > LLM_AD_SINGLE && n > 1) {
                const int64_t tiles = (len + LLM_AD_TILE - 1) / LLM_AD_TILE;
                CHECKF(active == (tiles < n ? tiles : n), "len %lld, %d splits: %d active",
                       (long long)len, n, active);
            }
        }
    for (int s = 1; s <= 32; s++)
        for (int n = s; n <= 64; n++)
            for (int64_t len = 1; len <= 64 * 64; len++) {
                if (!llm_decode_bucket_exact(len, s)) break;
                int64_t chunk;
                int act;
                llm_ad_split(len, s, &chunk, &act);
                for (int sp = 0; sp < act; sp++) {
                    int64_t a, b;
                    int act2;
                    llm_ad_split_even(len, n, sp, &a, &b, &act2);
                    const int64_t a1 = sp * chunk, b1 = a1 + chunk < len ? a1 + chunk : len;
                    CHECKF(act2 == act && a == a1 && b == b1,
                           "len %lld: split %d of the even cut at %d splits [%lld, %lld) of %d, "
                           "of the bucket's %d [%lld, %lld) of %d", (long long)len, sp, n,
                           (long long)a, (long long)b, act2, s, (long long)a1, (long long)b1, act);
                    if (test_failed_now()) return;
                }
            }
}

/* The cluster kernel's split count for a session: the fused count rounded up to a bucket's
 * (4, 8, 16, 32), capped by the device, none for one split, no clusters, or too few halves for
 * the one-split path's query heads. */
static void cluster_split_counts(void)
{
    static const int cases[][4] = {/* fused, most, group, want */
                                   {1, 32, 4, 0},   {2, 32, 4, 4},   {4, 32, 4, 4},  {5, 32, 4, 8},
                                   {16, 32, 4, 16}, {17, 32, 4, 32}, {33, 32, 4, 32}, {33, 16, 4, 16},
                                   {64, 16, 1, 16}, {3, 4, 8, 0},    {9, 16, 8, 16}, {9, 0, 4, 0},
                                   {9, 2, 1, 0},    {20, 24, 4, 16}, {3, 16, 8, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int got = llm_decode_cluster_splits(cases[i][0], cases[i][1], cases[i][2]);
        CHECKF(got == cases[i][3], "fused %d, device %d, group %d: %d splits, want %d",
               cases[i][0], cases[i][1], cases[i][2], got, cases[i][3]);
    }
    /* every count it gives is a bucket's or the full graph's, at most the device's */
    static const int mosts[] = {0, 4, 8, 16, 32};
    for (int fused = 1; fused <= 64; fused++)
        for (size_t j = 0; j < sizeof mosts / sizeof mosts[0]; j++) {
            const int most = mosts[j], n = llm_decode_cluster_splits(fused, most, 4);
            CHECKF(n == 0 || ((n == 4 || n == 8 || n == 16 || n == 32) && n <= most &&
                              (n >= fused || n == most)),
                   "fused %d, device %d: %d splits", fused, most, n);
        }
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, exact_means_the_same_split, buckets_of_each_session,
               the_smallest_exact_bucket_is_picked, the_even_cut, cluster_split_counts);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
