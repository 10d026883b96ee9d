#!/usr/bin/env bash
# Builds devbin/s87.tar.xz for next/h200.txt, from the repository root at the commit to measure
# (session 58's end or later): build/'s qmm, sm90_trace, mv_shapes, test_ops and gpu_kernels, and
# session 57's s80 lib/ (the tokenizer's libraries).
#   bash bench/results/2026-12-07-session58/next/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s87.tar.xz QMM_CMDS=bench/results/2026-12-07-session58/next/h200.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=570 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
ninja -C build qmm sm90_trace mv_shapes test_ops gpu_kernels
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/s87"
cp build/{qmm,sm90_trace,mv_shapes,test_ops,gpu_kernels} "$tmp/s87/"
mkdir -p devbin
(cd "$tmp" && tar -cf - s87 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s87.tar.xz
ls -la devbin/s87.tar.xz
bash bench/check-cmds.sh devbin/s87.tar.xz "$here/h200.txt" 570
