#!/usr/bin/env bash
# Builds devbin/s80.tar.xz, the archive of this folder's list and of session 56's next/ lists,
# from the repository root: session 56's s79 (its next/stage.sh, rebuilt first if devbin/s79 is
# missing) plus
#   s80/x/   qmm of the same commit built with -DQMM_EXP_MV_PRE -DQMM_EXP_MV_SHAPE (the decode
#            matvec's pre-wait groups and CTA shapes from the environment, decode_fused.cu; the
#            default build's code otherwise), in a worktree at /tmp/s80-x.
#   bash bench/results/2026-12-07-session57/next/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s80.tar.xz QMM_CMDS=bench/results/2026-12-07-session56/next/h200_a.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=570 bash bench/device.sh /tmp/n cmds
#   then the same with QMM_CMDS=bench/results/2026-12-07-session57/next/h200_p.txt (carry
#   devbin/s80.tar.xz)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f devbin/s79.tar.xz ] || bash bench/results/2026-12-07-session56/next/stage.sh
x=/tmp/s80-x
rev=$(git rev-parse HEAD)
if [ -d "$x" ]; then
    git -C "$x" checkout -q -f --detach "$rev"
else
    git worktree prune
    git worktree add -q --detach "$x" "$rev"
fi
flags="-DQMM_EXP_MV_PRE -DQMM_EXP_MV_SHAPE"
[ -f "$x/build/build.ninja" ] ||
    cmake -S "$x" -B "$x/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="$flags" \
        -DCMAKE_CXX_FLAGS="$flags" >/dev/null
ninja -C "$x/build" qmm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s79.tar.xz -C "$tmp"
mv "$tmp/s79" "$tmp/s80"
mkdir -p "$tmp/s80/x"
cp "$x/build/qmm" "$tmp/s80/x/"
(cd "$tmp" && tar -cf - s80 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s80.tar.xz
ls -la devbin/s80.tar.xz
for list in "$root/bench/results/2026-12-07-session56/next/h200_a.txt" "$here/h200_p.txt"; do
    bash bench/check-cmds.sh devbin/s80.tar.xz "$list" 570
done
