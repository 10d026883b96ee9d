#!/usr/bin/env bash
# Builds devbin/s74.tar.xz (r10/cmds.txt's and r11/cmds.txt's archive), from the repository root:
# g/ = the tree with gqa5.patch applied (GQA groups of 5 on the CUDA attention, Qwen3-14B: a
# helper's change, built and CPU-tested here, never run on a GPU), the top level = the rule
# before NOTES row 248 (s67's qmm and sm90_trace: `git worktree add /tmp/b67 887b6f5` and
# `cmake -S /tmp/b67 -B /tmp/b67/build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C
# /tmp/b67/build qmm sm90_trace` rebuild them where devbin/s67.tar.xz is gone).
set -euo pipefail
P=bench/results/2026-12-07-session54/r10/gqa5.patch
git apply --check -R "$P" 2>/dev/null || git apply "$P"
ninja -C build qmm test_ops gpu_llm gpu_llm_decode_steps gpu_llm_decode_ops gpu_llm_persistent mv_shapes
s=/tmp/s74/s74
rm -rf /tmp/s74 && mkdir -p $s/g
cp build/{qmm,test_ops,gpu_llm,gpu_llm_decode_steps,gpu_llm_decode_ops,gpu_llm_persistent,mv_shapes} $s/g/
if [ -f devbin/s67.tar.xz ]; then
    tar -xJf devbin/s67.tar.xz -C /tmp s67/qmm s67/sm90_trace && cp /tmp/s67/{qmm,sm90_trace} $s/
else
    cp /tmp/b67/build/{qmm,sm90_trace} $s/
fi
bash bench/carry-libs.sh $s >/dev/null
(cd /tmp/s74 && tar -cf - s74 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) > devbin/s74.tar.xz
ls -la devbin/s74.tar.xz
bash bench/check-cmds.sh devbin/s74.tar.xz bench/results/2026-12-07-session54/r10/cmds.txt
