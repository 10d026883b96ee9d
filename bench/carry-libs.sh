#!/usr/bin/env bash
# Copy the shared libraries the qmm tool needs beyond the CUDA toolkit (the tokenizer's PCRE2,
# utf8proc and cJSON, which the device machine's image does not have) into BIN/lib, so that a
# build folder carried to the device runs there (bench/device.sh adds BIN/lib to the loader path).
#   bench/carry-libs.sh BIN        e.g. bench/carry-libs.sh build
set -euo pipefail
bin=${1:?usage: bench/carry-libs.sh BIN}
mkdir -p "$bin/lib"
ldd "$bin/qmm" | awk '/libpcre2-8|libutf8proc|libcjson/ { print $3 }' | while read -r lib; do
    cp -L "$lib" "$bin/lib/"
    echo "carry-libs: $(basename "$lib")"
done
