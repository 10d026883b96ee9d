/*
 * libFuzzer harness for the whole checkpoint load: the input is a config.json text and a
 * model.safetensors image (u16 LE config length, config, image; see load_seeds.c). The config is
 * parsed, the header validated, every tensor bound against the config, and a model that loads
 * generates 2 tokens on the CPU. Any input must end in a status (with a message) or tokens,
 * never a crash, a leak or a read outside the input.
 *
 * Run by tests/fuzz/run.sh (CI: a short time-boxed run) and replayed by tests/test_fuzz_load.c
 * (the seeds, a bounded mutation loop, and load_regress.bin: crashers, records of u32 LE length +
 * bytes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"
#include "load_seeds.h"
#include "qmm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 0: refused with a message, 1: loaded and generated, -1: a failure without a message. */
int fuzz_load_one(const uint8_t *data, size_t size)
{
    const char *cfg;
    const unsigned char *img;
    size_t cl, il;
    if (!fuzz_load_split(data, size, &cfg, &cl, &img, &il)) return 0;
    /* private copies of exactly the given bytes, so a read past either is caught */
    char *c = malloc(cl ? cl : 1);
    unsigned char *im = malloc(il ? il : 1);
    memcpy(c, cfg, cl);
    memcpy(im, img, il);
    qmm_llm_model *m = NULL;
    qmm_status st = llm_model_load_image(c, cl, im, il, &m);
    int rc = 0;
    if (st) {
        rc = qmm_last_error()[0] ? 0 : -1;
    } else {
        const qmm_llm_config *k = qmm_llm_model_config(m);
        int32_t ids[2] = {0, (int32_t)(1 % k->vocab_size)}, out[2] = {-1, -1};
        qmm_llm_cpu_session *s = NULL;
        st = qmm_llm_cpu_session_create(m, 3, 1, &s);
        if (!st) st = qmm_llm_cpu_generate(s, ids, 2, 2, out, NULL);
        qmm_llm_cpu_session_destroy(s);
        if (!st && (out[0] < 0 || out[0] >= k->vocab_size || out[1] < 0 || out[1] >= k->vocab_size))
            abort(); /* tokens out of the vocabulary */
        rc = st ? (qmm_last_error()[0] ? 0 : -1) : 1;
    }
    qmm_llm_model_destroy(m);
    free(c);
    free(im);
    return rc;
}

#ifndef FUZZ_LOAD_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_load_one(data, size) < 0) abort(); /* a failure must say why */
    return 0;
}
#endif
