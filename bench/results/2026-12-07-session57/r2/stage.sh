#!/usr/bin/env bash
# Builds devbin/s81.tar.xz for r2/cmds.txt (NOTES rows 257, 258), from the repository root:
#   s81/ring_probe, s81/wgmma_issue   the probes at HEAD (build/)
#   s81/tr/          sm90_trace of HEAD built -DQMM_SM90_TRACE (the per-CTA phase trace), in a
#                    worktree at /tmp/s81-tr
#   s81/sm90_trace   the default build's timing tool (build/)
#   s81/st/          sm90_trace of HEAD built -DQMM_SM90_STAGGER (NOTES row 258), in /tmp/s82-st
#   bash bench/results/2026-12-07-session57/r2/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s81.tar.xz QMM_CMDS=bench/results/2026-12-07-session57/r2/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=420 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build ring_probe wgmma_issue sm90_trace
tr=/tmp/s81-tr
rev=$(git rev-parse HEAD)
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
st=/tmp/s82-st
strev=666631b # the stagger's code left the source after the run (NOTES row 258; r2/stagger.patch)
if [ -d "$st" ]; then
    git -C "$st" checkout -q -f --detach "$strev"
else
    git worktree add -q --detach "$st" "$strev"
fi
[ -f "$st/build/build.ninja" ] ||
    cmake -S "$st" -B "$st/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DQMM_SM90_STAGGER \
        -DCMAKE_CXX_FLAGS=-DQMM_SM90_STAGGER >/dev/null
ninja -C "$st/build" sm90_trace
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s81/tr" "$tmp/s81/st"
cp build/ring_probe build/wgmma_issue build/sm90_trace "$tmp/s81/"
cp "$tr/build/sm90_trace" "$tmp/s81/tr/"
cp "$st/build/sm90_trace" "$tmp/s81/st/"
mkdir -p "$tmp/s81/lib" # the libraries bench/carry-libs.sh carries, found from the probe (no qmm here)
ldd build/ring_probe build/sm90_trace | awk '/libpcre2-8|libutf8proc|libcjson/ { print $3 }' | sort -u |
    while read -r lib; do cp -L "$lib" "$tmp/s81/lib/"; done
mkdir -p devbin
(cd "$tmp" && tar -cf - s81 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s81.tar.xz
ls -la devbin/s81.tar.xz
bash bench/check-cmds.sh devbin/s81.tar.xz "$here/cmds.txt" 420
