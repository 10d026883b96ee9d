#!/usr/bin/env bash
# Builds devbin/s83.tar.xz for r3/cmds.txt (NOTES row 259), from the repository root:
#   s83/sm90_trace       the default build's timing tool at HEAD (build/)
#   s83/st4/             sm90_trace and gpu_sm90 of HEAD built -DQMM_EXP_TN128_STAGES=4 (the
#                        128-token two-warpgroup row with four stages), in a worktree at /tmp/s83-st4
#   bash bench/results/2026-12-07-session57/r3/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s83.tar.xz QMM_CMDS=bench/results/2026-12-07-session57/r3/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=480 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build sm90_trace
x=/tmp/s83-st4
rev=c989041 # the knob left the source after the run (NOTES row 259; r3/tn128-stages.patch)
if [ -d "$x" ]; then
    git -C "$x" checkout -q -f --detach "$rev"
else
    git worktree prune
    git worktree add -q --detach "$x" "$rev"
fi
f=-DQMM_EXP_TN128_STAGES=4 # C, C++ and CUDA: the table is read by the planner (C) and the launcher
[ -f "$x/build/build.ninja" ] ||
    cmake -S "$x" -B "$x/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$f" -DCMAKE_CXX_FLAGS="$f" \
        -DCMAKE_CUDA_FLAGS="$f" >/dev/null
ninja -C "$x/build" sm90_trace gpu_sm90
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s83/st4" "$tmp/s83/lib"
cp build/sm90_trace "$tmp/s83/"
cp "$x/build/sm90_trace" "$x/build/gpu_sm90" "$tmp/s83/st4/"
mkdir -p devbin
(cd "$tmp" && tar -cf - s83 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s83.tar.xz
ls -la devbin/s83.tar.xz
bash bench/check-cmds.sh devbin/s83.tar.xz "$here/cmds.txt" 480
