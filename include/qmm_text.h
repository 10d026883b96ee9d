/*
 * qmm text: the Qwen3 tokenizer, chat template, generation settings and sampling (included by
 * qmm.h; do not include directly).
 *
 * Tokenizer: the byte-level BPE of a Hugging Face tokenizer.json (model.type "BPE", normalizer
 * NFC, pre-tokenizer Split(regex, Isolated) + ByteLevel, decoder ByteLevel) as Qwen3 ships it.
 * Encoding: added tokens (<|im_start|>, <think>, ...) are matched first (leftmost, longest), the
 * text between them is NFC-normalized, split by the pre-tokenizer regex (PCRE2, UTF + UCP), each
 * piece mapped byte by byte to the ByteLevel alphabet and merged by rank. The ids equal those of
 * HF `tokenizers` on valid UTF-8 (tested on the real Qwen3 files). Invalid UTF-8 is not replaced:
 * each invalid byte is a piece of its own (its byte token), the valid runs between them are
 * encoded as if they stood alone, so decode(encode(s)) == NFC(s) byte for byte for any input.
 * Every file is untrusted: sizes, ids and shapes are checked, errors say which file and what.
 */
#ifndef QMM_TEXT_H
#define QMM_TEXT_H

#ifdef __cplusplus
extern "C" {
#endif

/* "0.3.0"-style version of this library. */
const char *qmm_version(void);

/* ---- tokenizer ------------------------------------------------------------------------------ */

typedef struct qmm_tokenizer qmm_tokenizer;

/* path: a model directory (tokenizer.json inside; tokenizer_config.json beside it is read for the
 * chat template when present) or a tokenizer.json file. Unsupported tokenizer kinds (another
 * model type, normalizer, pre-tokenizer or decoder; byte fallback; added tokens with lstrip,
 * rstrip or single_word) are QMM_ERR_UNSUPPORTED naming what; malformed files QMM_ERR_FORMAT. */
qmm_status qmm_tokenizer_load(const char *path, qmm_tokenizer **out);
void qmm_tokenizer_destroy(qmm_tokenizer *t);

/* One past the largest id (vocabulary and added tokens). */
int64_t qmm_tokenizer_vocab_size(const qmm_tokenizer *t);

/* text[len] (any bytes) -> *ids[*n], malloc'd (free() it; NULL when *n == 0). */
qmm_status qmm_tokenizer_encode(const qmm_tokenizer *t, const char *text, size_t len,
                                int32_t **ids, int64_t *n);
/* ids[n] -> *text[*len] (malloc'd and NUL-terminated; the bytes exactly, invalid UTF-8 kept).
 * An id outside the vocabulary is QMM_ERR_RANGE. */
qmm_status qmm_tokenizer_decode(const qmm_tokenizer *t, const int32_t *ids, int64_t n,
                                char **text, size_t *len);
/* The id of a token given by its text: an added token's content ("<|im_end|>") or a vocabulary
 * entry in the ByteLevel alphabet. QMM_ERR_NOT_FOUND when absent. */
qmm_status qmm_tokenizer_token_id(const qmm_tokenizer *t, const char *token, int32_t *id);
/* 1 when id is an added token marked special (<|endoftext|>, <|im_end|>, ...). */
int qmm_tokenizer_is_special(const qmm_tokenizer *t, int32_t id);

/* Incremental decoding for streaming: push ids one by one and print what comes back. Complete
 * UTF-8 characters only: bytes of a character split across tokens are held until it is whole;
 * bytes that can never form a valid character come out as U+FFFD. */
typedef struct qmm_text_stream qmm_text_stream;
qmm_status qmm_text_stream_create(const qmm_tokenizer *t, qmm_text_stream **out);
void qmm_text_stream_destroy(qmm_text_stream *s);
/* *text[*len] is valid until the next call on s (not NUL-terminated; *len may be 0). */
qmm_status qmm_text_stream_push(qmm_text_stream *s, int32_t id, const char **text, size_t *len);
/* End of the stream: held bytes of an incomplete character come out as U+FFFD. */
qmm_status qmm_text_stream_flush(qmm_text_stream *s, const char **text, size_t *len);

/* ---- chat template -------------------------------------------------------------------------- */

typedef struct qmm_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8 */
} qmm_chat_message;

/* The Qwen3 chat template (tokenizer_config.json's chat_template, without tools), written in C:
 *   [<|im_start|>system\nS<|im_end|>\n]  <|im_start|>user\nU<|im_end|>\n
 *   <|im_start|>assistant\nA<|im_end|>\n ... and with add_generation_prompt
 *   <|im_start|>assistant\n  plus <think>\n\n</think>\n\n when thinking is off.
 * Assistant contents lose their <think>...</think> part (as the template does). The tokenizer
 * must have loaded a Qwen3-style template (QMM_ERR_UNSUPPORTED otherwise). *text is malloc'd. */
qmm_status qmm_chat_render(const qmm_tokenizer *t, const qmm_chat_message *msgs, int count,
                           int add_generation_prompt, int enable_thinking, char **text,
                           size_t *len);

/* ---- generation settings and sampling --------------------------------------------------------- */

#define QMM_MAX_EOS 8

typedef struct qmm_sampling {
    double temperature; /* 0: greedy (argmax) */
    int64_t top_k;      /* keep the k most likely (0: all) */
    double top_p;       /* keep the smallest most-likely set of mass >= top_p (1: all) */
    double min_p;       /* drop tokens below min_p x the largest probability (0: none) */
} qmm_sampling;

typedef struct qmm_generation_config {
    qmm_sampling sampling;
    int eos_count;
    int32_t eos[QMM_MAX_EOS]; /* generation stops after any of these */
} qmm_generation_config;

/* Defaults (greedy, no EOS), then dir/generation_config.json (do_sample, temperature, top_k,
 * top_p, min_p, eos_token_id: a number or a list) and, for eos when that file names none,
 * dir/config.json's eos_token_id. Missing files are fine; malformed ones are QMM_ERR_FORMAT. */
qmm_status qmm_generation_config_load(const char *dir, qmm_generation_config *out);

/* The distribution sampling draws from, into probs[n] (the reference the sampler is tested
 * against): softmax(logits / temperature), then top-k, top-p, min-p (this order, as HF
 * transformers), renormalized; ties at a cut keep the lower ids. Temperature 0: one-hot argmax.
 * NaN logits never win; all NaN is QMM_ERR_RANGE. */
qmm_status qmm_sampling_probs(const float *logits, int64_t n, const qmm_sampling *s,
                              float *probs);

typedef struct qmm_sampler qmm_sampler;
/* Scratch for a vocabulary of n and a random stream from seed (the same seed, the same draws). */
qmm_status qmm_sampler_create(int64_t n, const qmm_sampling *s, uint64_t seed,
                              qmm_sampler **out);
void qmm_sampler_destroy(qmm_sampler *sp);
/* One token drawn from qmm_sampling_probs(logits) (logits[n] are not modified). */
qmm_status qmm_sampler_sample(qmm_sampler *sp, const float *logits, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif
