#!/usr/bin/env bash
# Packs the session's last call into devbin/p.tar.xz (run from the repository root at the commit
# it checks): p/ HEAD's qmm and GPU tests, p/lib the tokenizer's libraries.
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tests="test_ops gpu_kernels gpu_llm gpu_llm_decode_ops gpu_llm_offload gpu_matvec_args gpu_pipeline"
ninja -C build qmm $tests >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s36p && rm -rf "$tmp" && mkdir -p "$tmp/p"
for t in qmm $tests; do cp "build/$t" "$tmp/p/"; done
bash bench/carry-libs.sh "$tmp/p" >/dev/null
tar -C "$tmp" -cf - p | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/p.tar.xz
ls -la devbin/p.tar.xz
