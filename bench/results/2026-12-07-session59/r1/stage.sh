#!/usr/bin/env bash
# Builds devbin/s88.tar.xz for r1/cmds.txt, from the repository root at the commit to measure:
# build/'s qmm, sm90_trace, mv_shapes, test_ops and the GPU tests cmds.txt runs, and session 57's
# s80 lib/ (the tokenizer's libraries).
#   bash bench/results/2026-12-07-session59/r1/stage.sh [NAME]   (NAME: the archive, default s88)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
name=${1:-s88}
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
bins="qmm sm90_trace mv_shapes test_ops gpu_kernels gpu_llm_decode_steps gpu_llm gpu_llm_decode_ops gpu_matvec_args gpu_llm_soak"
ninja -C build $bins
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/$name"
for b in $bins; do cp "build/$b" "$tmp/$name/"; done
mkdir -p devbin
(cd "$tmp" && tar -cf - "$name" | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >"devbin/$name.tar.xz"
ls -la "devbin/$name.tar.xz"
bash bench/check-cmds.sh "devbin/$name.tar.xz" "$here/cmds.txt" 570
