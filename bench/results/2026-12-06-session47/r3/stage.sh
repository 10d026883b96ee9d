#!/usr/bin/env bash
# Builds devbin/s57.tar.xz (r3's archive) on a HEAD build of 2ecab4b's tree: s56's binaries
# (qmm, sm90_trace, mv_shapes; h2/, b43/, mvs1/, mvs2/ as r2's README says) and pq2/ (row 232).
# Run from the repository root after `cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
# ninja -C build`; needs devbin/s56.tar.xz (or rebuild its variants the same way).
set -euo pipefail
applied=0 # pq2.patch: the -DQMM_EXP_PQ2 block, applied here if the tree lacks it
if ! grep -q QMM_EXP_PQ2 src/cuda/matvec_group.cuh; then
    git apply bench/results/2026-12-06-session47/r3/pq2.patch && applied=1
fi
TESTS="mv_shapes test_ops gpu_llm_decode_steps" bash bench/variant.sh pq2 "-DQMM_EXP_PQ2" cuda/matvec.cu
[ $applied = 0 ] || git apply -R bench/results/2026-12-06-session47/r3/pq2.patch
rm -rf /tmp/s57 && mkdir -p /tmp/s57 && tar -xJf devbin/s56.tar.xz -C /tmp/s57 && mv /tmp/s57/s56 /tmp/s57/s57
mkdir -p /tmp/s57/s57/pq2 && cp /tmp/var/pq2/{qmm,mv_shapes,test_ops,gpu_llm_decode_steps} /tmp/s57/s57/pq2/
(cd /tmp/s57 && tar -cf - s57 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s57.tar.xz
bash bench/check-cmds.sh devbin/s57.tar.xz bench/results/2026-12-06-session47/r3/cmds.txt
