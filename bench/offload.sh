#!/usr/bin/env bash
# Weight streaming against the resident run and the schedule model's prediction:
# `qmm run --offload-weights --buffers b` for b = 1, 2, 3 (each run first runs the resident
# session for the reference tokens and the per-layer compute time).
#
#   bench/offload.sh [BUILD_DIR] [MODEL] [PROMPT_LEN] [NEW_TOKENS] > log
#
# Defaults: build, qwen3-1.7b, 512 prompt tokens, 32 new tokens. Fails when any run fails or
# streaming changes the tokens.
set -euo pipefail
bin=${1:-build}
model=${2:-qwen3-1.7b}
prompt=${3:-512}
new=${4:-32}
for b in 1 2 3; do
    echo "=== --offload-weights --buffers $b"
    "$bin/qmm" run --model "$model" --prompt-len "$prompt" --max-new-tokens "$new" \
        --offload-weights --buffers "$b"
done
