#!/usr/bin/env bash
# Packs devbin/r.tar.xz for cmds_a.txt and cmds_b.txt (run from the repository root at the commit under test):
#   r/       HEAD's qmm, gpu_sm90, test_ops, gpu_llm_decode_steps and the cluster_fuse probe
#   r/rows/  HEAD built with -DQMM_EXP_ACT_ROWS (NOTES row 200): qmm, gpu_sm90, test_ops
#   r/ad4/   HEAD built with -DQMM_AD_GROUP_BLOCK (NOTES row 201): qmm, gpu_llm_decode_ops
#   r/lib    the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
ninja -C build qmm gpu_sm90 test_ops gpu_llm_decode_steps cluster_fuse >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s38r && rm -rf "$tmp" && mkdir -p "$tmp/r/rows" "$tmp/r/ad4"
cp build/qmm build/gpu_sm90 build/test_ops build/gpu_llm_decode_steps build/cluster_fuse "$tmp/r/"
TESTS="gpu_sm90 test_ops" bash bench/variant.sh s38rows "-DQMM_EXP_ACT_ROWS" cuda/gemm_sm90.cu >/dev/null
cp /tmp/var/s38rows/qmm /tmp/var/s38rows/gpu_sm90 /tmp/var/s38rows/test_ops "$tmp/r/rows/"
TESTS=gpu_llm_decode_ops bash bench/variant.sh s38ad4 "-DQMM_AD_GROUP_BLOCK" llm/cuda/attention_decode.cu >/dev/null
cp /tmp/var/s38ad4/qmm /tmp/var/s38ad4/gpu_llm_decode_ops "$tmp/r/ad4/"
bash bench/carry-libs.sh "$tmp/r" >/dev/null
tar -C "$tmp" -cf - r | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/r.tar.xz
ls -la devbin/r.tar.xz
