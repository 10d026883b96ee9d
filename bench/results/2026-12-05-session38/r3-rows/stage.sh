#!/usr/bin/env bash
# Packs devbin/r.tar.xz (run from the repository root, after `ninja -C build qmm gpu_sm90 test_ops
# cluster_fuse` at the commit under test): r/ that build, r/off/ its -DQMM_EXP_ACT_ROWS_OFF
# variant, r/base/ the thirty-seventh session's landed qmm (from session 36's r8-next archive,
# devbin/q.tar.xz), r/lib the tokenizer's libraries.
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tmp=${TMPDIR:-/tmp}/qmm-s38r && rm -rf "$tmp" && mkdir -p "$tmp/r/off" "$tmp/r/base"
cp build/qmm build/gpu_sm90 build/test_ops build/cluster_fuse "$tmp/r/"
bash bench/variant.sh s38off "-DQMM_EXP_ACT_ROWS_OFF" cuda/gemm_sm90.cu >/dev/null
cp /tmp/var/s38off/qmm "$tmp/r/off/"
tar -C "$tmp" -xJf devbin/q.tar.xz q/qmm && mv "$tmp/q/qmm" "$tmp/r/base/"
bash bench/carry-libs.sh "$tmp/r" >/dev/null
tar -C "$tmp" -cf - r | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/r.tar.xz
ls -la devbin/r.tar.xz
