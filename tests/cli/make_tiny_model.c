/* A tiny Qwen3 model directory for the CLI tests: random weights quantized to MLX 4-bit, and a
 * small byte-level tokenizer (256 byte tokens, a few merges, the Qwen3 added tokens) with a
 * Qwen3-style chat template and generation_config.json. Tests may copy the real Qwen3
 * tokenizer.json over it (then give VOCAB >= 151669).
 * usage: make_tiny_model OUT_DIR VOCAB */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm/hf_random.h"
#include "qmm.h"

/* Tiny tokenizer ids: 0..255 bytes, 256.. merges, then the added tokens. */
static const char *merges[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"},
                                  {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}};
static const char *added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"};
#define N_MERGES (int)(sizeof merges / sizeof merges[0])
#define FIRST_ADDED (256 + N_MERGES)

static void put_cp(FILE *f, unsigned cp)
{
    if (cp == '"' || cp == '\\') fprintf(f, "\\%c", cp);
    else if (cp < 0x80) fputc((int)cp, f);
    else fprintf(f, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
}

static int write_tokenizer(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [");
    for (int i = 0; i < 5; i++)
        fprintf(f, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                "\"rstrip\": false, \"normalized\": false, \"special\": %s}", i ? ", " : "",
                FIRST_ADDED + i, added[i], i < 3 ? "true" : "false");
    fprintf(f, "], \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
            "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
            "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
            "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, "
            "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
            "\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]}, "
            "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"dropout\": null, "
            "\"unk_token\": null, \"byte_fallback\": false, \"vocab\": {");
    int n = 0;
    for (unsigned b = 0; b < 256; b++) { /* the ByteLevel alphabet, as tok_bytelevel_table */
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned cp = printable ? b : 256 + (unsigned)n++;
        fprintf(f, "%s\"", b ? ", " : "");
        put_cp(f, cp);
        fprintf(f, "\": %u", b);
    }
    for (int i = 0; i < N_MERGES; i++)
        fprintf(f, ", \"%s%s\": %d", merges[i][0], merges[i][1], 256 + i);
    fprintf(f, "}, \"merges\": [");
    for (int i = 0; i < N_MERGES; i++)
        fprintf(f, "%s[\"%s\", \"%s\"]", i ? ", " : "", merges[i][0], merges[i][1]);
    fprintf(f, "]}}\n");
    return fclose(f) != 0;
}

static int write_text(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fputs(text, f);
    return fclose(f) != 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_tiny_model OUT_DIR VOCAB\n");
        return 2;
    }
    const char *out = argv[1];
    qmm_llm_config c = {.hidden_size = 128, .intermediate_size = 256, .num_layers = 2,
                        .num_heads = 2, .num_kv_heads = 1, .head_dim = 64,
                        .vocab_size = atoll(argv[2]), .max_position_embeddings = 4096,
                        .rope_theta = 1e6, .rms_norm_eps = 1e-6, .tie_word_embeddings = 1};
    char hf[4096];
    snprintf(hf, sizeof hf, "%s.hf", out);
    mkdir(hf, 0755);
    qmm_status st = llm_write_random_hf(hf, &c, 7, ST_BF16);
    if (!st) st = qmm_llm_quantize_checkpoint(hf, out, NULL);
    if (st) {
        fprintf(stderr, "make_tiny_model: %s\n", qmm_last_error());
        return 1;
    }
    char eos[256];
    snprintf(eos, sizeof eos, "{\"eos_token_id\": [%d, %d]}\n", FIRST_ADDED + 2, FIRST_ADDED);
    if (write_tokenizer(out) || write_text(out, "generation_config.json", eos) ||
        write_text(out, "tokenizer_config.json",
                   "{\"chat_template\": \"{{ '<|im_start|>' }} {% if enable_thinking is defined "
                   "%}<think>\\n\\n</think>{% endif %}\", \"eos_token\": \"<|im_end|>\"}\n")) {
        fprintf(stderr, "make_tiny_model: cannot write the tokenizer files in %s\n", out);
        return 1;
    }
    printf("%s: tiny Qwen3 (hidden 128, 2 layers, vocab %lld); tokenizer ids: bytes 0-255, "
           "<|im_end|> %d\n", out, (long long)c.vocab_size, FIRST_ADDED + 2);
    return 0;
}
