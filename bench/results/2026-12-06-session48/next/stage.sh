#!/usr/bin/env bash
# Builds devbin/s58.tar.xz (next/cmds.txt's archive) on a Release build of this tree (its library
# source is 2ecab4b's plus matvec.cu's stubs 4 and 5, which leave the default SASS unchanged):
# s56's binaries (session 47's next/) plus mvs1/mv_shapes, mvs4/{qmm,mv_shapes}, mvs5/mv_shapes.
# Run from the repository root after `cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
# ninja -C build`; needs devbin/s56.tar.xz.
set -euo pipefail
for v in 1 4 5; do TESTS=mv_shapes bash bench/variant.sh mvs$v "-DQMM_MV_STUB=$v" cuda/matvec.cu; done
rm -rf /tmp/s58 && mkdir -p /tmp/s58 && tar -xJf devbin/s56.tar.xz -C /tmp/s58 && mv /tmp/s58/s56 /tmp/s58/s58
mkdir -p /tmp/s58/s58/mvs4 /tmp/s58/s58/mvs5
cp /tmp/var/mvs1/mv_shapes /tmp/s58/s58/mvs1/
cp /tmp/var/mvs4/{qmm,mv_shapes} /tmp/s58/s58/mvs4/
cp /tmp/var/mvs5/mv_shapes /tmp/s58/s58/mvs5/
ninja -C build mv_shapes && mkdir -p /tmp/s58/s58/pw && cp build/mv_shapes /tmp/s58/s58/pw/
(cd /tmp/s58 && tar -cf - s58 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s58.tar.xz
bash bench/check-cmds.sh devbin/s58.tar.xz bench/results/2026-12-06-session48/next/cmds.txt
