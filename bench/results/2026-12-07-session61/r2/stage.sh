#!/usr/bin/env bash
# Builds devbin/s92.tar.xz for r2/cmds.txt from the repository root at the commit to measure:
# qmm, sm90_trace, gpu_sm90, gpu_kernels (build/), s80's lib/, and tr/sm90_trace, the trace
# build of 52282d6 (-DQMM_SM90_TRACE, bench/trace-build.sh) for the clusters' placement.
#   bash bench/results/2026-12-07-session61/r2/stage.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
ninja -C build qmm sm90_trace gpu_sm90 gpu_kernels
tr=$(bash bench/trace-build.sh 52282d6a058f04391ab600c3faedeaddfa8f5007)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/s92"
mkdir -p "$tmp/s92/tr"
cp build/qmm build/sm90_trace build/gpu_sm90 build/gpu_kernels "$tmp/s92/"
cp "$tr/build/sm90_trace" "$tmp/s92/tr/"
(cd "$tmp" && tar -cf - s92 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s92.tar.xz
ls -la devbin/s92.tar.xz
bash bench/check-cmds.sh devbin/s92.tar.xz "$here/cmds.txt" 570
