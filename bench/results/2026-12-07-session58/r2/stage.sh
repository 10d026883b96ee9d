#!/usr/bin/env bash
# Builds devbin/s85.tar.xz for r2/cmds.txt (NOTES row 261), from the repository root at the
# commit that has the -DQMM_EXP_PARAM_TOUCH block (four sm90_trace builds and s80's lib/):
#   s85/sm90_trace                the default build (build/)
#   s85/pt/sm90_trace             gemm_sm90.cu rebuilt -DQMM_EXP_PARAM_TOUCH (bench/variant.sh)
#   s85/tr/sm90_trace             the trace build -DQMM_SM90_TRACE (a worktree in /tmp/s81-tr)
#   s85/ptt/sm90_trace            the trace build with -DQMM_EXP_PARAM_TOUCH
#   bash bench/results/2026-12-07-session58/r2/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s85.tar.xz QMM_CMDS=bench/results/2026-12-07-session58/r2/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=420 bash bench/device.sh /tmp/n cmds
# The experiment block left the source at d8367e7 (row 261 refuted): run this at 7a9058b, or
# apply r2/param-touch.patch first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
rev=$(git rev-parse HEAD)
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
git diff --quiet HEAD -- src || { echo "stage.sh: src/ differs from HEAD" >&2; exit 1; }
ninja -C build qmm sm90_trace
TESTS=sm90_trace bash bench/variant.sh pt -DQMM_EXP_PARAM_TOUCH cuda/gemm_sm90.cu
tr=/tmp/s81-tr
if [ -d "$tr" ]; then
    git -C "$tr" checkout -q -f --detach "$rev"
else
    git worktree prune
    git worktree add -q --detach "$tr" "$rev"
fi
[ -f "$tr/build/build.ninja" ] ||
    cmake -S "$tr" -B "$tr/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DQMM_SM90_TRACE \
        -DCMAKE_CXX_FLAGS=-DQMM_SM90_TRACE >/dev/null
ninja -C "$tr/build" sm90_trace
# the trace build with the touch: its gemm_sm90.cu recompiled with both defines, sm90_trace relinked
(cd "$tr" && BUILD=build bash bench/variant.sh ptt -DQMM_EXP_PARAM_TOUCH cuda/gemm_sm90.cu 2>/dev/null) || true
(cd "$tr/build" && l=$(ninja -t commands sm90_trace | tail -1) && l="${l// libqmm.a/ /tmp/var/ptt/libqmm.a}" &&
    eval "${l/ -o sm90_trace / -o /tmp/var/ptt/sm90_trace }")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/s85"
mkdir -p "$tmp/s85/pt" "$tmp/s85/tr" "$tmp/s85/ptt"
cp build/sm90_trace "$tmp/s85/"
cp /tmp/var/pt/sm90_trace "$tmp/s85/pt/"
cp "$tr/build/sm90_trace" "$tmp/s85/tr/"
cp /tmp/var/ptt/sm90_trace "$tmp/s85/ptt/"
(cd "$tmp" && tar -cf - s85 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s85.tar.xz
ls -la devbin/s85.tar.xz
bash bench/check-cmds.sh devbin/s85.tar.xz "$here/cmds.txt" 420
