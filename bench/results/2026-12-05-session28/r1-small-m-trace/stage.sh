#!/usr/bin/env bash
# Builds and packs what NOTES row 170 needs, for one device call through `bench/device.sh ... cmds`
# with cmds.txt here:
#   d/sm90_trace   bench/probe/sm90_trace.cu and the library built with -DQMM_SM90_TRACE (the
#                  wgmma kernel stamps each CTA's phases; the normal build's SASS is not this one)
#   d/lib/         the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/d.tar.xz. Run from the repository root on the development machine (~1 min with the
# trace build folder kept, ~15 min from nothing):
#   bash bench/results/2026-12-05-session28/r1-small-m-trace/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
here=$root/bench/results/2026-12-05-session28/r1-small-m-trace
tmp=${TMPDIR:-/tmp}/qmm-r170
bt=${BUILD_TRACE:-$root/build-trace}
export PATH=$PATH:/usr/local/cuda/bin
head=$(git -C "$root" rev-parse --short HEAD)

if [ ! -e "$bt/build.ninja" ]; then
    cmake -S "$root" -B "$bt" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_FLAGS=-DQMM_SM90_TRACE >"$tmp.cmake.log" 2>&1 || { tail -20 "$tmp.cmake.log"; exit 1; }
fi
grep -q 'CMAKE_CUDA_FLAGS:STRING=-DQMM_SM90_TRACE' "$bt/CMakeCache.txt" ||
    { echo "stage: $bt is not a trace build (CMAKE_CUDA_FLAGS)"; exit 1; }
echo "stage: sm90_trace in $bt ($head)"
ninja -C "$bt" sm90_trace qmm >"$tmp.ninja.log" 2>&1 || { tail -20 "$tmp.ninja.log"; exit 1; }

rm -rf "$tmp" && mkdir -p "$tmp/d"
cp "$bt/sm90_trace" "$bt/qmm" "$tmp/d/"
bash "$root/bench/carry-libs.sh" "$tmp/d" >/dev/null
mkdir -p "$root/devbin"
XZ_OPT="-9 -T0" tar -cJf "$root/devbin/d.tar.xz" -C "$tmp" d
echo "stage: devbin/d.tar.xz $(du -h "$root/devbin/d.tar.xz" | cut -f1) (head $head, trace build)"
echo "run: QMM_BIN_ARCHIVE=devbin/d.tar.xz QMM_CMDS=${here#$root/}/cmds.txt" \
    "QMM_PACK=\$OUT/device.tar.gz QMM_COMMIT=$head BUDGET_S=240 bash bench/device.sh /tmp/dev cmds"
