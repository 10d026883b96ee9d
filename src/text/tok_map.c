/* Hash tables of the tokenizer: token text -> id and merge pair -> rank; the ByteLevel alphabet. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix: keys are short */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    return h * 0xbf58476d1ce4e5b9ull;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* Two zeroed slot arrays of a table sized for `expected` entries at most half full: the
 * capacity in *cap, 0 on success (both arrays or neither). */
static int alloc_slots(size_t expected, size_t key_size, size_t val_size, size_t *cap,
                       void **keys, void **vals)
{
    if (expected > (SIZE_MAX / 4) / key_size) return -1;
    *cap = pow2_at_least(expected * 2 + 1);
    *keys = calloc(*cap, key_size);
    *vals = calloc(*cap, val_size);
    if (*keys && *vals) return 0;
    free(*keys), free(*vals);
    *keys = *vals = NULL;
    return -1;
}

int tok_map_init(tok_map *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    return alloc_slots(expected, sizeof *m->slot_key, sizeof *m->slot_val, &m->cap,
                       (void **)&m->slot_key, (void **)&m->slot_val);
}

void tok_map_free(tok_map *m)
{
    free(m->slot_key);
    free(m->slot_val);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

static const char *key_at(const tok_map *m, uint32_t ref, uint32_t *len)
{
    const char *r = m->keys + (ref - 1);
    memcpy(len, r, sizeof *len);
    return r + sizeof *len;
}

static size_t find_slot(const tok_map *m, const char *key, size_t len)
{
    size_t i = (size_t)hash_bytes(key, len) & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        uint32_t ref = m->slot_key[i], klen;
        if (!ref) return i;
        const char *k = key_at(m, ref, &klen);
        if (klen == len && !memcmp(k, key, len)) return i;
    }
}

static int grow(tok_map *m)
{
    tok_map n = *m;
    n.cap = m->cap * 2;
    n.slot_key = calloc(n.cap, sizeof *n.slot_key);
    n.slot_val = calloc(n.cap, sizeof *n.slot_val);
    if (!n.slot_key || !n.slot_val) {
        free(n.slot_key);
        free(n.slot_val);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot_key[i]) continue;
        uint32_t klen;
        const char *k = key_at(m, m->slot_key[i], &klen);
        size_t j = find_slot(&n, k, klen);
        n.slot_key[j] = m->slot_key[i];
        n.slot_val[j] = m->slot_val[i];
    }
    free(m->slot_key);
    free(m->slot_val);
    *m = n;
    return 0;
}

int tok_map_put(tok_map *m, const char *key, size_t len, int32_t val)
{
    if (len > UINT32_MAX / 2) return -1;
    if ((m->count + 1) * 2 > m->cap && grow(m)) return -1;
    size_t i = find_slot(m, key, len);
    if (m->slot_key[i]) return 0;
    size_t need = m->keys_len + sizeof(uint32_t) + len;
    if (need >= UINT32_MAX) return -1; /* refs are 32-bit offsets */
    if (need > m->keys_cap) {
        size_t cap = m->keys_cap ? m->keys_cap : 4096;
        while (cap < need) cap *= 2;
        char *k = realloc(m->keys, cap);
        if (!k) return -1;
        m->keys = k;
        m->keys_cap = cap;
    }
    uint32_t l32 = (uint32_t)len;
    memcpy(m->keys + m->keys_len, &l32, sizeof l32);
    if (len) memcpy(m->keys + m->keys_len + sizeof l32, key, len);
    m->slot_key[i] = (uint32_t)m->keys_len + 1;
    m->slot_val[i] = val;
    m->keys_len = need;
    m->count++;
    return 1;
}

int tok_map_get(const tok_map *m, const char *key, size_t len, int32_t *val)
{
    if (!m->cap) return 0;
    size_t i = find_slot(m, key, len);
    if (!m->slot_key[i]) return 0;
    *val = m->slot_val[i];
    return 1;
}

int tok_pairs_init(tok_pairs *p, size_t expected)
{
    memset(p, 0, sizeof *p);
    return alloc_slots(expected, sizeof *p->key, sizeof *p->val, &p->cap, (void **)&p->key,
                       (void **)&p->val);
}

void tok_pairs_free(tok_pairs *p)
{
    free(p->key);
    free(p->val);
    memset(p, 0, sizeof *p);
}

/* The table is sized once for all merges (tok_build knows the count): no growth. */
int tok_pairs_put(tok_pairs *p, int32_t a, int32_t b, uint32_t rank, int32_t merged)
{
    if ((p->count + 1) * 2 > p->cap) return -1;
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (p->cap - 1);
    for (; p->key[i]; i = (i + 1) & (p->cap - 1))
        if (p->key[i] == k) return 0; /* a repeated merge keeps its first (lowest) rank */
    p->key[i] = k;
    p->val[i] = ((uint64_t)rank << 32) | (uint32_t)merged;
    p->count++;
    return 1;
}

void tok_bytelevel_table(uint32_t byte_cp[256])
{
    /* printable Latin-1 bytes stand for themselves; the rest take 256, 257, ... in byte order */
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_cp[b] = printable ? (uint32_t)b : next++;
    }
}
