/* The tokenizer's private state and the helpers its files share. */
#ifndef QMM_TEXT_TOK_INTERNAL_H
#define QMM_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "qmm.h"

/* Bytes (not NUL-terminated) -> int32, open addressing; keys are copied into an arena. */
typedef struct tok_map {
    uint32_t *slot_key;  /* offset+1 into keys of the entry's key length-prefixed record; 0 = empty */
    int32_t *slot_val;
    size_t cap;          /* power of two */
    size_t count;
    char *keys;          /* records: uint32 length, then the bytes */
    size_t keys_len, keys_cap;
} tok_map;

int tok_map_init(tok_map *m, size_t expected);
void tok_map_free(tok_map *m);
/* 1 added, 0 the key exists (value unchanged), -1 out of memory or too large. */
int tok_map_put(tok_map *m, const char *key, size_t len, int32_t val);
/* 1 and *val when present. */
int tok_map_get(const tok_map *m, const char *key, size_t len, int32_t *val);

/* (left id, right id) -> (rank, merged id). */
typedef struct tok_pairs {
    uint64_t *key; /* (a << 32 | b) + 1; 0 = empty */
    uint64_t *val; /* rank << 32 | merged id */
    size_t cap;
    size_t count;
} tok_pairs;

int tok_pairs_init(tok_pairs *p, size_t expected);
void tok_pairs_free(tok_pairs *p);
int tok_pairs_put(tok_pairs *p, int32_t a, int32_t b, uint32_t rank, int32_t merged);
static inline int tok_pairs_get(const tok_pairs *p, int32_t a, int32_t b, uint32_t *rank,
                                int32_t *merged)
{
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (p->cap - 1);
    for (;; i = (i + 1) & (p->cap - 1)) {
        if (p->key[i] == k) {
            *rank = (uint32_t)(p->val[i] >> 32);
            *merged = (int32_t)(uint32_t)p->val[i];
            return 1;
        }
        if (!p->key[i]) return 0;
    }
}

typedef struct tok_added {
    char *text;
    size_t len;
    int32_t id;
    int special;
} tok_added;

struct qmm_tokenizer {
    tok_map vocab;           /* ByteLevel-alphabet token text -> id */
    tok_pairs merges;
    int32_t byte_id[256];    /* the token of each single byte */
    int64_t n_ids;           /* one past the largest id */
    uint32_t *off, *len;     /* per id: its bytes in bytes[]; len = 0 for an unused id */
    char *bytes;
    uint8_t *special;        /* per id: an added token marked special */
    tok_added *added;        /* sorted longest first (leftmost-longest matching) */
    int n_added;
    uint8_t added_first[256]; /* 1 when some added token starts with this byte */
    pcre2_code *re;          /* the pre-tokenizer split */
    int chat_qwen3;          /* tokenizer_config.json holds a Qwen3-style chat template */
};

/* The GPT-2 ByteLevel alphabet: byte b is the code point byte_cp[b]. */
void tok_bytelevel_table(uint32_t byte_cp[256]);

/* Load the vocabulary, merges and added tokens of a parsed tokenizer.json (tok_load.c). */
qmm_status tok_build(qmm_tokenizer *t, const char *json, size_t len, const char *what);

#endif
