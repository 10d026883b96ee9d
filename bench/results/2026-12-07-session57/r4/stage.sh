#!/usr/bin/env bash
# Builds devbin/s84.tar.xz for r4/cmds.txt, from the repository root: session 57's s80
# (next/stage.sh, rebuilt first if missing) plus ring_probe at HEAD (build/).
#   bash bench/results/2026-12-07-session57/r4/stage.sh
#   QMM_BIN_ARCHIVE=devbin/s84.tar.xz QMM_CMDS=bench/results/2026-12-07-session57/r4/cmds.txt \
#     QMM_PACK=$OUT/device.tar.gz QMM_COMMIT=<commit> BUDGET_S=300 bash bench/device.sh /tmp/n cmds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f devbin/s80.tar.xz ] || bash bench/results/2026-12-07-session57/next/stage.sh
ninja -C build ring_probe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf devbin/s80.tar.xz -C "$tmp"
mv "$tmp/s80" "$tmp/s84"
cp build/ring_probe "$tmp/s84/"
(cd "$tmp" && tar -cf - s84 | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >devbin/s84.tar.xz
ls -la devbin/s84.tar.xz
bash bench/check-cmds.sh devbin/s84.tar.xz "$here/cmds.txt" 300
