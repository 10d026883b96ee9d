#!/usr/bin/env bash
# Packs the next session's first call into devbin/q.tar.xz (run from the repository root):
#   q/      HEAD: qmm, gpu_sm90 (small/two-warp-start as reviewed, not yet run on a GPU)
#   q/ph/   HEAD built with -DQMM_MV_PHASES (NOTES row 195): qmm, whose profile also prints each
#           decode matvec's row split at its CTAs' first start, first and last return from the
#           dependency wait, and last end (stderr, so in the command's .log)
#   q/shp/  HEAD built with -DQMM_EXP_MV_SHAPE (NOTES row 196): qmm, whose decode matvecs take the
#           CTA shape "W,R,C" of QMM_QKV_SHAPE, QMM_O_SHAPE, QMM_GATEUP_SHAPE, QMM_DOWN_SHAPE
#   q/two1/, q/two2/  HEAD built with -DQMM_SM90_TWO_EXP=1 / 2 (NOTES row 197): qmm, gpu_sm90
#           with two producer warps at every 8- and 16-token launch, warp 1's activations held
#           until warp 0 has issued every first stage's weights (1) or the first one (2)
#   q/lib   the tokenizer's libraries
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
ninja -C build qmm gpu_sm90 >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s37q && rm -rf "$tmp" && mkdir -p "$tmp/q/ph" "$tmp/q/shp" "$tmp/q/two1" "$tmp/q/two2"
cp build/qmm build/gpu_sm90 "$tmp/q/"
bash bench/variant.sh s37ph "-DQMM_MV_PHASES" cuda/matvec.cu llm/cuda/graph_profile.cu >/dev/null
cp /tmp/var/s37ph/qmm "$tmp/q/ph/"
bash bench/variant.sh s37shp "-DQMM_EXP_MV_SHAPE" llm/cuda/decode_fused.cu >/dev/null
cp /tmp/var/s37shp/qmm "$tmp/q/shp/"
for v in 1 2; do
    TESTS=gpu_sm90 bash bench/variant.sh s37two$v "-DQMM_SM90_TWO_EXP=$v" cuda/gemm_sm90.cu >/dev/null
    cp /tmp/var/s37two$v/qmm /tmp/var/s37two$v/gpu_sm90 "$tmp/q/two$v/"
done
bash bench/carry-libs.sh "$tmp/q" >/dev/null
tar -C "$tmp" -cf - q | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/q.tar.xz
ls -la devbin/q.tar.xz
