#!/usr/bin/env bash
# Builds devbin/s65.tar.xz (cmds.txt's archive): session 51's s64 (its r4/stage.sh, from 9dec805
# or later) plus dch/qmm and dch/test_ops: dense.cu with dense-pieces.patch, built
# -DQMM_EXP_DENSE_CHUNKS (NOTES row 241: env QMM_DENSE_CHUNKS pieces, QMM_DENSE_FIRST).
# Run from the repository root after
# `cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build`.
set -euo pipefail
rm -f devbin/s65.tar.xz
[ -f devbin/s64.tar.xz ] || bash bench/results/2026-12-07-session51/r4/stage.sh
git apply bench/results/2026-12-07-session52/r1/dense-pieces.patch
TESTS="test_ops" bash bench/variant.sh dch -DQMM_EXP_DENSE_CHUNKS cuda/dense.cu
git checkout src/cuda/dense.cu
rm -rf /tmp/s65 && mkdir -p /tmp/s65
(cd /tmp/s65 && xz -dc "$OLDPWD/devbin/s64.tar.xz" | tar -xf - && mv s64 s65 && mkdir -p s65/dch)
cp /tmp/var/dch/qmm /tmp/var/dch/test_ops /tmp/s65/s65/dch/
(cd /tmp/s65 && tar -cf - s65 | xz -7 -T4 --lzma2=preset=7,dict=128MiB) > devbin/s65.tar.xz
bash bench/check-cmds.sh devbin/s65.tar.xz bench/results/2026-12-07-session52/r1/cmds.txt
