#!/usr/bin/env bash
# Session 38, call 3 (from the repository root on the device): the cluster_fuse probe
# (bench/probe/cluster_fuse.cu at b253222 + the probe, built here, devbin/p.tar.xz), then
# cmds.txt through bench/device.sh with devbin/q.tar.xz. Logs under $OUT.
set -uo pipefail
mkdir -p /tmp/pp && tar -C /tmp/pp -xJf devbin/p.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(LD_LIBRARY_PATH=/tmp/pp/p/lib:${LD_LIBRARY_PATH:-} timeout 120 /tmp/pp/p/cluster_fuse 2>&1; echo "rc=$?") | tee "$OUT/cluster_fuse.log"
QMM_BIN_ARCHIVE=devbin/q.tar.xz QMM_CMDS=bench/results/2026-12-05-session38/r3-probe/cmds.txt \
    QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=83fa4a6 BUDGET_S=400 bash bench/device.sh /tmp/dev3 cmds
