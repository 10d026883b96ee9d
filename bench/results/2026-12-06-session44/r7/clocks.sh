#!/usr/bin/env bash
# M = 512's two modes (row 224): while nvidia-smi samples the SM clock, power and throttle
# reasons every 10 ms, `sm90_trace gate 512 sk` twelve times (each line stamped), then
# `qmm bench ops` on gate, up, down at M = 512.
# usage: clocks.sh BINDIR OUTDIR
set -u
bin=${1:?} out=${2:?}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,nounits -lms 10 >"$out/smi.csv" 2>&1 &
smi=$!
sleep 1
for i in $(seq 12); do
    t0=$(date +%H:%M:%S.%N)
    r=$("$bin/sm90_trace" gate 512 sk 2>/dev/null | grep -v '^proj,')
    echo "$t0 $(date +%H:%M:%S.%N) $r"
done >"$out/trace_stamped.txt"
echo "ops start $(date +%H:%M:%S.%N)" >"$out/ops_stamps.txt"
"$bin/qmm" bench ops --proj gate,up,down --m 512 --no-ceilings --csv "$out/ops.csv" --out "$out/ops.md" >"$out/ops.log" 2>&1
rc=$?
echo "ops end $(date +%H:%M:%S.%N)" >>"$out/ops_stamps.txt"
sleep 1
kill $smi
exit $rc
