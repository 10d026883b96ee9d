#!/usr/bin/env python3
"""MLX reference data for qmm's tests (tests/test_mlx_reference.c, tests/gpu_mlx_reference.c).

Builds small Qwen3 models in mlx_lm with seeded random weights, quantizes them with mlx_lm's own
quantize_model at group sizes 64 and 128, saves them with mlx_lm's save_model / save_config (the
files `mlx_lm.convert` writes), loads each back with mlx_lm.utils.load_model, and records what MLX
computes: last-token logits and a greedy continuation for a few prompts. Also writes random
packed codes, scales and biases with mx.dequantize's output at group sizes 32, 64 and 128.

    make_reference.py OUT_DIR [--qmm PATH_TO_QMM_CLI]

OUT_DIR/<name>/            the model directory, exactly as mlx_lm saved it
OUT_DIR/<name>.ref.safetensors
    prompt.<i> int32 [L], tokens.<i> int32 [STEPS]   greedy continuation (MLX, float32 compute)
    logits.<i> f32 [vocab]                           last prompt token, MLX float32 compute
    logits_bf16.<i> f32 [vocab]                      the same, MLX computing in bf16 as saved
    tokens_bf16.<i> int32 [STEPS]                    MLX's bf16 greedy continuation (reported)
OUT_DIR/g64-bf16/             the g64 model's weights before quantization (mlx_lm save_model)
OUT_DIR/qmm-g64/              with --qmm: `qmm quantize-checkpoint --group-size 64` of g64-bf16,
                              loaded back by mlx_lm (strict) and recorded like the others
OUT_DIR/dequant.safetensors   per group g: packed.g uint32, scales.g bf16, biases.g bf16,
    dq_bf16.g bf16 (mx.dequantize on the bf16 scales), dq_f32.g f32 (on f32 scales)
OUT_DIR/OK                    written last: the data is complete

Exit status: 0 done; 77 the MLX wheels are missing outside CI (the C tests skip); 1 otherwise
(in CI, CI=true, missing wheels are a failure: the test must not skip there).
"""
import json
import os
import sys

STEPS = 16
PROMPTS = 3

# name: (group size, tied embeddings, shard size limit in bytes or None, per-layer overrides)
MODELS = {
    # mlx_lm.convert's defaults: groups of 64, one file; tied as Qwen3-0.6B..4B are
    "g64": (64, True, None, {}),
    # groups of 128 (the CUDA kernels' group), untied head as Qwen3-8B, sharded with an index
    "g128": (128, False, 600 << 10, {}),
    # a mixed recipe: groups of 64 with per-layer overrides recorded in config.json
    "g64-mixed": (64, True, None, {"model.layers.0.mlp.down_proj": 32,
                                   "model.layers.1.self_attn.q_proj": 128}),
}

ARGS = dict(model_type="qwen3", hidden_size=256, num_hidden_layers=3, intermediate_size=768,
            num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
            vocab_size=8192, max_position_embeddings=4096, rope_theta=1000000.0)


def fail(msg):
    if os.environ.get("CI"):
        print("FAIL: " + msg + " (CI installs them: bash .ci/run)", file=sys.stderr)
        sys.exit(1)
    print("SKIP: " + msg, file=sys.stderr)
    sys.exit(77)


try:
    import numpy as np
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_unflatten
    import mlx_lm.utils as mlu
    from mlx_lm.models import qwen3
    from mlx_lm.models.cache import make_prompt_cache
except Exception as e:  # noqa: BLE001 - any import failure means the wheels are not usable
    fail("the MLX wheels (mlx, mlx-cpu, mlx-lm; tests/mlx/requirements.txt) cannot be "
         "imported: %s" % e)


def random_weights(model, seed):
    """Seeded weights that make every layer matter: linears ~ N(0, 0.6/sqrt(K)), embedding and
    head N(0, 0.05) (small beside the layers' outputs, so a tied head does not just echo the
    last token), norms 1 +- 0.1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in tree_flatten(model.parameters()):
        shape = p.shape
        if name.endswith("norm.weight"):
            v = 1.0 + 0.1 * rng.uniform(-1, 1, size=shape)
        elif "embed_tokens" in name or name.startswith("lm_head"):
            v = rng.normal(0, 0.05, size=shape)
        else:
            v = rng.normal(0, 0.6 / np.sqrt(shape[-1]), size=shape)
        out[name] = mx.array(v.astype(np.float32)).astype(mx.bfloat16)
    model.update(tree_unflatten(list(out.items())))


def small_shards(limit):
    def make_shards(weights, max_file_size_gb=0):
        shards, size = [], 0
        for k, v in weights.items():
            if not shards or size + v.nbytes > limit:
                shards.append({})
                size = 0
            shards[-1][k] = v
            size += v.nbytes
        return shards
    return make_shards


def build(name, out_dir, seed):
    group, tied, shard_limit, overrides = MODELS[name]
    args = dict(ARGS, tie_word_embeddings=tied)
    mx.random.seed(seed)
    model = qwen3.Model(qwen3.ModelArgs(**args))
    random_weights(model, seed)
    config = dict(args, architectures=["Qwen3ForCausalLM"], hidden_act="silu",
                  attention_bias=False, torch_dtype="bfloat16")

    def predicate(path, module):
        if path in overrides:
            return {"group_size": overrides[path], "bits": 4, "mode": "affine"}
        return True

    if name == "g64":  # the same weights unquantized: qmm quantize-checkpoint's input
        bf16 = os.path.join(out_dir, name + "-bf16")
        mlu.save_model(bf16, model)
        mlu.save_config(dict(config), os.path.join(bf16, "config.json"))
        for side in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            with open(os.path.join(bf16, side), "w") as f:
                json.dump({"file": side}, f)
    model, config = mlu.quantize_model(model, config, group, 4,
                                       quant_predicate=predicate if overrides else None)
    path = os.path.join(out_dir, name)
    saved = mlu.make_shards
    if shard_limit:
        mlu.make_shards = small_shards(shard_limit)
    try:
        mlu.save_model(path, model)
    finally:
        mlu.make_shards = saved
    mlu.save_config(config, os.path.join(path, "config.json"))
    return path


def last_logits(model, ids):
    return model(mx.array([ids]))[0, -1].astype(mx.float32)


def greedy(model, ids):
    """Prefill, then one token at a time through mlx_lm's KV cache (as mlx_lm.generate runs)."""
    cache = make_prompt_cache(model)
    lg = np.array(model(mx.array([ids]), cache=cache)[0, -1].astype(mx.float32))
    toks, margins = [], []
    for step in range(STEPS):
        top = np.argsort(lg)[::-1][:2]
        toks.append(int(top[0]))
        margins.append(float(lg[top[0]] - lg[top[1]]) / float(np.sqrt(np.mean(lg * lg))))
        if step + 1 < STEPS:
            lg = np.array(model(mx.array([[toks[-1]]]), cache=cache)[0, -1].astype(mx.float32))
    return toks, min(margins)


def rel(a, b):
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    return float(np.sqrt(np.sum((a - b) ** 2) / np.sum(b * b)))


def check_qmm_checkpoint(qmm, out_dir):
    """qmm quantize-checkpoint on the bf16 weights: mlx_lm must load the result (strict), with
    the tokenizer files beside it, and its logits must be as close to the unquantized model's
    as those of MLX's own quantization (a misread layout would be off by ~100 %)."""
    import subprocess
    src, dst = os.path.join(out_dir, "g64-bf16"), os.path.join(out_dir, "qmm-g64")
    subprocess.run([qmm, "quantize-checkpoint", "--in", src, "--out", dst, "--group-size", "64"],
                   check=True)
    for side in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        with open(os.path.join(src, side)) as a, open(os.path.join(dst, side)) as b:
            if a.read() != b.read():
                raise SystemExit("qmm-g64/%s is not a copy of the input's" % side)
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("quantization", {}).get("group_size") != 64 or \
            cfg.get("quantization_config") != cfg.get("quantization"):
        raise SystemExit("qmm-g64/config.json: quantization %r" % cfg.get("quantization"))
    ref = {}
    for name in ("g64-bf16", "g64", "qmm-g64"):
        m, _ = mlu.load_model(mlu.Path(os.path.join(out_dir, name)))
        m.set_dtype(mx.float32)
        ref[name] = m
    rng = np.random.default_rng(5)
    worst_q, worst_m = 0.0, 0.0
    for _ in range(PROMPTS):
        ids = [int(x) for x in rng.integers(0, ARGS["vocab_size"], size=8)]
        exact = last_logits(ref["g64-bf16"], ids)
        worst_m = max(worst_m, rel(last_logits(ref["g64"], ids), exact))
        worst_q = max(worst_q, rel(last_logits(ref["qmm-g64"], ids), exact))
    print("  qmm-g64 (qmm quantize-checkpoint, loaded by mlx_lm): logits vs the bf16 model %.3f, "
          "MLX's own quantization %.3f" % (worst_q, worst_m))
    if not worst_q <= 1.25 * worst_m + 0.01:
        raise SystemExit("qmm's quantization is much worse than MLX's as MLX reads it")
    return dst


def reference(name, path, seed):
    """Load the directory back with mlx_lm and record MLX's outputs. Prompts are drawn from a
    seeded generator; a prompt whose greedy continuation has a near tie (top-2 gap below 2 % of
    the logits' RMS, where fp32 summation order alone could flip the argmax) is replaced by the
    next one, so the token comparison tests the model, not rounding."""
    model, _ = mlu.load_model(mlu.Path(path))
    model32, _ = mlu.load_model(mlu.Path(path))
    model32.set_dtype(mx.float32)  # scales and biases widen exactly; the codes stay uint32
    vocab = ARGS["vocab_size"]
    rng = np.random.default_rng(seed + 1000)
    out, kept, tried = {}, 0, 0
    while kept < PROMPTS:
        tried += 1
        if tried > 60:
            raise SystemExit("no well-conditioned prompt in 60 tries")
        ids = [int(x) for x in rng.integers(0, vocab, size=int(rng.integers(3, 12)))]
        toks, margin = greedy(model32, ids)
        if margin < 0.02:
            continue
        toks16, _ = greedy(model, ids)
        out["prompt.%d" % kept] = mx.array(ids, dtype=mx.int32)
        out["tokens.%d" % kept] = mx.array(toks, dtype=mx.int32)
        out["logits.%d" % kept] = last_logits(model32, ids)
        out["logits_bf16.%d" % kept] = last_logits(model, ids)
        out["tokens_bf16.%d" % kept] = mx.array(toks16, dtype=mx.int32)
        same = sum(a == b for a, b in zip(toks, toks16))
        print("  %s prompt %d: %d tokens -> %s; min top-2 margin %.3f of RMS; MLX bf16 agrees "
              "on %d/%d" % (name, kept, len(ids), toks, margin, same, STEPS))
        kept += 1
    mx.save_safetensors(path + ".ref.safetensors", out)


def dequant_data(out_dir, seed):
    rng = np.random.default_rng(seed + 7)
    out = {}
    n, k = 48, 1024
    for g in (32, 64, 128):
        packed = rng.integers(0, 2**32, size=(n, k // 8), dtype=np.uint64).astype(np.uint32)
        s = rng.normal(0, 0.05, size=(n, k // g)).astype(np.float32)  # both signs
        b = rng.normal(0, 0.5, size=(n, k // g)).astype(np.float32)
        s[0, 0], b[0, 0] = 0.0, 1.5  # a zero scale: every code gives the bias
        S, B = mx.array(s).astype(mx.bfloat16), mx.array(b).astype(mx.bfloat16)
        P = mx.array(packed)
        out["packed.%d" % g] = P
        out["scales.%d" % g] = S
        out["biases.%d" % g] = B
        out["dq_bf16.%d" % g] = mx.dequantize(P, S, B, group_size=g, bits=4)
        out["dq_f32.%d" % g] = mx.dequantize(P, S.astype(mx.float32), B.astype(mx.float32),
                                             group_size=g, bits=4)
    mx.save_safetensors(os.path.join(out_dir, "dequant.safetensors"), out)


def main():
    if len(sys.argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    qmm = sys.argv[3] if len(sys.argv) == 4 and sys.argv[2] == "--qmm" else None
    os.makedirs(out_dir, exist_ok=True)
    ok = os.path.join(out_dir, "OK")
    if os.path.exists(ok):
        os.remove(ok)
    mx.set_default_device(mx.cpu)
    print("MLX %s on %s; models in %s" % (mx.__version__, mx.default_device(), out_dir))
    for i, name in enumerate(MODELS):
        seed = 1234 + i
        path = build(name, out_dir, seed)
        reference(name, path, seed)
        files = sorted(os.listdir(path))
        with open(os.path.join(path, "config.json")) as f:
            q = json.load(f)["quantization"]
        print("  %s: %s; quantization %s" % (name, ", ".join(files), json.dumps(q)))
    if qmm:
        reference("qmm-g64", check_qmm_checkpoint(qmm, out_dir), 4321)
    dequant_data(out_dir, 99)
    with open(ok, "w") as f:
        f.write("mlx %s\n" % mx.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
