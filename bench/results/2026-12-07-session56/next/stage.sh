#!/usr/bin/env bash
# Builds devbin/s79.tar.xz, the archive of this folder's four command lists, from the
# repository root, of the commit it is run on (HEAD):
#   s79/      qmm, mv_shapes, sm90_trace, test_ops, gpu_tp_fused, gpu_tp of that commit (Ninja,
#             Release, in build/);
#   s79/h2/   qmm of the same tree with the H200 table's wgmma_rest_min_tile = 128 (the tiles-aside
#             rule an H100 plans, NOTES.md rows 228-230; built in a worktree at /tmp/s79-h2).
# The devbin/s75-s78 archives that session 55's r3/r5/r6 lists name were lost with that
# session's machine; these lists are theirs at HEAD.
#   bash bench/results/2026-12-07-session56/next/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s79.tar.xz QMM_CMDS=bench/results/2026-12-07-session56/next/h200_a.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=570 bash bench/device.sh /tmp/n cmds
#   (carry devbin/s79.tar.xz; then h200_b.txt the same way; tp_a.txt and tp_b.txt on nvidia-h200-x2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build qmm mv_shapes sm90_trace test_ops gpu_tp_fused gpu_tp
h2=/tmp/s79-h2
rev=$(git rev-parse HEAD)
if [ -d "$h2" ]; then
    git -C "$h2" checkout -q -f --detach "$rev" # the worktree of an earlier run, at this commit
else
    git worktree prune
    git worktree add -q --detach "$h2" "$rev"
fi
tune="$h2/src/tune/sm90.c"
grep -q '^    d.wgmma_rest_min_tile = 0;$' "$tune" && sed -i 's/^    d.wgmma_rest_min_tile = 0;$/    d.wgmma_rest_min_tile = 128;/' "$tune"
grep -q '^    d.wgmma_rest_min_tile = 128;$' "$tune" || { echo "stage.sh: the H200 table's rest_min_tile line moved"; exit 1; }
[ -f "$h2/build/build.ninja" ] || cmake -S "$h2" -B "$h2/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$h2/build" qmm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
s="$tmp/s79"
mkdir -p "$s/h2"
cp build/{qmm,mv_shapes,sm90_trace,test_ops,gpu_tp_fused,gpu_tp} "$s/"
cp "$h2/build/qmm" "$s/h2/"
bash bench/carry-libs.sh "$s" >/dev/null
mkdir -p devbin
(cd "$tmp" && tar -cf - s79 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s79.tar.xz
ls -la devbin/s79.tar.xz
for list in h200_a h200_b tp_a tp_b; do
    bash bench/check-cmds.sh devbin/s79.tar.xz "$here/$list.txt"
done
