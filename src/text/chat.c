/* The Qwen3 chat template (tokenizer_config.json's Jinja template, tools left out) in C. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "text/tok_internal.h"

static void puts_(qmm_buf *b, const char *s) { qmm_buf_put(b, s, strlen(s)); }

/* Last occurrence of needle in s[0..n), or NULL. */
static const char *last_of(const char *s, size_t n, const char *needle)
{
    size_t l = strlen(needle);
    for (size_t i = n >= l ? n - l + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, l)) return s + i;
    return NULL;
}

/* Python's str.strip/lstrip/rstrip of '\n' on s[*a..*e). */
static void lstrip_nl(const char **a, const char *e) { while (*a < e && **a == '\n') (*a)++; }
static void rstrip_nl(const char *a, const char **e) { while (*e > a && (*e)[-1] == '\n') (*e)--; }

/* An assistant message: content after the last </think> (lstripped of newlines), reasoning
 * between the first <think> and the first </think>, as the template computes them. */
static void put_assistant(qmm_buf *b, const char *c, int after_query, int is_last)
{
    size_t n = strlen(c);
    const char *ce = c + n, *cs = c, *rs = c, *re = c;
    const char *end_tag = last_of(c, n, "</think>");
    if (end_tag) {
        cs = end_tag + 8;
        lstrip_nl(&cs, ce);
        re = strstr(c, "</think>");
        rstrip_nl(c, &re);
        const char *open = last_of(c, (size_t)(re - c), "<think>");
        rs = open ? open + 7 : c;
        lstrip_nl(&rs, re);
    }
    puts_(b, "<|im_start|>assistant\n");
    /* the template keeps the reasoning of replies after the last user message: the last one
     * always, the others when they have some */
    if (after_query && (is_last || re > rs)) {
        puts_(b, "<think>\n");
        qmm_buf_put(b, rs, (size_t)(re - rs));
        puts_(b, "\n</think>\n\n");
        lstrip_nl(&cs, ce);
    }
    qmm_buf_put(b, cs, (size_t)(ce - cs));
    puts_(b, "<|im_end|>\n");
}

qmm_status qmm_chat_render(const qmm_tokenizer *t, const qmm_chat_message *msgs, int count,
                           int add_generation_prompt, int enable_thinking, char **text,
                           size_t *len)
{
    if (!t || (!msgs && count) || !text || !len)
        return qmm_fail(QMM_ERR_NULL, "qmm_chat_render: NULL argument");
    if (!t->chat_qwen3)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "no Qwen3 chat template (tokenizer_config.json "
                        "beside tokenizer.json, with <|im_start|>, <think> and enable_thinking)");
    if (count < 0) return qmm_fail(QMM_ERR_ARG, "qmm_chat_render: count = %d", count);
    int last_query = count - 1;
    for (int i = 0; i < count; i++) {
        const char *r = msgs[i].role;
        if (!r || !msgs[i].content)
            return qmm_fail(QMM_ERR_NULL, "qmm_chat_render: message %d has no role or content", i);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))
            return qmm_fail(QMM_ERR_ARG, "message %d: role \"%s\" (system, user or assistant)",
                            i, r);
        if (!strcmp(r, "user")) last_query = i;
    }
    qmm_buf b = {0};
    puts_(&b, "");
    for (int i = 0; i < count; i++) {
        const char *r = msgs[i].role, *c = msgs[i].content;
        if (!strcmp(r, "assistant")) {
            put_assistant(&b, c, i > last_query, i == count - 1);
            continue;
        }
        puts_(&b, "<|im_start|>");
        puts_(&b, r);
        puts_(&b, "\n");
        puts_(&b, c);
        puts_(&b, "<|im_end|>\n");
    }
    if (add_generation_prompt) {
        puts_(&b, "<|im_start|>assistant\n");
        if (!enable_thinking) puts_(&b, "<think>\n\n</think>\n\n");
    }
    if (b.oom) {
        free(b.p);
        return qmm_fail(QMM_ERR_NOMEM, "qmm_chat_render: out of memory");
    }
    *text = b.p;
    *len = b.len;
    qmm_clear_error();
    return QMM_OK;
}
