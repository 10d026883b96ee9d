#!/usr/bin/env bash
# Builds devbin/s95.tar.xz for r1/cmds_d.txt, and for session 62's r1 lists, whose programs it
# holds: session 62's s94 (its r1/stage.sh: qmm, gpu_kernels, gpu_sm90, mv_shapes, sm90_trace,
# test_ops of the commit to measure and h2/qmm), plus two experiment builds of the same tree by
# bench/variant.sh: za/ (-DQMM_EXP_ZERO_ACCS, NOTES.md row 274: qmm, sm90_trace, gpu_sm90,
# gpu_kernels) and wc/ (-DQMM_EXP_WIDE_CLUSTER, row 275: qmm, sm90_trace, gpu_sm90).
#   bash bench/results/2026-12-08-session63/r1/stage.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
bash bench/results/2026-12-08-session62/r1/stage.sh
TESTS="sm90_trace gpu_sm90 gpu_kernels" bash bench/variant.sh za "-DQMM_EXP_ZERO_ACCS" cuda/gemm_sm90.cu
# every source that calls qmm_sm90_cluster or reads the cluster table (tune/sm90.h)
TESTS="sm90_trace gpu_sm90" bash bench/variant.sh wc "-DQMM_EXP_WIDE_CLUSTER" \
    cuda/gemm_sm90.cu perf/wgmma.c plan_call.c plan_sm90.c tune/sm90.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s94.tar.xz -C "$tmp"
mv "$tmp/s94" "$tmp/s95"
mkdir "$tmp/s95/za" "$tmp/s95/wc"
cp /tmp/var/za/{qmm,sm90_trace,gpu_sm90,gpu_kernels} "$tmp/s95/za/"
cp /tmp/var/wc/{qmm,sm90_trace,gpu_sm90} "$tmp/s95/wc/"
bash bench/pack-archive.sh devbin/s95.tar.xz "$tmp/s95"
bash bench/check-cmds.sh devbin/s95.tar.xz "$here/cmds_d.txt" 570
