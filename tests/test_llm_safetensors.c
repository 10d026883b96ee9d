/* safetensors reading and writing: header validation on hand-made images, truncation and
 * corruption sweeps (no crash, a clear error), files on disk, sharded checkpoints. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "llm/st_writer.h"

/* ---- helpers ---- */



/* A file image: u64 header length, header, data_len bytes of a byte pattern. */
static unsigned char *image(const char *header, uint64_t claimed_len, size_t data_len, size_t *len)
{
    size_t h = strlen(header);
    *len = 8 + h + data_len;
    unsigned char *b = malloc(*len ? *len : 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(claimed_len >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (unsigned char)(i * 7 + 1);
    return b;
}

static qmm_status parse_header(const char *header, size_t data_len, st_header *h)
{
    size_t len;
    unsigned char *b = image(header, strlen(header), data_len, &len);
    qmm_status st = st_parse(b, len, "test", h);
    st_header_free(h);
    free(b);
    return st;
}

/* ---- cases ---- */

static void parse_valid_header(void)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[24,26]},"
                      "\"c\":{\"dtype\":\"U32\",\"shape\":[0,5],\"data_offsets\":[26,26]},"
                      "\"d\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[26,34]}}   ";
    size_t len;
    unsigned char *b = image(hdr, strlen(hdr), 34, &len);
    st_header h;
    CHECK_OK(st_parse(b, len, "valid", &h));
    CHECK(h.count == 4);
    if (h.count == 4) {
        const unsigned char *data = b + 8 + strlen(hdr);
        CHECK(!strcmp(h.tensors[0].name, "a") && h.tensors[0].dtype == ST_F32);
        CHECK(h.tensors[0].ndim == 2 && h.tensors[0].shape[0] == 2 && h.tensors[0].shape[1] == 3);
        CHECK(h.tensors[0].nbytes == 24 && h.tensors[0].data == data);
        CHECK(h.tensors[1].ndim == 0 && h.tensors[1].nbytes == 2 && h.tensors[1].data == data + 24);
        CHECK(h.tensors[2].nbytes == 0);
        CHECK(h.tensors[3].dtype == ST_I64 && h.tensors[3].data == data + 26);
    }
    st_header_free(&h);
    free(b);
    /* an empty header object is a valid (empty) file */
    CHECK_OK(parse_header("{}", 0, &h));
}

static void parse_rejects_bad_headers(void)
{
    const struct {
        const char *hdr;
        size_t data;
        const char *why;
    } bad[] = {
        {"[]", 0, "header is an array"},
        {"{\"a\":1}", 0, "entry not an object"},
        {"not json at all", 0, "non-JSON header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "no data_offsets"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no shape"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype"},
        {"{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype not a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "negative dim"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "fractional dim"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "shape not array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "9 dims"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904],"
         "\"data_offsets\":[0,4]}}", 4, "shape overflows"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
         "size mismatch (huge)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "begin > end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "end past data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4, "range past data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "size mismatch"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "one offset"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "three offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "negative offset"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4,
         "string offset"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551620]}}", 4,
         "offset beyond u64"},
        {"{\"__metadata__\":[1]}", 0, "metadata not an object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "metadata value not a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "duplicate name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_header h;
        qmm_status st = parse_header(bad[i].hdr, bad[i].data, &h);
        CHECKF(st == QMM_ERR_FORMAT, "%s: got %s", bad[i].why, qmm_status_name(st));
        CHECKF(strstr(qmm_last_error(), "test") != NULL, "%s: message '%s' does not name the file",
               bad[i].why, qmm_last_error());
    }
}

static void parse_rejects_lying_lengths(void)
{
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    uint64_t lies[] = {0, 1, strlen(hdr) + 5, strlen(hdr) + 100, UINT64_MAX, (uint64_t)1 << 63,
                       ((uint64_t)100 << 20) + 1};
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        size_t len;
        unsigned char *b = image(hdr, lies[i], 4, &len);
        st_header h;
        qmm_status st = st_parse(b, len, "lie", &h);
        CHECKF(st == QMM_ERR_FORMAT, "claimed header length %llu gave %s",
               (unsigned long long)lies[i], qmm_status_name(st));
        st_header_free(&h);
        free(b);
    }
    st_header h;
    unsigned char tiny[7] = {0};
    CHECK_STATUS(st_parse(tiny, sizeof tiny, "short", &h), QMM_ERR_FORMAT);
    CHECK_STATUS(st_parse(tiny, 0, "empty", &h), QMM_ERR_FORMAT);
}

/* Every truncation of a valid file is rejected: the last tensor ends at the end of the file. */
static void parse_every_truncation_fails(void)
{
    const char *hdr = "{\"w\":{\"dtype\":\"U32\",\"shape\":[2,4],\"data_offsets\":[0,32]},"
                      "\"s\":{\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[32,36]}}";
    size_t len;
    unsigned char *b = image(hdr, strlen(hdr), 36, &len);
    st_header h;
    CHECK_OK(st_parse(b, len, "full", &h));
    st_header_free(&h);
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *t = malloc(cut ? cut : 1);
        memcpy(t, b, cut);
        qmm_status st = st_parse(t, cut, "cut", &h);
        CHECKF(st == QMM_ERR_FORMAT, "file cut to %zu of %zu bytes gave %s", cut, len,
               qmm_status_name(st));
        st_header_free(&h);
        free(t);
    }
    free(b);
}

/* Random byte corruption anywhere in a valid file: any status, never a crash (ASan watches). */
static void parse_random_corruption_is_safe(void)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"mlx\"},"
                      "\"w\":{\"dtype\":\"U32\",\"shape\":[2,4],\"data_offsets\":[0,32]},"
                      "\"s\":{\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[32,36]}}";
    size_t len;
    unsigned char *b = image(hdr, strlen(hdr), 36, &len);
    int rejected = 0;
    for (int it = 0; it < 20000; it++) {
        unsigned char *t = malloc(len);
        memcpy(t, b, len);
        int flips = 1 + (int)(test_rand_u64() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(test_rand_u64() % (8 + strlen(hdr)));
            t[at] = (unsigned char)test_rand_u64();
        }
        st_header h;
        qmm_status st = st_parse(t, len, "fuzz", &h);
        if (st) rejected++;
        else
            for (size_t i = 0; i < h.count; i++)
                CHECK(h.tensors[i].data + h.tensors[i].nbytes <= t + len);
        st_header_free(&h);
        free(t);
    }
    CHECK(rejected > 0);
    free(b);
}

static void write_and_open_file(void)
{
    char dir[512], path[600];
    if (!test_make_tmpdir(dir, sizeof dir, "st")) return;
    if (!dir[0]) return;
    st_entry e[3] = {0};
    snprintf(e[0].name, sizeof e[0].name, "odd \"name\" \\ with\tescapes");
    e[0].dtype = ST_BF16, e[0].ndim = 1, e[0].shape[0] = 3;
    snprintf(e[1].name, sizeof e[1].name, "w");
    e[1].dtype = ST_U32, e[1].ndim = 2, e[1].shape[0] = 2, e[1].shape[1] = 2;
    snprintf(e[2].name, sizeof e[2].name, "caf\xc3\xa9");
    e[2].dtype = ST_F32, e[2].ndim = 0;
    qmm_bf16 a[3] = {1, 2, 3};
    uint32_t w[4] = {10, 20, 30, 0xFFFFFFFFu};
    float f = 2.5f;
    const void *data[3] = {a, w, &f};
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    CHECK_OK(st_write_file(path, e, data, 3, "mlx"));
    st_set s;
    CHECK_OK(st_open(path, &s));
    CHECK(s.count == 3);
    const st_tensor *t = st_find(&s, e[0].name);
    CHECK(t && t->nbytes == 6 && !memcmp(t->data, a, 6));
    t = st_find(&s, "w");
    CHECK(t && t->dtype == ST_U32 && !memcmp(t->data, w, 16));
    /* "w" follows 6 bytes of bf16, so it sits at an odd offset: readers must not assume more */
    t = st_find(&s, "caf\xc3\xa9");
    CHECK(t && t->ndim == 0 && !memcmp(t->data, &f, 4));
    CHECK(st_find(&s, "nope") == NULL);
    /* the data buffer starts 8-byte aligned */
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | s.maps[0].addr[i];
    CHECK((8 + hlen) % 8 == 0);
    st_close(&s);
    /* no temporary left behind */
    char tmpl[700];
    snprintf(tmpl, sizeof tmpl, "%s/.x.safetensors.tmp.", dir);
    CHECK_STATUS(st_open(tmpl, &s), QMM_ERR_NOT_FOUND);
    /* a wrong-size put is refused and discarding leaves nothing */
    st_writer wr;
    snprintf(path, sizeof path, "%s/y.safetensors", dir);
    CHECK_OK(st_writer_open(&wr, path, e, 3, NULL));
    CHECK_STATUS(st_writer_put(&wr, a, 4), QMM_ERR_SIZE_MISMATCH);
    CHECK_STATUS(st_writer_finish(&wr), QMM_ERR_ARG);
    st_writer_discard(&wr);
    CHECK_STATUS(st_open(path, &s), QMM_ERR_NOT_FOUND);
    /* a directory without a checkpoint */
    CHECK_STATUS(st_open(dir, &s), QMM_ERR_NOT_FOUND);
    test_rm_tree(dir);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    test_write_text(path, text);
}

static void sharded_checkpoint(void)
{
    char dir[512], path[700];
    if (!test_make_tmpdir(dir, sizeof dir, "st")) return;
    if (!dir[0]) return;
    st_entry e[2] = {0};
    float v1[2] = {1, 2}, v2[3] = {3, 4, 5};
    snprintf(e[0].name, sizeof e[0].name, "one");
    e[0].dtype = ST_F32, e[0].ndim = 1, e[0].shape[0] = 2;
    snprintf(e[1].name, sizeof e[1].name, "two");
    e[1].dtype = ST_F32, e[1].ndim = 1, e[1].shape[0] = 3;
    const void *d1[1] = {v1}, *d2[1] = {v2};
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    CHECK_OK(st_write_file(path, &e[0], d1, 1, NULL));
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    CHECK_OK(st_write_file(path, &e[1], d2, 1, NULL));
    write_file(dir, "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {"
               "\"one\": \"model-00001-of-00002.safetensors\","
               "\"two\": \"model-00002-of-00002.safetensors\"}}");
    st_set s;
    CHECK_OK(st_open(dir, &s));
    CHECK(s.nfiles == 2 && s.count == 2);
    const st_tensor *t = st_find(&s, "two");
    CHECK(t && t->file == 1 && !memcmp(t->data, v2, 12));
    st_close(&s);

    const struct {
        const char *index;
        qmm_status want;
        const char *why;
    } bad[] = {
        {"{\"weight_map\": {\"one\": \"model-00002-of-00002.safetensors\"}}", QMM_ERR_FORMAT,
         "tensor in the wrong shard"},
        {"{\"weight_map\": {\"three\": \"model-00001-of-00002.safetensors\"}}", QMM_ERR_FORMAT,
         "tensor absent from its shard"},
        {"{\"weight_map\": {\"one\": \"../model-00001-of-00002.safetensors\"}}", QMM_ERR_FORMAT,
         "shard outside the directory"},
        {"{\"weight_map\": {\"one\": \"missing.safetensors\"}}", QMM_ERR_NOT_FOUND,
         "missing shard"},
        {"{\"weight_map\": {\"one\": 5}}", QMM_ERR_FORMAT, "shard name not a string"},
        {"{\"metadata\": {}}", QMM_ERR_FORMAT, "no weight_map"},
        {"{\"weight_map\": {\"one\": \"model-00001-of-00002.safetensors\"", QMM_ERR_FORMAT,
         "truncated index"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(dir, "model.safetensors.index.json", bad[i].index);
        qmm_status st = st_open(dir, &s);
        CHECKF(st == bad[i].want, "%s: got %s (%s)", bad[i].why, qmm_status_name(st),
               qmm_last_error());
    }
    /* the same tensor in two shards */
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    CHECK_OK(st_write_file(path, &e[0], d1, 1, NULL));
    write_file(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"one\": \"model-00001-of-00002.safetensors\","
               "\"x\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_STATUS(st_open(dir, &s), QMM_ERR_FORMAT);
    test_rm_tree(dir);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, parse_valid_header, parse_rejects_bad_headers, parse_rejects_lying_lengths,
               parse_every_truncation_fails, parse_random_corruption_is_safe, write_and_open_file,
               sharded_checkpoint);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
