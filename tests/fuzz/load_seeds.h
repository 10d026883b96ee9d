/* Seeds of the whole-load fuzz target (fuzz_load.c): tiny but complete MLX checkpoints, each one
 * input = u16 LE length of config.json + config.json + model.safetensors image. */
#ifndef QMM_FUZZ_LOAD_SEEDS_H
#define QMM_FUZZ_LOAD_SEEDS_H

#include <stddef.h>

/* Seed i (0, 1, ...) into a malloc'd buffer; its size, or 0 past the last seed. */
size_t fuzz_load_seed(int i, unsigned char **out);

/* Splits an input into its config text and safetensors image; 0 when too short. */
int fuzz_load_split(const unsigned char *data, size_t size, const char **cfg, size_t *cfg_len,
                    const unsigned char **image, size_t *image_len);

#endif
