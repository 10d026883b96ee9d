#!/usr/bin/env bash
# Builds devbin/s91.tar.xz for r2/cmds.txt from the repository root at the commit to measure
# (NOTES rows 263-267): qmm and sm90_trace (build/), fs/ (sm90_trace, gpu_sm90 with gemm_sm90.cu
# rebuilt -DQMM_EXP_FIX_STAGED, bench/variant.sh), fsm/qmm (gemm_sm90.cu and perf/wgmma.c with
# the define: the planner's model of the staged fixup), sp/ (qmm, sm90_trace: gemm_sm90.cu and
# matvec.cu -DQMM_EXP_CLUSTER_SPREAD), tr/ and trfs/ (sm90_trace of the trace build
# -DQMM_SM90_TRACE, a worktree in /tmp/s81-tr, without and with the define), s80's lib/.
#   bash bench/results/2026-12-07-session60/r2/stage.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
rev=$(git rev-parse HEAD)
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
ninja -C build qmm sm90_trace gpu_sm90
TESTS="sm90_trace gpu_sm90" bash bench/variant.sh fs -DQMM_EXP_FIX_STAGED cuda/gemm_sm90.cu
# fsm: the kernel's define and the model's (perf/wgmma.c: a 256-token fixup ~a round trip a partial)
bash bench/variant.sh fsm -DQMM_EXP_FIX_STAGED cuda/gemm_sm90.cu perf/wgmma.c
# sp: clusters launched (and counted) with the spread scheduling policy (NOTES row 267)
TESTS=sm90_trace bash bench/variant.sh sp -DQMM_EXP_CLUSTER_SPREAD cuda/gemm_sm90.cu cuda/matvec.cu
tr=$(bash bench/trace-build.sh "$rev")
# the trace build's gemm_sm90.cu with the define, sm90_trace relinked (its qmm is not built)
(cd "$tr" && BUILD=build bash bench/variant.sh trfs -DQMM_EXP_FIX_STAGED cuda/gemm_sm90.cu 2>/dev/null) || true
(cd "$tr/build" && l=$(ninja -t commands sm90_trace | tail -1) && l="${l// libqmm.a/ /tmp/var/trfs/libqmm.a}" &&
    eval "${l/ -o sm90_trace / -o /tmp/var/trfs/sm90_trace }")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/s91"
mkdir -p "$tmp/s91/fs" "$tmp/s91/fsm" "$tmp/s91/sp" "$tmp/s91/tr" "$tmp/s91/trfs"
cp build/qmm build/sm90_trace "$tmp/s91/"
cp /tmp/var/fs/sm90_trace /tmp/var/fs/gpu_sm90 "$tmp/s91/fs/"
cp /tmp/var/fsm/qmm "$tmp/s91/fsm/"
cp /tmp/var/sp/qmm /tmp/var/sp/sm90_trace "$tmp/s91/sp/"
cp "$tr/build/sm90_trace" "$tmp/s91/tr/"
cp /tmp/var/trfs/sm90_trace "$tmp/s91/trfs/"
(cd "$tmp" && tar -cf - s91 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s91.tar.xz
ls -la devbin/s91.tar.xz
bash bench/check-cmds.sh devbin/s91.tar.xz "$here/cmds.txt" 570
