#!/usr/bin/env bash
# Builds and packs what NOTES row 172 needs, for one device call through `bench/device.sh ...
# cmds` with cmds.txt here (only while two-warp-start.patch is not in the source):
#   f/          the patch on this checkout's HEAD: qmm, gpu_sm90, test_ops
#   f/one/      the patch with -DQMM_SM90_ONE_PRODUCER_WARP (the former start): qmm
#   f/all/      the patch with -DQMM_SM90_ALL_LANES_ARRIVE (for racecheck): gpu_sm90
#   f/tr/, f/tr1/  sm90_trace of the trace build (-DQMM_SM90_TRACE), two warps / one warp
#   f/lib/      the tokenizer's libraries (bench/carry-libs.sh)
# into devbin/f.tar.xz. Run from the repository root on the development machine (~20 min from
# nothing on two CPUs):  bash bench/results/2026-12-05-session29/r5-two-warp-start/stage.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
here=$root/bench/results/2026-12-05-session29/r5-two-warp-start
tmp=${TMPDIR:-/tmp}/qmm-r172
stage=$tmp/stage/f
export PATH=$PATH:/usr/local/cuda/bin
head=$(git -C "$root" rev-parse --short HEAD)

git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || rm -rf "$tmp/src"
mkdir -p "$tmp" && git -C "$root" worktree add -f --detach "$tmp/src" "$head" >/dev/null
git -C "$tmp/src" apply "$here/two-warp-start.patch"
for b in "build" "build-trace -DCMAKE_CUDA_FLAGS=-DQMM_SM90_TRACE"; do
    set -- $b
    cmake -S "$tmp/src" -B "$tmp/src/$1" -G Ninja -DCMAKE_BUILD_TYPE=Release ${2:-} >"$tmp/cmake.log" 2>&1 ||
        { tail -20 "$tmp/cmake.log"; exit 1; }
done
echo "stage: the patch on $head"
ninja -C "$tmp/src/build" qmm gpu_sm90 test_ops >"$tmp/ninja.log" 2>&1 || { tail -20 "$tmp/ninja.log"; exit 1; }
ninja -C "$tmp/src/build-trace" sm90_trace >"$tmp/ninja-trace.log" 2>&1 || { tail -20 "$tmp/ninja-trace.log"; exit 1; }
cd "$tmp/src"
TESTS=gpu_sm90 bash bench/variant.sh r172-one -DQMM_SM90_ONE_PRODUCER_WARP cuda/gemm_sm90.cu >/dev/null
TESTS=gpu_sm90 bash bench/variant.sh r172-all -DQMM_SM90_ALL_LANES_ARRIVE cuda/gemm_sm90.cu >/dev/null
BUILD=build-trace TESTS=sm90_trace bash bench/variant.sh r172-tr1 -DQMM_SM90_ONE_PRODUCER_WARP cuda/gemm_sm90.cu >/dev/null

rm -rf "$tmp/stage" && mkdir -p "$stage"/{one,all,tr,tr1}
cp build/{qmm,gpu_sm90,test_ops} "$stage/"
cp /tmp/var/r172-one/qmm "$stage/one/"
cp /tmp/var/r172-all/gpu_sm90 "$stage/all/"
cp build-trace/sm90_trace "$stage/tr/"
cp /tmp/var/r172-tr1/sm90_trace "$stage/tr1/"
bash "$root/bench/carry-libs.sh" "$stage" >/dev/null
mkdir -p "$root/devbin"
XZ_OPT="-9 -T0" tar -cJf "$root/devbin/f.tar.xz" -C "$tmp/stage" f
echo "stage: devbin/f.tar.xz $(du -h "$root/devbin/f.tar.xz" | cut -f1) (head $head + the patch)"
echo "run: QMM_BIN_ARCHIVE=devbin/f.tar.xz QMM_CMDS=${here#$root/}/cmds.txt" \
    "QMM_PACK=\$OUT/device.tar.gz QMM_COMMIT=$head+two-warp-start BUDGET_S=420 bash bench/device.sh /tmp/dev cmds"
