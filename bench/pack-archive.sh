#!/usr/bin/env bash
# Packs a staged binaries' folder DIR (its name the archive's top folder) with the tokenizer's
# libraries (bench/carry-libs.sh) into ARCHIVE, a tar.xz for bench/device.sh's QMM_BIN_ARCHIVE.
#   bench/pack-archive.sh ARCHIVE DIR
set -euo pipefail
archive=${1:?usage: bench/pack-archive.sh ARCHIVE DIR}
dir=${2:?usage: bench/pack-archive.sh ARCHIVE DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$archive" in /*) ;; *) archive="$PWD/$archive" ;; esac
bash "$root/bench/carry-libs.sh" "$dir" >/dev/null
mkdir -p "$(dirname "$archive")"
(cd "$(dirname "$dir")" && tar -cf - "$(basename "$dir")" | xz -7 -T2 --lzma2=preset=7,dict=192MiB) >"$archive"
ls -la "$archive"
