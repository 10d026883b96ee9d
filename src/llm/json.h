/*
 * A small, strict JSON reader (RFC 8259) for config.json and safetensors headers.
 *
 * The whole text is parsed into a flat array of nodes in document order. A container's children
 * follow it directly; node.end is the index one past its subtree, so the next sibling of child c
 * is nodes[c].end. Object members are (key string, value) pairs of consecutive subtrees.
 * Strict: no comments, no trailing commas, no duplicate keys, valid UTF-8, no NUL in strings,
 * nesting at most JSON_MAX_DEPTH, nothing but whitespace after the value. Errors are
 * QMM_ERR_FORMAT with the byte offset; out of memory is QMM_ERR_NOMEM.
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

typedef struct json_node {
    json_type type;
    uint32_t end;     /* index one past this node's subtree */
    uint32_t count;   /* arrays: elements; objects: members */
    int boolean;      /* JSON_BOOL: 0 or 1 */
    int is_int;       /* number written without fraction or exponent that fits int64 */
    int64_t i;        /* value when is_int */
    double num;       /* value of any number (nearest double) */
    const char *str;  /* JSON_STRING: decoded UTF-8, NUL-terminated (owned by the doc) */
    size_t str_len;
    size_t offset;    /* byte offset of the node in the text, for messages */
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

/* JSON type name for messages. */
const char *json_type_name(json_type t);

#ifdef __cplusplus
}
#endif

#endif
