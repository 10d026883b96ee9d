#!/usr/bin/env bash
# Builds devbin/s93.tar.xz for r3/cmds.txt from the repository root at the commit to measure:
# qmm, gpu_kernels (build/), s80's lib/, base/qmm: b67fc3d's from devbin/s92.tar.xz (the model's
# 256-token fixup at four rounds; NOTES row 269), and s92's sm90_trace and tr/sm90_trace (the
# trace build of 52282d6) for k at 2 048 tokens (row 270).
#   bash bench/results/2026-12-07-session61/r3/stage.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s92.tar.xz ] || bash bench/results/2026-12-07-session61/r2/stage.sh
ninja -C build qmm gpu_kernels
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s92.tar.xz -C "$tmp" s92/lib s92/qmm s92/sm90_trace s92/tr
mv "$tmp/s92" "$tmp/s93"
mkdir -p "$tmp/s93/base"
mv "$tmp/s93/qmm" "$tmp/s93/base/qmm"
cp build/qmm build/gpu_kernels "$tmp/s93/"
(cd "$tmp" && tar -cf - s93 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s93.tar.xz
ls -la devbin/s93.tar.xz
bash bench/check-cmds.sh devbin/s93.tar.xz "$here/cmds.txt" 570
