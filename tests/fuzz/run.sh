#!/usr/bin/env bash
# Time-boxed fuzzing, run by CI after the tests: libFuzzer (clang, with ASan + UBSan) on the
# safetensors/config parsers, on the whole load (config + header + data + a 2-token CPU
# generate) and on the tokenizer (tokenizer.json parse, encode/decode), SECONDS each (default 60),
# starting from the seed corpora. Without clang's libFuzzer it runs the C mutation loop of
# tests/test_fuzz_load.c for as long instead (ASan build).
# A crash fails the run; libFuzzer leaves the input in build-fuzz/ (append it to
# tests/fuzz/regress.bin or load_regress.bin as u32 LE length + bytes, or for the tokenizer add it
# to tests/fuzz/corpus_tokenizer/, so the tests replay it).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=build-fuzz
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

probe='int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }'
if command -v clang >/dev/null &&
    echo "$probe" | clang -x c -fsanitize=fuzzer - -o "$work/probe" 2>/dev/null; then
    srcs=$(ls src/*.c src/cpu/*.c src/perf/*.c src/tune/*.c src/llm/*.c src/text/*.c)
    libs=$(pkg-config --libs libpcre2-8 libutf8proc libcjson)
    flags=(-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined
           -fno-sanitize-recover=all -Iinclude -Isrc -Itests/fuzz)
    echo "fuzz: building the libFuzzer targets ($(clang --version | head -n 1))"
    # shellcheck disable=SC2086
    clang "${flags[@]}" tests/fuzz/fuzz_safetensors.c $srcs $libs -lm -lpthread -o "$work/fuzz_safetensors"
    # shellcheck disable=SC2086
    clang "${flags[@]}" tests/fuzz/fuzz_load.c tests/fuzz/load_seeds.c $srcs $libs -lm -lpthread \
        -o "$work/fuzz_load"
    # shellcheck disable=SC2086
    clang "${flags[@]}" tests/fuzz/fuzz_tokenizer.c $srcs $libs -lm -lpthread \
        -o "$work/fuzz_tokenizer"
    # shellcheck disable=SC2086
    clang -O1 -std=c11 -D_GNU_SOURCE -DLOAD_SEEDS_MAIN -Iinclude -Isrc tests/fuzz/load_seeds.c \
        $srcs $libs -lm -lpthread -o "$work/load_seeds"

    # corpora: the parser's seeds plus its minimized corpus (regress.bin records); the load seeds; the
    # tokenizer's seeds
    mkdir -p "$work/st" "$work/load" "$work/tok"
    cp tests/fuzz/corpus/* "$work/st/"
    cp tests/fuzz/corpus_tokenizer/* "$work/tok/"
    size=$(stat -c %s tests/fuzz/regress.bin)
    off=0
    i=0
    while [ $((off + 4)) -le "$size" ]; do
        n=$(od -An -tu4 -N4 -j"$off" tests/fuzz/regress.bin | tr -d ' ')
        dd if=tests/fuzz/regress.bin of="$work/st/r$i" bs=1 skip=$((off + 4)) count="$n" \
            status=none
        off=$((off + 4 + n))
        i=$((i + 1))
    done
    "$work/load_seeds" "$work/load"
    echo "fuzz: $(ls "$work/st" | wc -l) parser inputs, $(ls "$work/load" | wc -l) load seeds," \
        "$(ls "$work/tok" | wc -l) tokenizer inputs; ${secs} s each"
    "$work/fuzz_safetensors" -max_total_time="$secs" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/" "$work/st" 2>&1 |
        grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY)" || true
    "$work/fuzz_load" -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/" "$work/load" 2>&1 |
        grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY)" || true
    # encode/decode with the committed tiny.json (the entry loads it once)
    QMM_FUZZ_TOKENIZER=tests/fuzz/corpus_tokenizer/tiny.json "$work/fuzz_tokenizer" \
        -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/" "$work/tok" 2>&1 |
        grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY)" || true
    if ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* >/dev/null 2>&1; then
        echo "fuzz: FAILED, inputs in $out/"
        exit 1
    fi
    echo "fuzz: no crash"
else
    echo "fuzz: no clang with libFuzzer here: the C mutation loop for ${secs} s instead"
    [ -x build-asan/test_fuzz_load ] || make --no-print-directory test-asan
    QMM_FUZZ_SECONDS="$secs" QMM_FUZZ_RUNS=1000000000 build-asan/test_fuzz_load --filter mutation
fi
