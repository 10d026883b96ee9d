#!/usr/bin/env bash
# Packs devbin/r6.tar.xz for cmds.txt (from the repository root, at the commit under test):
#   r/       HEAD built with -DQMM_EXP_ACT_ROWS (NOTES row 203): qmm, gpu_sm90
#   r/base/  83fa4a6's qmm (the thirty-seventh session's landed build; session 36's r8-next
#            archive devbin/q.tar.xz holds it as q/qmm)
#   r/lib    the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
ninja -C build qmm gpu_sm90 >/dev/null
TESTS=gpu_sm90 bash bench/variant.sh s38p "-DQMM_EXP_ACT_ROWS" cuda/gemm_sm90.cu >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s38r6 && rm -rf "$tmp" && mkdir -p "$tmp/r/base"
cp /tmp/var/s38p/qmm /tmp/var/s38p/gpu_sm90 "$tmp/r/"
tar -C "$tmp" -xJf devbin/q.tar.xz q/qmm && mv "$tmp/q/qmm" "$tmp/r/base/"
bash bench/carry-libs.sh "$tmp/r" >/dev/null
tar -C "$tmp" -cf - r | xz -7 -T1 --lzma2=preset=7,dict=128MiB >devbin/r6.tar.xz
ls -la devbin/r6.tar.xz
