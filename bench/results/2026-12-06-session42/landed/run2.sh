# the second call: cmds2.txt on any GPU, then on an H200 also cmds.txt (the H200's timings)
set -u
QMM_BIN_ARCHIVE=devbin/l42.tar.xz QMM_CMDS=bench/results/2026-12-06-session42/landed/cmds2.txt QMM_PACK=$OUT/t2.tar.gz QMM_COMMIT=${C:-row213} BUDGET_S=200 bash bench/device.sh /tmp/rt cmds 2>&1 | tail -8
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  QMM_BIN_ARCHIVE=devbin/l42.tar.xz QMM_CMDS=bench/results/2026-12-06-session42/landed/cmds.txt QMM_PACK=$OUT/h200.tar.gz QMM_COMMIT=${C:-row213} BUDGET_S=380 bash bench/device.sh /tmp/rh cmds 2>&1 | tail -16
fi
