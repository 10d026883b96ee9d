#!/usr/bin/env bash
# Builds devbin/s81.tar.xz for r2/cmds.txt (NOTES rows 257, 258), from the repository root, all
# of 666631b (the commit r2 ran; ring_probe has changed since, and the stagger left the source):
#   s81/ring_probe, s81/wgmma_issue, s81/sm90_trace   the default build, in /tmp/s81-base
#   s81/tr/sm90_trace    built -DQMM_SM90_TRACE (the per-CTA phase trace), in /tmp/s81-tr
#   s81/st/sm90_trace    built -DQMM_SM90_STAGGER (NOTES row 258; r2/stagger.patch), in /tmp/s82-st
#   bash bench/results/2026-12-07-session57/r2/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s81.tar.xz QMM_CMDS=bench/results/2026-12-07-session57/r2/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=666631b BUDGET_S=420 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
rev=666631b
build_at() { # build_at DIR "DEFINES" TARGET...: a worktree at $rev built with DEFINES
    local dir=$1 defs=$2
    shift 2
    if [ -d "$dir" ]; then
        git -C "$dir" checkout -q -f --detach "$rev"
    else
        git worktree prune
        git worktree add -q --detach "$dir" "$rev"
    fi
    [ -f "$dir/build/build.ninja" ] ||
        cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="$defs" \
            -DCMAKE_CXX_FLAGS="$defs" >/dev/null
    ninja -C "$dir/build" "$@"
}
build_at /tmp/s81-base "" ring_probe wgmma_issue sm90_trace
build_at /tmp/s81-tr -DQMM_SM90_TRACE sm90_trace
build_at /tmp/s82-st -DQMM_SM90_STAGGER sm90_trace
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/s81/tr" "$tmp/s81/st" "$tmp/s81/lib"
cp /tmp/s81-base/build/{ring_probe,wgmma_issue,sm90_trace} "$tmp/s81/"
cp /tmp/s81-tr/build/sm90_trace "$tmp/s81/tr/"
cp /tmp/s82-st/build/sm90_trace "$tmp/s81/st/"
mkdir -p devbin
(cd "$tmp" && tar -cf - s81 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s81.tar.xz
ls -la devbin/s81.tar.xz
bash bench/check-cmds.sh devbin/s81.tar.xz "$here/cmds.txt" 420
