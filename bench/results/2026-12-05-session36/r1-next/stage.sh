#!/usr/bin/env bash
# Packs the next session's first call into devbin/k.tar.xz (run from the repository root):
#   k/            HEAD (row 187's matvec trigger, the matvecs' in-graph profile rows): qmm and
#                 the tests the cmds name
#   k/base/qmm    the landed a65be02 binary out of devbin/c.tar.xz (session 34)
#   k/e/          HEAD with sm90-early.patch, -DQMM_SM90_EARLY_TRIGGER (NOTES row 190): qmm,
#                 gpu_sm90 (its back-to-back PDL chain against synchronized calls, bitwise)
#   k/lib         the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
dir=bench/results/2026-12-05-session35/r5-next
tests="test_ops gpu_sm90 gpu_llm gpu_llm_persistent gpu_llm_decode_steps"
ninja -C build qmm $tests >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s35e && rm -rf "$tmp" && mkdir -p "$tmp/k/base" "$tmp/k/e"
for t in qmm $tests; do cp "build/$t" "$tmp/k/"; done
git apply "$dir/sm90-early.patch"
trap 'git apply -R "$dir/sm90-early.patch"' EXIT
TESTS=gpu_sm90 bash bench/variant.sh s35e "-DQMM_SM90_EARLY_TRIGGER" cuda/gemm_sm90.cu >/dev/null
git apply -R "$dir/sm90-early.patch" && trap - EXIT
cp /tmp/var/s35e/qmm /tmp/var/s35e/gpu_sm90 "$tmp/k/e/"
tar -xJf devbin/c.tar.xz -C "$tmp" c/qmm && mv "$tmp/c/qmm" "$tmp/k/base/qmm"
bash bench/carry-libs.sh "$tmp/k" >/dev/null
tar -C "$tmp" -cf - k | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/k.tar.xz # one window over all
ls -la devbin/k.tar.xz
