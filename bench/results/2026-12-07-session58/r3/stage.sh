#!/usr/bin/env bash
# Builds devbin/s86.tar.xz for r3/cmds.txt (NOTES row 262, the decode matvec in groups of 64
# and 32), from the repository root at that commit: build/'s qmm, test_ops, gpu_llm_decode_steps, gpu_kernels and
# gpu_mlx_reference, session 57's s80 lib/ (the tokenizer's libraries), and mlx/, the MLX
# reference checkpoints and logits in groups of 64 (tests/mlx/make_reference.py with
# build/mlx-venv, `make mlx-venv`; the g128 model and the CPU test's files left out for the
# device tool's 64 MB), so `gpu_mlx_reference --filter g64` runs.
#   bash bench/results/2026-12-07-session58/r3/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s86.tar.xz QMM_CMDS=bench/results/2026-12-07-session58/r3/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=560 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
git diff --quiet HEAD -- src tests tools || { echo "stage.sh: the tree differs from HEAD" >&2; exit 1; }
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
ninja -C build qmm test_ops gpu_mlx_reference gpu_llm_decode_steps gpu_kernels
[ -x build/mlx-venv/bin/python3 ] || make mlx-venv
[ -f build/mlx/OK ] || build/mlx-venv/bin/python3 tests/mlx/make_reference.py build/mlx --qmm build/qmm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp" s80/lib
mv "$tmp/s80" "$tmp/s86"
cp build/{qmm,test_ops,gpu_mlx_reference,gpu_llm_decode_steps,gpu_kernels} "$tmp/s86/"
mkdir "$tmp/s86/mlx"
for f in OK g64 g64.ref.safetensors g64-mixed g64-mixed.ref.safetensors qmm-g64 qmm-g64.ref.safetensors; do
    cp -r "build/mlx/$f" "$tmp/s86/mlx/"
done
mkdir -p devbin
(cd "$tmp" && tar -cf - s86 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s86.tar.xz
ls -la devbin/s86.tar.xz
bash bench/check-cmds.sh devbin/s86.tar.xz "$here/cmds.txt" 560
