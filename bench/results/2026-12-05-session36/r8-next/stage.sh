#!/usr/bin/env bash
# Packs the next session's first call into devbin/q.tar.xz (run from the repository root):
#   q/      HEAD: qmm, gpu_sm90 (small/two-warp-start as reviewed, not yet run on a GPU)
#   q/ph/   HEAD built with -DQMM_MV_PHASES (NOTES row 195): qmm, whose profile also prints each
#           decode matvec's row split at its CTAs' first start, first and last return from the
#           dependency wait, and last end (stderr, so in the command's .log)
#   q/shp/  HEAD built with -DQMM_EXP_MV_SHAPE (NOTES row 196): qmm, whose decode matvecs take the
#           CTA shape "W,R,C" of QMM_QKV_SHAPE, QMM_O_SHAPE, QMM_GATEUP_SHAPE, QMM_DOWN_SHAPE
#   q/lib   the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
ninja -C build qmm gpu_sm90 >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s37q && rm -rf "$tmp" && mkdir -p "$tmp/q/ph" "$tmp/q/shp"
cp build/qmm build/gpu_sm90 "$tmp/q/"
bash bench/variant.sh s37ph "-DQMM_MV_PHASES" cuda/matvec.cu llm/cuda/graph_profile.cu >/dev/null
cp /tmp/var/s37ph/qmm "$tmp/q/ph/"
bash bench/variant.sh s37shp "-DQMM_EXP_MV_SHAPE" llm/cuda/decode_fused.cu >/dev/null
cp /tmp/var/s37shp/qmm "$tmp/q/shp/"
bash bench/carry-libs.sh "$tmp/q" >/dev/null
tar -C "$tmp" -cf - q | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/q.tar.xz
ls -la devbin/q.tar.xz
