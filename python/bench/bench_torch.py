"""qmm from Python on a GPU, beside torch (issue #15's benchmark).

* Operators: qmm.torch.matmul (W4A16, groups of 128) beside torch.matmul on the dequantized bf16
  weight and torch's int4 kernel (aten._weight_int4pack_mm, tinygemm; same weights: zero = bias +
  8·scale) on the Qwen3-4B projections. Cold weights: the calls rotate over copies totalling at
  least 4× the L2. Each contender is checked against the fp32 product of the dequantized weight,
  then timed as a CUDA graph of the calls (median of the replays, per call) and eagerly (the
  difference is the Python-call overhead).
* Model (--hf, needs transformers): an HF Qwen3 with Qwen3-4B widths, random bf16 weights, its
  linears swapped for qmm.torch.Linear, beside the plain bf16 model: prefill and greedy decode
  tok/s.

usage: python python/bench/bench_torch.py [--m 1,8,64,256,2048] [--reps 9] [--hf]
       [--hf-layers 4] [--out report.md] [--json report.json]
Needs a CUDA build of libqmm.so (QMM_LIBRARY, or beside the package) and torch with CUDA.
"""
import argparse
import copy
import json
import statistics
import sys
import time

import numpy as np
import torch

import qmm
import qmm.torch as qt

PROJ = {"q": (2560, 4096), "k": (2560, 1024), "o": (4096, 2560), "gate": (2560, 9728),
        "down": (9728, 2560)}  # name: (K, N)
GROUP = 128


def weights(n, k, copies, seed):
    """copies of a random W [n, k]: the qmm weight (uploaded), its dequantized bf16 form, and
    torch's int4 packing of the same codes (None where this torch lacks it, with why)."""
    out, why = [], None
    r = np.random.default_rng(seed)
    for _ in range(copies):
        w = qmm.quantize((r.standard_normal((n, k)) * 0.02).astype(np.float32), GROUP)
        qt.upload(w, torch.device("cuda"))
        wd = torch.from_numpy(qmm.dequantize(w)).to("cuda", torch.bfloat16)
        i4 = None
        if why is None:
            try:
                i4 = int4pack(w)
            except Exception as e:  # torch versions differ in this private API
                why = f"{type(e).__name__}: {e}"
        out.append((w, wd, i4))
    return out, why


def int4pack(w):
    """tinygemm's layout of the qmm weight's codes: dequant (q - 8)·scale + zero = scale·q + bias."""
    n, k = w.shape
    shifts = np.arange(8, dtype=np.uint32) * 4
    codes = ((w.packed[:, :, None] >> shifts) & 0xF).reshape(n, k).astype(np.int32)
    q = torch.from_numpy(codes).cuda()
    packed = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
    packed = torch.ops.aten._convert_weight_to_int4pack(packed, 8)
    s = torch.from_numpy(qmm.bf16_to_f32(w.scales)).cuda()
    b = torch.from_numpy(qmm.bf16_to_f32(w.biases)).cuda()
    sz = torch.stack([s, b + 8 * s], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, sz


def contenders(a, w, wd, i4):
    calls = {"qmm": lambda: qt.matmul(a, w), "torch bf16": lambda: a @ wd.t()}
    if i4 is not None:
        calls["torch int4"] = lambda: torch.ops.aten._weight_int4pack_mm(a, i4[0], GROUP, i4[1])
    return calls


def timed(fns, reps):
    """Per-call µs of fns run in order: (graph median, eager median)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    graph, eager = [], []
    for _ in range(reps):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        graph.append(start.elapsed_time(end) * 1e3 / len(fns))
        start.record()
        for f in fns:
            f()
        end.record()
        end.synchronize()
        eager.append(start.elapsed_time(end) * 1e3 / len(fns))
    return statistics.median(graph), statistics.median(eager)


def bench_ops(ms, reps, l2_bytes):
    rows = []
    for name, (k, n) in PROJ.items():
        copies = max(2, -(-4 * l2_bytes // (n * k // 2)))
        ws, why = weights(n, k, copies, seed=len(rows) + 1)
        for m in ms:
            a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            want = a.float() @ ws[0][1].float().t()
            row = {"proj": name, "k": k, "n": n, "m": m, "copies": copies}
            for label in contenders(a, *ws[0]):
                got = contenders(a, *ws[0])[label]().float()
                err = ((got - want).norm() / want.norm()).item()
                fns = [contenders(a, *wc)[label] for wc in ws]
                gr, ea = timed(fns, reps)
                row[label] = {"graph_us": gr, "eager_us": ea, "rel_err": err}
            if why:
                row["torch int4"] = {"unavailable": why}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def bench_hf(layers, prompt, new):
    try:
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        return {"unavailable": f"transformers: {e}"}
    cfg = Qwen3Config(hidden_size=2560, intermediate_size=9728, num_hidden_layers=layers,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                      vocab_size=151936, tie_word_embeddings=True, torch_dtype=torch.bfloat16)
    torch.manual_seed(0)
    base = Qwen3ForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    quant = copy.deepcopy(base)
    swapped = qt.replace_linears(quant, GROUP)
    ids = torch.randint(0, cfg.vocab_size, (1, prompt), device="cuda")
    out = {"layers": layers, "prompt": prompt, "new": new, "swapped": len(swapped)}
    for label, model in (("bf16", base), ("qmm", quant)):
        with torch.no_grad():
            model(ids)  # warm-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(ids)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            toks = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
        # generate: one prefill (its time measured just before) and new - 1 decode steps
        out[label] = {"prefill_tok_s": prompt / (t1 - t0),
                      "decode_tok_s": (new - 1) / (t2 - t1 - (t1 - t0)),
                      "tokens": toks[0, prompt:].tolist()}
        print(json.dumps({label: out[label]["prefill_tok_s"]}), flush=True)
    out["same_tokens"] = out["bf16"]["tokens"] == out["qmm"]["tokens"]
    return out


def report(rows, hf, meta):
    lines = [f"# qmm from Python: {meta['gpu']}, torch {meta['torch']}, qmm {meta['qmm']}", "",
             "µs per call (CUDA graph median; eager in brackets: eager − graph is the Python "
             "overhead); rel. err. vs the fp32 product of the dequantized weight.", "",
             "| proj | M | qmm | torch bf16 | torch int4 | qmm × bf16 |", "|---|---:|---|---|---|---:|"]
    for r in rows:
        cell = lambda c: (f"{r[c]['graph_us']:.2f} [{r[c]['eager_us']:.1f}] ({r[c]['rel_err']:.1e})"
                          if c in r and "graph_us" in r[c] else "–")
        ratio = r["torch bf16"]["graph_us"] / r["qmm"]["graph_us"]
        lines.append(f"| {r['proj']} | {r['m']} | {cell('qmm')} | {cell('torch bf16')} | "
                     f"{cell('torch int4')} | {ratio:.2f} |")
    if hf:
        lines += ["", "HF Qwen3 (Qwen3-4B widths): " + json.dumps(
            {k: v for k, v in hf.items() if k not in ("bf16", "qmm")})]
        for label in ("bf16", "qmm"):
            if label in hf:
                lines.append(f"* {label}: prefill {hf[label]['prefill_tok_s']:.0f} tok/s, decode "
                             f"{hf[label]['decode_tok_s']:.1f} tok/s")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", default="1,8,64,256,2048")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--hf", action="store_true")
    p.add_argument("--hf-layers", type=int, default=4)
    p.add_argument("--out")
    p.add_argument("--json")
    o = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_torch: no CUDA device")
    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "torch": torch.__version__, "qmm": qmm.version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    rows = bench_ops([int(x) for x in o.m.split(",")], o.reps,
                     getattr(props, "L2_cache_size", 60 << 20))
    hf = bench_hf(o.hf_layers, 128, 64) if o.hf else None
    text = report(rows, hf, meta)
    print(text)
    if o.out:
        open(o.out, "w").write(text)
    if o.json:
        json.dump({"meta": meta, "ops": rows, "hf": hf}, open(o.json, "w"), indent=1)


if __name__ == "__main__":
    main()
