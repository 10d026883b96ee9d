#!/usr/bin/env bash
# ctest entry: what the compiler made of the Hopper wgmma kernels (src/cuda/gemm_sm90.cu, and the
# prefill attention's at the end), read from the built library with cuobjdump:
#   * every row of the tuning table (src/tune/sm90.h QMM_SM90_CONFIGS) at every group size (1, 2
#     or 4 groups a k-block) is a kernel instance in the library;
#   * its SASS runs the row's wgmma, HGMMA.64x<TN>x16.F32.BF16, at least 8 times (one k-block's
#     eight k16 steps), and no other HGMMA shape;
#   * its wgmmas are not serialized: at most one WARPGROUP.DEPBAR (a wait for wgmmas) for every
#     four HGMMA (the kernel waits once a k-block's eight; when ptxas runs short of registers it
#     waits after each, its warning C7512, and the tensor work no longer overlaps anything);
#   * no instance uses local memory for arrays (LOCAL) or a stack, where spills go (STACK):
#     the 256-token instances hold 128 accumulators a thread in 232 registers (NOTES.md row
#     161); the 64-token 128-row instances alone spill, up to 104 bytes, at their segment end
#     (NOTES.md row 274: the experiment build -DQMM_EXP_ZERO_ACCS has none).
# cuobjdump and nvdisasm come with the full CUDA toolkit, or from PyPI (nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm: .ci/run installs them into build/.venv). Without them the test skips
# (77), except in CI (CI=true), where it fails.
# usage: sass_check.sh LIBRARY TUNE_HEADER
set -uo pipefail
lib=$1
header=$2

missing() {
    if [ "${CI:-}" = "true" ]; then echo "FAIL (CI): $1"; exit 1; fi
    echo "SKIP: $1 (the CUDA toolkit's cuobjdump, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
    exit 77
}

# cuobjdump: $CUOBJDUMP, PATH, the toolkit, or the PyPI wheel in $PYTHON's site-packages
tool=${CUOBJDUMP:-}
[ -n "$tool" ] || tool=$(command -v cuobjdump || true)
[ -n "$tool" ] || { [ -x /usr/local/cuda/bin/cuobjdump ] && tool=/usr/local/cuda/bin/cuobjdump; }
if [ -z "$tool" ] && [ -n "${PYTHON:-}" ]; then
    tool=$("$PYTHON" -c 'import glob, os, sys
for p in sys.path:
    for f in sorted(glob.glob(os.path.join(p, "nvidia", "cu*", "bin", "cuobjdump"))):
        print(f); sys.exit()' 2>/dev/null || true)
fi
[ -n "$tool" ] && [ -x "$tool" ] || missing "no cuobjdump"
# cuobjdump -sass runs nvdisasm from its own folder or PATH
export PATH="$(dirname "$tool"):$PATH"
command -v nvdisasm >/dev/null || missing "no nvdisasm beside $tool"
[ -f "$lib" ] || { echo "FAIL: no library $lib"; exit 1; }

sass=$(mktemp) res=$(mktemp)
trap 'rm -f "$sass" "$res"' EXIT
"$tool" -sass "$lib" >"$sass" 2>&1 || { echo "FAIL: cuobjdump -sass $lib"; head -5 "$sass"; exit 1; }
"$tool" -res-usage "$lib" >"$res" 2>&1 || { echo "FAIL: cuobjdump -res-usage $lib"; exit 1; }

# the tuning table's rows: X(TN, WG, STAGES, BLOCKS_PER_SM) inside QMM_SM90_CONFIGS(X)
rows=$(awk '/^#define QMM_SM90_CONFIGS\(X\)/ { on = 1 } on { print } on && !/\\$/ { exit }' "$header" |
    grep -o 'X([0-9]*, [0-9]*, [0-9]*, [0-9]*)' | tr -d 'X() ' )
[ -n "$rows" ] || { echo "FAIL: no QMM_SM90_CONFIGS rows in $header"; exit 1; }

fails=0 checked=0
for row in $rows; do
    IFS=, read -r tn wg st bps <<<"$row"
    # the 48-, 64- and 128-token tiles also have the instantiation that copies a partial last
    # tile's rows only (PARTIAL, gemm_sm90.cu sm90_partial_boxes)
    partials=0
    [ "$tn" = 48 ] || [ "$tn" = 64 ] || [ "$tn" = 128 ] && partials="0 1"
    for p in $partials; do
    for gpb in 1 2 4; do
        name="_ZN3qmm24gemm_sm90_w4_bf16_kernelILi${tn}ELi${wg}ELi${st}ELi${bps}ELi${gpb}ELb${p}EEEvNS_8Sm90MapsIXT4_EEENS_8Sm90ArgsE"
        what="TN $tn WG $wg stages $st, $gpb group(s) a k-block$([ "$p" = 1 ] && echo ', partial tile')"
        body=$(awk -v f="Function : $name" 'index($0, "Function : ") { on = index($0, f) > 0; next } on' "$sass")
        if [ -z "$body" ]; then
            echo "FAIL: $what: no kernel $name in $lib"; fails=$((fails + 1)); continue
        fi
        want=$(grep -c "HGMMA\.64x${tn}x16\.F32\.BF16" <<<"$body")
        other=$(grep -o 'HGMMA\.[0-9x]*' <<<"$body" | grep -vc "HGMMA\.64x${tn}x16" || true)
        waits=$(grep -c 'WARPGROUP\.DEPBAR' <<<"$body" || true)
        usage=$(grep -A1 "Function $name:" "$res" | tail -n 1)
        stack=$(grep -o 'STACK:[0-9]*' <<<"$usage" | cut -d: -f2)
        local_b=$(grep -o 'LOCAL:[0-9]*' <<<"$usage" | cut -d: -f2)
        regs=$(grep -o 'REG:[0-9]*' <<<"$usage" | cut -d: -f2)
        bad=""
        [ "$want" -ge 8 ] || bad="$bad; $want HGMMA.64x${tn}x16 (want >= 8)"
        [ "$other" -eq 0 ] || bad="$bad; $other HGMMA of another shape"
        [ $((waits * 4)) -le "$want" ] || bad="$bad; $waits WARPGROUP.DEPBAR for $want HGMMA (wgmmas serialized)"
        [ -n "$stack" ] && [ -n "$local_b" ] || bad="$bad; no resource usage line"
        [ "${local_b:-1}" -eq 0 ] || bad="$bad; LOCAL $local_b bytes"
        max_stack=0
        [ "$tn" = 64 ] && [ "$wg" = 2 ] && max_stack=104
        [ "${stack:-1}" -le "$max_stack" ] || bad="$bad; STACK $stack bytes (spills; at most $max_stack)"
        if [ -n "$bad" ]; then
            echo "FAIL: $what:${bad#;}"; fails=$((fails + 1))
        else
            printf '  ok  %-40s %3d HGMMA.64x%sx16, %d waits, %s registers, stack %s B\n' "$what" "$want" "$tn" \
                "$waits" "$regs" "$stack"
        fi
        checked=$((checked + 1))
    done
    done
done

# the warpgroup-MMA prefill attention (src/llm/cuda/attention_prefill_wgmma.cu), nothing in
# local memory in either schedule: a tile at a time (PIPE 0), a tile's S = Q·Kᵀ as eight
# HGMMA.64x64x16 and its O += P·V as four HGMMA.64x128x16 with B read transposed (tnspB), one
# wait after each product; pipelined (PIPE 1), the same shapes in whole products (the loop is
# unrolled twice and its last tile peeled), with waits that leave one group in flight
# (DEPBAR.LE gsb0, 0x1; ptxas serializes the wgmmas instead when it cannot track them, C7514)
for pipe in 0 1; do
    name=_ZN7qmm_llm25attn_prefill_wgmma_kernelILb${pipe}EEEvPK13__nv_bfloat16lS3_S3_PKiiiilPS1_Py
    body=$(awk -v f="Function : $name" 'index($0, "Function : ") { on = index($0, f) > 0; next } on' "$sass")
    usage=$(grep -A1 "Function $name:" "$res" | tail -n 1)
    local_b=$(grep -o 'LOCAL:[0-9]*' <<<"$usage" | cut -d: -f2)
    qk=$(grep -c 'HGMMA\.64x64x16\.F32\.BF16' <<<"$body")
    pv=$(grep -c 'HGMMA\.64x128x16\.F32\.BF16.*tnspB' <<<"$body")
    all=$(grep -c 'HGMMA' <<<"$body")
    waits=$(grep -c 'WARPGROUP\.DEPBAR' <<<"$body")
    overlap=$(grep -c 'WARPGROUP\.DEPBAR\.LE gsb0, 0x1' <<<"$body")
    what="prefill attention (PIPE $pipe): $qk HGMMA.64x64x16, $pv HGMMA.64x128x16 tnspB, $all HGMMA, $waits waits ($overlap leaving one group in flight), LOCAL ${local_b:-?} bytes"
    if [ -z "$body" ]; then
        echo "FAIL: prefill attention: no kernel $name in $lib"; fails=$((fails + 1))
    elif [ "${local_b:-1}" -ne 0 ] || [ $((qk + pv)) -ne "$all" ] || [ $((qk % 8)) -ne 0 ] ||
        [ $((pv % 4)) -ne 0 ] || { [ "$pipe" = 0 ] && { [ "$qk" -ne 8 ] || [ "$pv" -ne 4 ] || [ "$waits" -ne 2 ]; }; } ||
        { [ "$pipe" = 1 ] && { [ "$qk" -lt 16 ] || [ "$overlap" -lt 2 ] || [ $((waits * 4)) -gt "$all" ]; }; }; then
        echo "FAIL: $what"; fails=$((fails + 1))
    else
        echo "  ok  $what"
    fi
    checked=$((checked + 1))
done

echo "$checked kernel instances checked with $tool, $fails failed"
[ "$fails" -eq 0 ]
