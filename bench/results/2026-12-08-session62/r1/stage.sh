#!/usr/bin/env bash
# Builds devbin/s94.tar.xz for r1/cmds.txt from the repository root at the commit to measure:
# qmm, gpu_kernels, gpu_sm90, mv_shapes, sm90_trace and test_ops of that commit (build/, Ninja,
# Release) and the tokenizer's libraries (lib/, bench/carry-libs.sh); h2/qmm: the same tree with
# the H200 table planning as an H100 does (qmm_tune_for_gpu's two corrections: the other block
# height's clusters from 32-token tiles, NOTES.md rows 204-209; tiles left aside from 128-token
# tiles, rows 228-230), built in a worktree at /tmp/s94-h2.
#   bash bench/results/2026-12-08-session62/r1/stage.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
git diff --quiet HEAD -- src tests tools include || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build qmm gpu_kernels gpu_sm90 mv_shapes sm90_trace test_ops
h2=/tmp/s94-h2
bash bench/worktree.sh "$(git rev-parse HEAD)" "$h2"
tune="$h2/src/tune/sm90.c"
sed -i -e 's/^    d.wgmma_alt_min_tile = 64;$/    d.wgmma_alt_min_tile = 32;/' \
    -e 's/^    d.wgmma_rest_min_tile = 0;$/    d.wgmma_rest_min_tile = 128;/' "$tune"
[ "$(git -C "$h2" diff --numstat | awk '{print $1}')" = 2 ] || { echo "stage.sh: the H200 table's two lines moved" >&2; exit 1; }
[ -f "$h2/build/build.ninja" ] || cmake -S "$h2" -B "$h2/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$h2/build" qmm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
s="$tmp/s94"
mkdir -p "$s/h2"
cp build/{qmm,gpu_kernels,gpu_sm90,mv_shapes,sm90_trace,test_ops} "$s/"
cp "$h2/build/qmm" "$s/h2/"
bash bench/pack-archive.sh devbin/s94.tar.xz "$s"
bash bench/check-cmds.sh devbin/s94.tar.xz "$here/cmds.txt" 570
