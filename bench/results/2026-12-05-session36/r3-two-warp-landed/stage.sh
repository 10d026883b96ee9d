#!/usr/bin/env bash
# Packs this call into devbin/n.tar.xz (run from the repository root at the commit it times):
#   n/        HEAD (row 193's rule: two producer warps at 8-16 tokens above two CTAs a SM):
#             qmm, gpu_sm90, test_ops
#   n/base/   qmm of the previous call's HEAD d9d3cd2 (one warp everywhere), from devbin/m.tar.xz
#   n/lib     the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tests="test_ops gpu_sm90"
ninja -C build qmm $tests >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s36n && rm -rf "$tmp" && mkdir -p "$tmp/n/base"
for t in qmm $tests; do cp "build/$t" "$tmp/n/"; done
tar -xJf devbin/m.tar.xz -C "$tmp" m/qmm && mv "$tmp/m/qmm" "$tmp/n/base/qmm"
bash bench/carry-libs.sh "$tmp/n" >/dev/null
tar -C "$tmp" -cf - n | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/n.tar.xz
ls -la devbin/n.tar.xz
