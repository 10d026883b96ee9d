/*
 * A small, strict JSON reader (RFC 8259) for config.json and safetensors headers.
 *
 * The whole text is parsed into a flat array of nodes in document order. A container's children
 * follow it directly; json_end(d, c) is the index one past c's subtree, so the next sibling of
 * child c is json_end(d, c). Object members are (key string, value) pairs of consecutive subtrees.
 * Strict: no comments, no trailing commas, no duplicate keys, valid UTF-8, no NUL in strings,
 * nesting at most JSON_MAX_DEPTH, nothing but whitespace after the value. Errors are
 * QMM_ERR_FORMAT with the byte offset; out of memory is QMM_ERR_NOMEM. Texts are < 4 GiB.
 */
#ifndef QMM_LLM_JSON_H
#define QMM_LLM_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define JSON_MAX_DEPTH 64

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type;

/* 16 bytes a node: a value takes at least 2 bytes of text (a digit and a separator), so the
 * nodes never exceed 8x the text, and the decoded strings 1x. Fields by type: */
typedef struct json_node {
    uint8_t type;         /* json_type */
    uint8_t is_int;       /* JSON_NUMBER written without fraction or exponent that fits int64 */
    uint8_t boolean;      /* JSON_BOOL: 0 or 1 */
    uint8_t unused_;
    union {
        uint32_t end_;    /* containers: index one past the subtree (read it with json_end) */
        uint32_t str_len; /* JSON_STRING: bytes of str */
    };
    union {
        struct {
            uint32_t count;  /* containers: elements (arrays), members (objects) */
            uint32_t offset; /* containers: byte offset in the text, for messages */
        };
        int64_t i;        /* JSON_NUMBER with is_int */
        double real_;     /* JSON_NUMBER without is_int (read any number with json_num) */
        const char *str;  /* JSON_STRING: decoded UTF-8, NUL-terminated (owned by the doc) */
    };
} json_node;

typedef struct json_doc {
    json_node *nodes; /* nodes[0] is the root */
    uint32_t count;
    uint32_t cap;
    char *strings;    /* arena of decoded strings; never larger than the text */
    size_t strings_len;
} json_doc;

/* Parse text[len] (need not be NUL-terminated). On error *doc is left empty. */
qmm_status json_parse(const char *text, size_t len, json_doc *doc);
void json_free(json_doc *doc);

/* Member value of object node obj named key, or 0 when absent (0 is never a member: it is the root). */
uint32_t json_member(const json_doc *d, uint32_t obj, const char *key);
/* First child of a container (0 when empty) and the sibling after child c (0 at the end of parent). */
uint32_t json_first(const json_doc *d, uint32_t parent);
uint32_t json_next(const json_doc *d, uint32_t parent, uint32_t c);

/* Index one past node idx's subtree (idx + 1 for a scalar). */
static inline uint32_t json_end(const json_doc *d, uint32_t idx)
{
    const json_node *n = &d->nodes[idx];
    return n->type == JSON_ARRAY || n->type == JSON_OBJECT ? n->end_ : idx + 1;
}
/* The value of a JSON_NUMBER as the nearest double (integers too). */
static inline double json_num(const json_node *n) { return n->is_int ? (double)n->i : n->real_; }

/* JSON type name for messages. */
const char *json_type_name(json_type t);

#ifdef __cplusplus
}
#endif

#endif
