#!/usr/bin/env bash
# (Ran at 49fdf5f with trigger.patch applied: the knob is not in the source any more.)
# Packs NOTES row 187's device call into devbin/g.tar.xz (run from the repository root after
# `ninja -C build`): g/qmm and g/gpu_llm the experiment build (-DQMM_EXP_MV_TRIGGER in
# decode_fused.cu: env QMM_MV_TRIGGER=mv|all, QMM_MV_PRE=n), g/base/qmm the landed a65be02
# binary out of devbin/c.tar.xz (session 34), g/lib the tokenizer's libraries.
set -euo pipefail
TESTS=gpu_llm bash bench/variant.sh trig "-DQMM_EXP_MV_TRIGGER" llm/cuda/decode_fused.cu >/dev/null
tmp=${TMPDIR:-/tmp}/qmm-s35 && rm -rf "$tmp" && mkdir -p "$tmp/g/base"
cp /tmp/var/trig/qmm /tmp/var/trig/gpu_llm "$tmp/g/"
tar -xJf devbin/c.tar.xz -C "$tmp" c/qmm && mv "$tmp/c/qmm" "$tmp/g/base/qmm"
bash bench/carry-libs.sh "$tmp/g" >/dev/null
tar -C "$tmp" -cf - g | xz -9 -T0 >devbin/g.tar.xz
ls -la devbin/g.tar.xz
