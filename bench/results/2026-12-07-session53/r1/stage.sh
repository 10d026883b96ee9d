#!/usr/bin/env bash
# Builds devbin/s66.tar.xz (cmds.txt's archive): the first measurements of research-sm90-small-m.md's
# P1, P2 and P3 (NOTES rows 243-245). Run from the repository root after
# `cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build` and a trace build
# `cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DQMM_SM90_TRACE
#  && ninja -C build-trace sm90_trace`, both of a tree with small-m.patch applied (inert unless its
# defines are given):
#   top level: qmm, sm90_trace, gpu_sm90, mv_shapes, rf_wgmma of the tree (the base; rf_wgmma is
#          P1's prototype, bench/probe/rf_wgmma.cu)
#   x4/:   -DQMM_EXP_TN16X4 (16 and 32 tokens × 64 rows four CTAs a SM, 5 and 4 stages; P3)
#   ncr/:  -DQMM_EXP_NO_CLREADY (a cluster's senders skip the owner's ring-idle wait; timing only,
#          wrong sums; P2's bound)
#   tr/:   sm90_trace of the trace build (P1: the wgmma kernel's phases at 8 tokens)
#   tm/:   mv_shapes with -DQMM_MV_TRACE (matvec.cu and the probe; P1: the matvec's phases)
#   mvs1/: mv_shapes with matvec.cu -DQMM_MV_STUB=1 (loads only; P1's structural floor at 16 tokens)
set -euo pipefail
git apply --check -R bench/results/2026-12-07-session53/r1/small-m.patch 2>/dev/null ||
    { echo "stage: apply small-m.patch first"; exit 1; }
TESTS="sm90_trace gpu_sm90" bash bench/variant.sh x4 -DQMM_EXP_TN16X4 cuda/gemm_sm90.cu tune/sm90.c plan_sm90.c
TESTS="sm90_trace" bash bench/variant.sh ncr -DQMM_EXP_NO_CLREADY cuda/gemm_sm90.cu
for v in "tm -DQMM_MV_TRACE" "mvs1 -DQMM_MV_STUB=1"; do
    set -- $v
    bash bench/variant.sh "$1" "$2" cuda/matvec.cu
    (
        cd build
        o=CMakeFiles/mv_shapes.dir/bench/probe/mv_shapes.cu.o
        c=$(ninja -t commands mv_shapes | grep -- "-o $o" | head -1)
        c="${c//-o $o/-o /tmp/var/$1/mv_shapes.o}"
        eval "${c/ -c / $2 -c }"
        l=$(ninja -t commands mv_shapes | tail -1)
        l="${l// libqmm.a/ /tmp/var/$1/libqmm.a}"
        l="${l// $o / /tmp/var/$1/mv_shapes.o }"
        eval "${l/ -o mv_shapes / -o /tmp/var/$1/mv_shapes }"
    )
done
s=/tmp/s66/s66
rm -rf /tmp/s66 && mkdir -p $s/{x4,ncr,tr,tm,mvs1}
cp build/{qmm,sm90_trace,gpu_sm90,mv_shapes,rf_wgmma} $s/
bash bench/carry-libs.sh $s >/dev/null
cp /tmp/var/x4/{qmm,sm90_trace,gpu_sm90} $s/x4/
cp /tmp/var/ncr/sm90_trace $s/ncr/
cp build-trace/sm90_trace $s/tr/
cp /tmp/var/tm/mv_shapes $s/tm/
cp /tmp/var/mvs1/mv_shapes $s/mvs1/
mkdir -p devbin
(cd /tmp/s66 && tar -cf - s66 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s66.tar.xz
ls -la devbin/s66.tar.xz
bash bench/check-cmds.sh devbin/s66.tar.xz bench/results/2026-12-07-session53/r1/cmds.txt
