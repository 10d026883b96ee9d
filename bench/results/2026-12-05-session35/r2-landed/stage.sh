#!/usr/bin/env bash
# Packs the second call of the session into devbin/h.tar.xz (run from the repository root):
#   h/          HEAD (the early trigger, NOTES row 187): qmm and the tests the cmds name
#   h/base/qmm  the landed a65be02 binary out of devbin/c.tar.xz (session 34), the baseline
#   h/k/qmm     HEAD with -DQMM_MV_KNOBS (the shape rule's constants from QMM_MV_COST)
#   h/b82/qmm   HEAD with the 8-warp one-token kernel's launch bound 3 → 2 (row 188)
#   h/b44/qmm   HEAD with the 4-warp kernels' launch bound 5 → 4 (row 188)
#   h/lib       the tokenizer's libraries
# The bound variants edit mv_ctas_bound (matvec_layout.cuh) into macros for their build only
# and restore the file.
set -euo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tests="test_ops gpu_llm gpu_llm_decode_steps gpu_llm_decode_ops gpu_matvec_args"
ninja -C build qmm $tests >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s35b && rm -rf "$tmp" && mkdir -p "$tmp/h/base" "$tmp/h/k" "$tmp/h/b82" "$tmp/h/b44"
for t in qmm $tests; do cp "build/$t" "$tmp/h/"; done
bash bench/variant.sh s35k "-DQMM_MV_KNOBS" cuda/matvec_shape.cu >/dev/null && cp /tmp/var/s35k/qmm "$tmp/h/k/"
layout=src/cuda/matvec_layout.cuh
cp "$layout" "$tmp/layout.orig"
trap 'cp "$tmp/layout.orig" "$layout"' EXIT
sed -i 's|constexpr int mv_ctas_bound(int tokt, int w) { return w == 4 ? 5 : tokt == 1 ? 3 : 2; }|constexpr int mv_ctas_bound(int tokt, int w) { return w == 4 ? QMM_MV_BOUND4 : tokt == 1 ? QMM_MV_BOUND8 : 2; }|' "$layout"
grep -q QMM_MV_BOUND4 "$layout"
bash bench/variant.sh s35b82 "-DQMM_MV_BOUND8=2 -DQMM_MV_BOUND4=5" cuda/matvec.cu cuda/matvec_shape.cu >/dev/null
bash bench/variant.sh s35b44 "-DQMM_MV_BOUND8=3 -DQMM_MV_BOUND4=4" cuda/matvec.cu cuda/matvec_shape.cu >/dev/null
cp "$tmp/layout.orig" "$layout"
cp /tmp/var/s35b82/qmm "$tmp/h/b82/" && cp /tmp/var/s35b44/qmm "$tmp/h/b44/"
tar -xJf devbin/c.tar.xz -C "$tmp" c/qmm && mv "$tmp/c/qmm" "$tmp/h/base/qmm"
bash bench/carry-libs.sh "$tmp/h" >/dev/null
tar -C "$tmp" -cf - h | xz -9e -T1 --lzma2=preset=9e,dict=256MiB >devbin/h.tar.xz # one 256 MiB window: 9 MB, not 16
ls -la devbin/h.tar.xz
