/* Regression tests for issue 17's crafted files: FIFOs in a model directory, the JSON parser's
 * memory, an index of many entries over many shards, data_offsets that overlap or leave gaps,
 * misleading config messages, and a checkpoint truncated after it was loaded. Every file is
 * written here, at test time, into a temporary directory. */
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "llm/hf_random.h"
#include "llm/json.h"
#include "llm/safetensors.h"

/* The smallest Qwen3 the engine accepts: one layer, one head of 128, a vocabulary of 64. */
static const qmm_llm_config tiny = {128, 128, 1, 1, 1, 128, 64, 64, 1e6, 1e-6, 1, 128};

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECKF(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

/* A random tiny MLX checkpoint in dir/mlx (from an HF one in dir/hf). */
static int make_checkpoint(const char *dir, char *mlx, size_t size)
{
    char hf[600];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(mlx, size, "%s/mlx", dir);
    if (mkdir(hf, 0755)) return 0;
    qmm_status st = llm_write_random_hf(hf, &tiny, test_rand_u64(), ST_BF16);
    if (!st) st = qmm_llm_quantize_checkpoint(hf, mlx, NULL);
    CHECKF(st == QMM_OK, "making the checkpoint: %s", qmm_last_error());
    return st == QMM_OK;
}

/* Greedy tokens of a model on the CPU: prompt {1, 2, 3}, n new tokens. */
static qmm_status generate(const qmm_llm_model *m, int32_t *out, int64_t n)
{
    qmm_llm_cpu_session *s = NULL;
    const int32_t ids[3] = {1, 2, 3};
    qmm_status st = qmm_llm_cpu_session_create(m, 3 + n, 1, &s);
    if (!st) st = qmm_llm_cpu_generate(s, ids, 3, n, out, NULL);
    qmm_llm_cpu_session_destroy(s);
    return st;
}

/* ---- defect 4: a FIFO where a file is expected must fail, not block ---- */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "    FAIL: the loader blocked on a FIFO (killed after 20 s)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void fifo_in_model_directory(void)
{
    char dir[512], mlx[600], bad[700], path[800], from[800];
    if (!test_make_tmpdir(dir, sizeof dir, "hard") || !make_checkpoint(dir, mlx, sizeof mlx)) return;
    static const char *names[] = {"config.json", "model.safetensors",
                                  "model.safetensors.index.json"};
    signal(SIGALRM, on_alarm);
    for (int i = 0; i < 3; i++) {
        snprintf(bad, sizeof bad, "%s/fifo%d", dir, i);
        mkdir(bad, 0755);
        /* the two real files, then the FIFO in place of (or beside) one of them */
        for (int f = 0; f < 2; f++) {
            if (f == i) continue;
            snprintf(from, sizeof from, "%s/%s", mlx, names[f]);
            snprintf(path, sizeof path, "%s/%s", bad, names[f]);
            CHECK(link(from, path) == 0);
        }
        snprintf(path, sizeof path, "%s/%s", bad, names[i]);
        CHECK(mkfifo(path, 0644) == 0);
        printf("    FIFO as %s\n", names[i]);
        alarm(20);
        qmm_llm_model *m = (qmm_llm_model *)0x1;
        qmm_clear_error();
        qmm_status st = qmm_llm_model_load(bad, &m);
        alarm(0);
        CHECKF(st == QMM_ERR_IO, "%s: %s (%s)", names[i], qmm_status_name(st), qmm_last_error());
        CHECKF(strstr(qmm_last_error(), "not a regular file") != NULL, "message: %s",
               qmm_last_error());
        CHECK(m == NULL);
        /* and as a file path given directly */
        if (i == 1) {
            alarm(20);
            CHECK_STATUS(qmm_llm_model_load(path, &m), QMM_ERR_IO);
            alarm(0);
        }
    }
    signal(SIGALRM, SIG_DFL);
    test_rm_tree(dir);
}

/* ---- defect 5: the JSON parser's memory, and index lookups ---- */

static void json_memory_is_bounded(void)
{
    /* the worst case for nodes a byte: one-digit numbers in one array, 8 MB */
    const size_t len = ((size_t)8 << 20) + 1; /* "[1,1,...,1,7]" */
    char *text = malloc(len);
    text[0] = '[';
    for (size_t i = 1; i + 1 < len; i += 2) {
        text[i] = '1';
        text[i + 1] = ',';
    }
    text[len - 2] = '7';
    text[len - 1] = ']';
    json_doc d;
    double t0 = (qmm_now_ms() * 1e-3);
    CHECK_OK(json_parse(text, len, &d));
    double dt = (qmm_now_ms() * 1e-3) - t0;
    size_t node_bytes = (size_t)d.cap * sizeof(json_node);
    printf("    %zu MB of digits: %u values, %zu MB of nodes (%.1f bytes a text byte), %.3f s\n",
           len >> 20, d.count, node_bytes >> 20, (double)node_bytes / (double)len, dt);
    CHECK(d.count == (len - 1) / 2 + 1); /* the array and its numbers */
    CHECKF(node_bytes <= len * 8 + 4096, "nodes take %zu bytes for %zu bytes of text", node_bytes,
           len);
    CHECK(d.nodes[1].is_int && d.nodes[1].i == 1 && d.nodes[d.count - 1].i == 7);
    json_free(&d);
    free(text);
    CHECK(sizeof(json_node) == 16);
}

/* An index of many entries over many shards: lookups by sorting, not entries x shards scans. */
static void index_of_many_entries_over_many_shards(void)
{
    enum { SHARDS = 4096, PER = 40 };
    char top[512], dir[3000], path[3200];
    if (!test_make_tmpdir(top, sizeof top, "hard")) return;
    /* a long directory path: a lookup that compares whole paths per entry and shard (the old
     * one) pays for it, one that sorts the shard names does not */
    snprintf(dir, sizeof dir, "%s", top);
    for (int level = 0; level < 8; level++) {
        size_t n = strlen(dir);
        dir[n] = '/';
        memset(dir + n + 1, 'a' + level, 250);
        dir[n + 251] = 0;
        CHECK(mkdir(dir, 0755) == 0);
    }
    size_t cap = (size_t)SHARDS * PER * 64 + 64, at = 0;
    char *index = malloc(cap), *hdr = malloc(PER * 80 + 64);
    at += (size_t)snprintf(index + at, cap - at, "{\"weight_map\":{");
    for (int s = 0; s < SHARDS; s++) {
        size_t h = 0;
        h += (size_t)sprintf(hdr + h, "{");
        for (int t = 0; t < PER; t++) {
            /* empty U8 tensors: they tile an empty data buffer */
            h += (size_t)sprintf(hdr + h, "%s\"t%d.%d\":{\"dtype\":\"U8\",\"shape\":[0],"
                                 "\"data_offsets\":[0,0]}", t ? "," : "", s, t);
            at += (size_t)snprintf(index + at, cap - at, "%s\"t%d.%d\":\"shard-%05d.st\"",
                                   s || t ? "," : "", s, t, s);
        }
        h += (size_t)sprintf(hdr + h, "}");
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h >> (8 * i));
        snprintf(path, sizeof path, "%s/shard-%05d.st", dir, s);
        FILE *f = fopen(path, "wb");
        fwrite(len8, 1, 8, f);
        fwrite(hdr, 1, h, f);
        fclose(f);
    }
    at += (size_t)snprintf(index + at, cap - at, "}}");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_text(path, index, at);
    st_set set;
    double t0 = (qmm_now_ms() * 1e-3);
    CHECK_OK(st_open(path, &set));
    double dt = (qmm_now_ms() * 1e-3) - t0;
    printf("    %d entries over %d shards (%.1f MB index): opened in %.3f s\n", SHARDS * PER,
           SHARDS, (double)at / 1e6, dt);
    CHECK(set.count == (size_t)SHARDS * PER && set.nfiles == SHARDS);
    CHECK(st_find(&set, "t4095.39") && st_find(&set, "t4095.39")->file == 4095);
    /* before: entries x shards compares of whole paths (minutes with sanitizers); now sorting */
    CHECKF(dt < 6.0, "opening took %.1f s", dt);
    st_close(&set);
    /* an entry that names the wrong shard is still caught */
    char *swap = strstr(index, "\"t7.3\":\"shard-00007.st\"");
    CHECK(swap != NULL);
    if (swap) {
        memcpy(swap + strlen("\"t7.3\":\"shard-0000"), "8", 1);
        write_text(path, index, at);
        CHECK_STATUS(st_open(path, &set), QMM_ERR_FORMAT);
        CHECK(strstr(qmm_last_error(), "t7.3") != NULL);
    }
    free(index);
    free(hdr);
    test_rm_tree(top);
}

/* ---- defect 6: the tensors must tile the data buffer exactly ---- */

static qmm_status parse_image(const char *header, size_t data_len)
{
    size_t h = strlen(header), len = 8 + h + data_len;
    unsigned char *b = malloc(len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, 0x3C, data_len);
    st_header out;
    qmm_clear_error();
    qmm_status st = st_parse(b, len, "tiling", &out);
    if (!st) st_header_free(&out);
    free(b);
    return st;
}

static void data_offsets_must_tile(void)
{
    static const struct {
        const char *what, *header;
        size_t data;
        qmm_status want;
    } cases[] = {
        {"exact, in order", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                            "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}", 6,
         QMM_OK},
        {"exact, out of order", "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
                                "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 6,
         QMM_OK},
        {"empty tensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                          "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                          "\"c\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,3]}}", 3,
         QMM_OK},
        {"two tensors share bytes", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                                    "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
         4, QMM_ERR_FORMAT},
        {"partial overlap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                            "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6,
         QMM_ERR_FORMAT},
        {"gap between", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}", 6,
         QMM_ERR_FORMAT},
        {"gap at the start", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4,
         QMM_ERR_FORMAT},
        {"trailing bytes", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 5,
         QMM_ERR_FORMAT},
        {"data but no tensor", "{\"__metadata__\":{\"k\":\"v\"}}", 3, QMM_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qmm_status st = parse_image(cases[i].header, cases[i].data);
        printf("    %-24s -> %s%s%s\n", cases[i].what, qmm_status_name(st), st ? ": " : "",
               st ? qmm_last_error() : "");
        CHECKF(st == cases[i].want, "%s: %s, want %s", cases[i].what, qmm_status_name(st),
               qmm_status_name(cases[i].want));
    }
}

/* ---- defect 9: messages name the real problem ---- */

/* base without the keys in drop[] (space separated), then edit inserted first */
static void edited_config(const char *base, const char *edit, const char *drop, char *out,
                          size_t size)
{
    char *dup = strdup(base);
    char keys[256];
    snprintf(keys, sizeof keys, "%s", drop);
    for (char *k = strtok(keys, " "); k; k = strtok(NULL, " ")) {
        char quoted[80];
        snprintf(quoted, sizeof quoted, "\"%s\"", k);
        char *at = strstr(dup, quoted);
        if (!at) continue;
        char *stop = at;
        while (*stop && *stop != ',' && *stop != '}') stop++;
        if (*stop == ',') stop++;
        memmove(at, stop, strlen(stop) + 1);
    }
    char *brace = strchr(dup, '{');
    snprintf(out, size, "{%s,%s", edit, brace ? brace + 1 : "}");
    free(dup);
}

static void config_messages_name_the_bad_key(void)
{
    char base[2048];
    static const struct {
        const char *what, *edit, *drop, *want_key, *must_not;
    } cases[] = {
        {"negative heads", "\"num_attention_heads\": -2",
         "num_attention_heads num_key_value_heads", "num_attention_heads", "missing"},
        {"negative hidden", "\"hidden_size\": -256", "hidden_size head_dim", "hidden_size",
         "missing"},
        {"INT64_MIN heads", "\"num_attention_heads\": -9223372036854775808",
         "num_attention_heads num_key_value_heads", "num_attention_heads", "missing"},
        {"zero hidden", "\"hidden_size\": 0", "hidden_size head_dim", "hidden_size", "head_dim"},
    };
    CHECK_OK(llm_config_json(&tiny, base, sizeof base));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[4096];
        edited_config(base, cases[i].edit, cases[i].drop, text, sizeof text);
        CHECK(!strstr(text, "num_key_value_heads") || !strstr(cases[i].drop, "key_value"));
        qmm_llm_config c;
        qmm_clear_error();
        qmm_status st = qmm_llm_config_parse(text, strlen(text), &c);
        printf("    %-16s -> %s: %s\n", cases[i].what, qmm_status_name(st), qmm_last_error());
        CHECK(st != QMM_OK);
        CHECKF(strstr(qmm_last_error(), cases[i].want_key) != NULL,
               "%s: the message does not name %s", cases[i].what, cases[i].want_key);
        CHECKF(strstr(qmm_last_error(), cases[i].must_not) == NULL, "%s: the message says '%s'",
               cases[i].what, cases[i].must_not);
    }
}

static void unknown_preset_is_named(void)
{
    char cwd_dir[512];
    if (!test_make_tmpdir(cwd_dir, sizeof cwd_dir, "hard")) return;
    qmm_llm_model *m = NULL;
    qmm_clear_error();
    CHECK_STATUS(qmm_llm_model_open("qwen3-5b", 1, &m), QMM_ERR_NOT_FOUND);
    printf("    qwen3-5b -> %s\n", qmm_last_error());
    CHECK(strstr(qmm_last_error(), "qwen3-5b") && strstr(qmm_last_error(), "preset"));
    CHECK(!strstr(qmm_last_error(), "config.json") && m == NULL);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nothing-here", cwd_dir);
    CHECK_STATUS(qmm_llm_model_open(missing, 1, &m), QMM_ERR_NOT_FOUND);
    CHECK(strstr(qmm_last_error(), "nothing-here") != NULL);
    CHECK_STATUS(qmm_llm_model_load(missing, &m), QMM_ERR_NOT_FOUND);
    /* a group suffix on a preset: groups of 64 or 32; on anything else, or alone, not found */
    static const char *const bad[] = {"synthetic:qwen3-5b-g64", "synthetic:qwen3-0.6b-g16",
                                      "synthetic:-g64", "synthetic:qwen3-0.6bg64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STATUS(qmm_llm_model_open(bad[i], 1, &m), QMM_ERR_NOT_FOUND);
    for (int g = 32; g <= 64; g *= 2) {
        char spec[64];
        snprintf(spec, sizeof spec, "synthetic:qwen3-0.6b-g%d", g);
        CHECK_OK(qmm_llm_model_open(spec, 1, &m));
        if (!m) continue;
        CHECK(qmm_llm_model_config(m)->group_size == g);
        qmm_llm_model_destroy(m);
        m = NULL;
    }
    test_rm_tree(cwd_dir);
}

/* ---- defect 11: a checkpoint truncated after loading ---- */

static void truncated_after_load(void)
{
    char dir[512], mlx[600], file[700];
    if (!test_make_tmpdir(dir, sizeof dir, "hard") || !make_checkpoint(dir, mlx, sizeof mlx)) return;
    snprintf(file, sizeof file, "%s/model.safetensors", mlx);
    qmm_llm_model *mapped = NULL, *copied = NULL;
    CHECK_OK(qmm_llm_model_load_mode(mlx, QMM_LLM_LOAD_MAP, &mapped));
    CHECK_OK(qmm_llm_model_load_mode(mlx, QMM_LLM_LOAD_COPY, &copied));
    qmm_llm_model *none = NULL;
    CHECK_STATUS(qmm_llm_model_load_mode(mlx, (qmm_llm_load_mode)7, &none), QMM_ERR_ARG);
    CHECK(none == NULL);
    if (!mapped || !copied) {
        qmm_llm_model_destroy(mapped);
        qmm_llm_model_destroy(copied);
        test_rm_tree(dir);
        return;
    }
    int32_t want[4], got[4];
    CHECK_OK(generate(mapped, want, 4));
    CHECK_OK(generate(copied, got, 4));
    CHECK(!memcmp(want, got, sizeof want));
    CHECK(qmm_llm_model_weight_bytes(mapped) == qmm_llm_model_weight_bytes(copied));
    /* truncate the file under both models */
    CHECK(truncate(file, 8) == 0);
    memset(got, 0xA5, sizeof got);
    CHECK_OK(generate(copied, got, 4));
    CHECKF(!memcmp(want, got, sizeof want), "the copied model changed with its file");
    /* the mapped one faults on the missing pages (documented): in a child, it must die of
     * SIGBUS rather than return wrong tokens */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* a sanitizer's handler would turn the signal into an exit */
        int32_t t[4];
        generate(mapped, t, 4);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("    mapped model after truncation: %s %d\n",
           WIFSIGNALED(status) ? "killed by signal" : "exited", WIFSIGNALED(status) ?
           WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
    /* loading the truncated file in either mode is an error, not a fault */
    qmm_llm_model *m = NULL;
    CHECK_STATUS(qmm_llm_model_load_mode(mlx, QMM_LLM_LOAD_COPY, &m), QMM_ERR_FORMAT);
    CHECK_STATUS(qmm_llm_model_load_mode(mlx, QMM_LLM_LOAD_MAP, &m), QMM_ERR_FORMAT);
    qmm_llm_model_destroy(mapped);
    qmm_llm_model_destroy(copied);
    test_rm_tree(dir);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, fifo_in_model_directory, json_memory_is_bounded,
               index_of_many_entries_over_many_shards, data_offsets_must_tile,
               config_messages_name_the_bad_key, unknown_preset_is_named, truncated_after_load);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
