#!/usr/bin/env bash
# Builds devbin/s64.tar.xz (cmds.txt's archive) from one tree, 9dec805 or later (gate|up at 3
# pre-wait groups in the decode step). Run from the repository root after `cmake -S . -B build
# -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build`.
#   top level: qmm, test_ops, gpu_llm_decode_steps, mv_shapes of the tree
#   pre/qmm:   decode_fused.cu built -DQMM_EXP_MV_PRE (env QMM_{QKV,O,GATEUP,DOWN}_PRE; with
#              QMM_GATEUP_PRE=2 it is the step before 9dec805: the decode pairs' base)
#   mvs1/qmm, mvs2/qmm: matvec.cu built -DQMM_MV_STUB=1 / 2 (row 231, timing only)
#   h2/qmm:    src/tune/sm90.c with the H200 table's wgmma_rest_min_tile = 128 (rows 228-230)
set -euo pipefail
TESTS="" bash bench/variant.sh pre -DQMM_EXP_MV_PRE llm/cuda/decode_fused.cu
for v in 1 2; do bash bench/variant.sh mvs$v "-DQMM_MV_STUB=$v" cuda/matvec.cu; done
sed -i 's/    d.wgmma_rest_min_tile = 0;/    d.wgmma_rest_min_tile = 128;/' src/tune/sm90.c
bash bench/variant.sh h2 -DQMM_H2TABLE=1 tune/sm90.c
git checkout src/tune/sm90.c
s=/tmp/s64/s64
rm -rf /tmp/s64 && mkdir -p $s/{pre,mvs1,mvs2,h2}
cp build/{qmm,test_ops,gpu_llm_decode_steps,mv_shapes} $s/
bash bench/carry-libs.sh $s
for v in pre mvs1 mvs2 h2; do cp /tmp/var/$v/qmm $s/$v/; done
mkdir -p devbin
(cd /tmp/s64 && tar -cf - s64 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s64.tar.xz
bash bench/check-cmds.sh devbin/s64.tar.xz bench/results/2026-12-07-session51/r4/cmds.txt
