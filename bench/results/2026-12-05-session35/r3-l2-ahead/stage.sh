#!/usr/bin/env bash
# Packs the session's third call into devbin/i.tar.xz (run from the repository root):
#   i/qmm         HEAD (the early trigger, NOTES row 187)
#   i/base/qmm    the landed a65be02 binary out of devbin/c.tar.xz (session 34)
#   i/l8, i/l24   HEAD with l2-ahead.patch, -DQMM_MV_L2_AHEAD=8 / 24 (row 189); i/l8 also
#                 gpu_llm and test_ops
#   i/lib         the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
dir=bench/results/2026-12-05-session35/r3-l2-ahead
ninja -C build qmm >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s35c && rm -rf "$tmp" && mkdir -p "$tmp/i/base" "$tmp/i/l8" "$tmp/i/l24"
cp build/qmm "$tmp/i/"
git apply "$dir/l2-ahead.patch"
trap 'git apply -R "$dir/l2-ahead.patch"' EXIT
TESTS="gpu_llm test_ops" bash bench/variant.sh s35l8 "-DQMM_MV_L2_AHEAD=8" cuda/matvec.cu >/dev/null
bash bench/variant.sh s35l24 "-DQMM_MV_L2_AHEAD=24" cuda/matvec.cu >/dev/null
git apply -R "$dir/l2-ahead.patch" && trap - EXIT
cp /tmp/var/s35l8/qmm /tmp/var/s35l8/gpu_llm /tmp/var/s35l8/test_ops "$tmp/i/l8/" && cp /tmp/var/s35l24/qmm "$tmp/i/l24/"
tar -xJf devbin/c.tar.xz -C "$tmp" c/qmm && mv "$tmp/c/qmm" "$tmp/i/base/qmm"
bash bench/carry-libs.sh "$tmp/i" >/dev/null
tar -C "$tmp" -cf - i | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/i.tar.xz # one window over all
ls -la devbin/i.tar.xz
