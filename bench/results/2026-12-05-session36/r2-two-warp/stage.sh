#!/usr/bin/env bash
# Packs this call into devbin/m.tar.xz (run from the repository root, with the tree at the commit
# that holds the QMM_SM90_TWO_WARP_START branch, compiled out by default):
#   m/      HEAD: qmm, gpu_sm90, test_ops
#   m/tw/   HEAD built with -DQMM_SM90_TWO_WARP_START (NOTES row 193): qmm, gpu_sm90, test_ops
#   m/lib   the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tests="test_ops gpu_sm90"
ninja -C build qmm $tests >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s36m && rm -rf "$tmp" && mkdir -p "$tmp/m/tw"
for t in qmm $tests; do cp "build/$t" "$tmp/m/"; done
TESTS="$tests" bash bench/variant.sh s36tw "-DQMM_SM90_TWO_WARP_START" cuda/gemm_sm90.cu >/dev/null
for t in qmm $tests; do cp "/tmp/var/s36tw/$t" "$tmp/m/tw/"; done
bash bench/carry-libs.sh "$tmp/m" >/dev/null
tar -C "$tmp" -cf - m | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/m.tar.xz
ls -la devbin/m.tar.xz
