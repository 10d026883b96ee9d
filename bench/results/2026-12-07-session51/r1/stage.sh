#!/usr/bin/env bash
# Builds devbin/s63.tar.xz (cmds.txt's archive) from scratch: this checkout had none of the
# earlier archives. Run from the repository root of 9e446c3 after `cmake -S . -B build -G Ninja
# -DCMAKE_BUILD_TYPE=Release && ninja -C build`, with 3f63aad built the same way in WT (a git
# worktree; only its mv_shapes is used).
#   top level: 9e446c3's qmm, test_ops, gpu_llm_decode_steps, mv_shapes (the landed
#              two-token rule, d374cb2, plus two experiment knobs off by default)
#   pre/qmm:   the same tree, decode_fused.cu built -DQMM_EXP_MV_PRE (NOTES row 239)
#   mvs1/qmm, mvs2/qmm: matvec.cu built -DQMM_MV_STUB=1 / 2 (row 231, timing only)
#   h2/qmm:    src/tune/sm90.c with the H200 table's wgmma_rest_min_tile = 128 (rows 228-230)
#   b50/mv_shapes: 3f63aad's (the shape rule before d374cb2)
set -euo pipefail
WT=${WT:-/tmp/wt50}
TESTS="" bash bench/variant.sh pre -DQMM_EXP_MV_PRE llm/cuda/decode_fused.cu
for v in 1 2; do bash bench/variant.sh mvs$v "-DQMM_MV_STUB=$v" cuda/matvec.cu; done
sed -i 's/    d.wgmma_rest_min_tile = 0;/    d.wgmma_rest_min_tile = 128;/' src/tune/sm90.c
bash bench/variant.sh h2 -DQMM_H2TABLE=1 tune/sm90.c
git checkout src/tune/sm90.c
s=/tmp/s63/s63
rm -rf /tmp/s63 && mkdir -p $s/{pre,mvs1,mvs2,h2,b50}
cp build/{qmm,test_ops,gpu_llm_decode_steps,mv_shapes} $s/
bash bench/carry-libs.sh $s
for v in pre mvs1 mvs2 h2; do cp /tmp/var/$v/qmm $s/$v/; done
cp "$WT/build/mv_shapes" $s/b50/
mkdir -p devbin
(cd /tmp/s63 && tar -cf - s63 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s63.tar.xz
bash bench/check-cmds.sh devbin/s63.tar.xz bench/results/2026-12-07-session51/r1/cmds.txt
