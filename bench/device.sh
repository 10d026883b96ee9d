#!/usr/bin/env bash
# Build, test and benchmark qmm on a GPU machine in one command, within a time budget. Every
# command's log goes to OUTDIR as it runs, and one summary line per command to stdout (and to
# OUTDIR/summary.txt, printed again at the end), so the tail of stdout alone says what happened.
#
#   bench/device.sh OUTDIR [STEPS...]
#
# Steps, run in the order given (default: build tests sanitize reliability ops overlap e2e):
#   build        cmake + ninja into build-device (not when QMM_BIN or QMM_BIN_ARCHIVE is set)
#   tests        gpu_kernels, test_ops, `qmm plan`, every other gpu_* binary: a line each (the
#                two-GPU gpu_tp* may skip, exit 77, on a one-GPU machine)
#   sanitize     compute-sanitizer memcheck + racecheck on gpu_kernels small/, memcheck on
#                dense/small and gpu_pipeline
#   reliability  gpu_reliability, gpu_llm_soak, and the engine under all four sanitizer tools
#   ops overlap e2e   the benchmarks at their defaults (+ QMM_OPS_ARGS, QMM_OVERLAP_ARGS,
#                QMM_E2E_ARGS)
#   quick        test_ops, gpu_llm, gpu_llm_decode_ops
#   san          memcheck, racecheck, synccheck on `test_ops --filter matvec_fused`; memcheck,
#                racecheck on rope; memcheck on attn_prefill; memcheck, racecheck on the engine
#                (`gpu_llm_soak --filter small_model`)
#   e2e3         qmm bench e2e, qwen3-4b, 32/128/2048 -> 65/129/129 tokens, 3 repeats, --profile
#   opsM         qmm bench ops on q,k,o,gate,down at M = OPS_MS (default 1,8,16)
#   cmds         the lines of the file QMM_CMDS, each `NAME LIMIT COMMAND...` (blank lines and
#                # comments skipped): COMMAND run by bash under its own limit, with B the
#                binaries' folder (e.g. $B/qmm, $B/base/qmm for a variant packed beside them) and
#                L this OUTDIR exported: a session's own experiment, A/B runs alternating builds
#
# Time: BUDGET_S (default 540) seconds for the whole script. Each command runs under `timeout`
# with the smaller of its own limit and the time left; one that would start with less than
# QMM_MIN_LEFT_S (default 20, or its own limit if smaller) left is skipped, saying so. A command
# that times out is reported (rc=124) and the script goes on.
# Binaries: QMM_BIN (a build folder), or QMM_BIN_ARCHIVE (a tar archive of one, e.g. the lead's
# devbin/a.tar.xz holding a/: unpacked once under /tmp, then used as QMM_BIN). The folder and its
# lib/ (the tokenizer's libraries, bench/carry-libs.sh) go on LD_LIBRARY_PATH; its mlx/, if any,
# becomes QMM_MLX_DIR.
# Logs back from the device tool (8 files at most): QMM_PACK=$OUT/device.tar.gz, outside OUTDIR.
# OUTDIR is packed into it after every command and at exit (a signal too), with
# $OUT/device.summary.txt beside it, so a run cut short still brings back what it did. An OUTDIR
# that already holds files is first moved to OUTDIR.old-TIME-PID (said on stdout): a second call
# into it on a warm machine starts afresh, the first's pack having come back with that call.
# QMM_COMMIT: the commit the benchmarks record (default: git rev-parse). QMM_TEST_S: one test
# binary's limit (default 180 s). QMM_STDBUF=0: no line-buffered output (stdbuf) for the commands.
# QMM_REQUIRE_GPU (default 1): exported to every command (cmds lines too), so a test that would
# skip for lack of a GPU fails instead (tests/harness.h), and an exit 77 that comes all the same
# counts as a failure here: on the GPU machine a skip means the driver or runtime failed. Only the
# two-GPU programs (gpu_tp*, whose harness still skips on a one-GPU machine, and fails on none)
# and `cmds` lines (h200only.sh's 77: a line not for this card) may skip; every command may when
# the script is run with QMM_REQUIRE_GPU=0.
# Exit code: 0 when every command passed (a test's exit 77, "skipped", counts as passed where it
# may skip); 1 when one failed, timed out or was skipped; 128 + N after signal N.
set -uo pipefail
out=${1:?usage: bench/device.sh OUTDIR [STEPS...]}
shift
steps=${*:-build tests sanitize reliability ops overlap e2e}
BUDGET_S=${BUDGET_S:-540}
MIN_LEFT_S=${QMM_MIN_LEFT_S:-20}
TEST_S=${QMM_TEST_S:-180} # one test binary (gpu_llm_soak took 122 s on 2026-12-01)
SAN_S=240                 # one compute-sanitizer run
T0=$(date +%s)
export QMM_COMMIT=${QMM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export QMM_REQUIRE_GPU=${QMM_REQUIRE_GPU:-1} # a test's skip for lack of a GPU is a failure
# an OUTDIR holding files (a lent machine's /tmp can keep an earlier session's run under the
# same name) is moved aside, so that what is packed is this run's alone
stale=""
if [ -d "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    stale=${out%/}.old-$(date +%s)-$$
    mv "$out" "$stale" || exit 2
fi
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
summary=$out/summary.txt
: >"$summary"
ran=0 failed=0 timedout=0 skipped=0 child="" last_log=""

say() { printf '%s\n' "$*" | tee -a "$summary"; } # stdout and the summary
[ -z "$stale" ] || say "-- $out held files of an earlier run: moved to $stale"
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }

# pack: OUTDIR into QMM_PACK, written aside and renamed, so a kill mid-way keeps the last one
pack() {
    [ -n "${QMM_PACK:-}" ] || return 0
    tar -czf "$QMM_PACK.part" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
    [ $? -le 1 ] && mv -f "$QMM_PACK.part" "$QMM_PACK" # 1: a log grew while read (a signal)
    cp -f "$summary" "${QMM_PACK%.tar.gz}.summary.txt"
}

# run NAME LIMIT CMD...: CMD under timeout (LIMIT, or what is left of the budget), its output in
# OUTDIR/NAME.log (NAME-2.log, ... when taken); a summary line when it ends, the archive
# refreshed. Returns CMD's exit code: 124 or 137 when it timed out, 125 when skipped.
# may_skip=1 run ...: CMD's exit 77 is a skip even under QMM_REQUIRE_GPU=1 (a two-GPU test, a `cmds` line)
run() {
    local name=$1 limit=$2 left log n=2 t rc buf=()
    shift 2
    left=$(left)
    last_log=""
    if ((left < 1 || left < (limit < MIN_LEFT_S ? limit : MIN_LEFT_S))); then
        skipped=$((skipped + 1))
        say "-- $name: skipped, $left s left of the $BUDGET_S s budget"
        return 125
    fi
    ((limit > left)) && limit=$left
    log=$out/$name.log
    while [ -e "$log" ]; do log=$out/$name-$((n++)).log; done
    # line-buffered stdout, so a killed command's log ends where it was; not under the
    # sanitizer, which injects itself into the process
    [ "${QMM_STDBUF:-1}" = 1 ] && command -v stdbuf >/dev/null && buf=(stdbuf -oL -eL)
    [ "$1" = compute-sanitizer ] && buf=()
    t=$(date +%s)
    # in the background: a signal to this script is handled at once (finish stops the command)
    timeout -k 5 "$limit" "${buf[@]}" "$@" >"$log" 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    child=""
    last_log=$log
    report "$name" "$rc" "$(($(date +%s) - t))" "$limit" "$log"
    pack
    return "$rc"
}

# report NAME RC SECONDS LIMIT LOG: the line (the harness's "N passed, M failed", the sanitizer's
# SUMMARY lines), then on failure the first FAIL or sanitizer error lines, else the log's last;
# an exit 77 under QMM_REQUIRE_GPU=1 is a failure (a skip where a GPU is required), unless may_skip
report() {
    local name=$1 rc=$2 s=$3 limit=$4 log=$5 verdict found detail
    ran=$((ran + 1))
    case $rc in
    0) verdict=ok ;;
    77) if [ "${QMM_REQUIRE_GPU:-}" = 1 ] && [ "${may_skip:-0}" != 1 ]; then
            verdict="FAILED (rc=77, a skip where a GPU is required)" failed=$((failed + 1))
        else
            verdict="skipped itself (77)"
        fi ;;
    124 | 137) verdict="TIMED OUT (rc=$rc)" timedout=$((timedout + 1)) ;;
    *) verdict="FAILED (rc=$rc)" failed=$((failed + 1)) ;;
    esac
    found=$(grep -aE '^[0-9]+ passed, [0-9]+ failed|(ERROR|RACECHECK|SYNCCHECK|INITCHECK) SUMMARY' \
        "$log" | sed -E 's/^=+ //' | tail -n 3 | awk 'NR > 1 { printf " | " } { printf "%s", $0 }')
    say "== $name: $verdict in $s s (limit $limit s)${found:+ | $found}"
    case $verdict in ok | skipped*) return ;; esac
    local errors='^=+ (Invalid|Error|Race|Barrier|Uninitialized|Leaked|Program hit)' # sanitizer
    detail=$(grep -aE "^FAIL|^    FAIL|$errors" "$log" | head -n 5)
    [ -n "$detail" ] || detail=$(grep -av '^[[:space:]]*$' "$log" | tail -n 3)
    [ -z "$detail" ] || say "$(cut -c1-200 <<<"$detail" | sed 's/^ */     /')"
}

# racecheck reports hazards inside cuBLAS's nvjet kernels (mbarrier-ordered TMA/wgmma copies it
# cannot see through); excluding them with --kernel-name-exclude crashed the sanitizer on the
# H200 (2026-11-29), so the log is checked instead: any hazard outside nvjet fails.
races_outside_nvjet() {
    [ -n "$last_log" ] || return 0
    if grep -aE "Race reported|Error:" "$last_log" | grep -vq nvjet; then
        failed=$((failed + 1))
        say "   racecheck: hazards in our kernels"
    else
        say "   racecheck: no hazard outside cuBLAS's nvjet kernels"
    fi
}

# the binaries: QMM_BIN_ARCHIVE unpacked once (a folder named by the archive's size and time),
# else QMM_BIN, else the build step's folder
setup_bins() {
    if [ -n "${QMM_BIN_ARCHIVE:-}" ]; then
        local dest top t
        t=$(date +%s)
        dest=${TMPDIR:-/tmp}/qmm-bin.$(stat -c %s.%Y "$QMM_BIN_ARCHIVE") || exit 2
        if [ ! -e "$dest/.unpacked" ]; then
            { rm -rf "$dest" && mkdir -p "$dest" && tar -xf "$QMM_BIN_ARCHIVE" -C "$dest"; } ||
                { say "-- cannot unpack $QMM_BIN_ARCHIVE"; exit 2; }
            touch "$dest/.unpacked"
            say "-- unpacked $QMM_BIN_ARCHIVE in $(($(date +%s) - t)) s"
        fi
        top=("$dest"/*) # one folder inside (the pack's a/): the binaries are there
        [ ${#top[@]} = 1 ] && [ -d "${top[0]}" ] && dest=${top[0]}
        QMM_BIN=$dest
    fi
    bin=${QMM_BIN:-build-device}
    case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
    # the device image lacks the tokenizer's libraries (libpcre2-8, libutf8proc, libcjson): a
    # carried build brings them in lib/ (bench/carry-libs.sh), libqmm.so beside the binaries
    export LD_LIBRARY_PATH="$bin/lib:$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ -z "${QMM_MLX_DIR:-}" ] && [ -d "$bin/mlx" ]; then export QMM_MLX_DIR=$bin/mlx; fi
}

machine_info() {
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "commit: $QMM_COMMIT"
        echo "binaries: $bin"
        timeout 30 nvidia-smi --format=csv \
            --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem
        timeout 30 nvcc --version | tail -n 2
    } >"$out/machine.txt" 2>&1
    cat "$out/machine.txt"
}

# on exit, however it comes: stop a running command, the counts, the summary again, the archive
finish() {
    local rc=$? status=0
    trap "" TERM INT HUP # ignore a second (timeout signals the script, then its group)
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null # timeout passes it on to the command
        wait "$child" 2>/dev/null
        say "-- interrupted by a signal while a command ran (its log is kept as far as it got)"
    fi
    ((failed + timedout + skipped)) && status=1
    ((rc)) && status=$rc
    say "=== done in $(($(date +%s) - T0)) s: $ran run, $failed failed, $timedout timed out," \
        "$skipped skipped; exit $status"
    echo "=== summary (also in $summary)"
    cat "$summary"
    pack
    exit "$status"
}

# ---- the steps -------------------------------------------------------------------------------
step_build() {
    if [ -n "${QMM_BIN:-}" ]; then
        say "-- build: not needed, binaries in $bin"
        return
    fi
    # shellcheck disable=SC2016 # the inner shell expands $1
    run build "$(left)" bash -c 'cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
        ninja -C "$1"' _ "$bin"
}

step_tests() {
    local t
    run gpu_kernels "$TEST_S" "$bin/gpu_kernels"
    # the op table: every CUDA matmul path and engine kernel against the CPU definitions
    run test_ops "$TEST_S" "$bin/test_ops"
    run plan-device 30 "$bin/qmm" plan --model qwen3-4b --policy device
    for t in "$bin"/gpu_*; do
        [ -x "$t" ] || continue
        case ${t##*/} in
        gpu_kernels) ;;
        # two GPUs: on a one-GPU machine these skip ("needs 2 CUDA devices"), which is no failure
        gpu_tp*) may_skip=1 run "${t##*/}" "$TEST_S" "$t" ;;
        *) run "${t##*/}" "$TEST_S" "$t" ;;
        esac
    done
}

step_sanitize() {
    # the small/ cases run our kernels, and cuBLAS where the plan picks the dense path (M >= 128)
    run sanitize-memcheck "$SAN_S" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$bin/gpu_kernels" --filter small/
    run sanitize-racecheck "$SAN_S" compute-sanitizer --tool racecheck "$bin/gpu_kernels" \
        --filter small/
    races_outside_nvjet
    run sanitize-dense "$SAN_S" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$bin/gpu_kernels" --filter dense/small
    run sanitize-pipeline "$SAN_S" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$bin/gpu_pipeline"
}

step_reliability() {
    # device out-of-memory, two threads, 10 000 decode steps (also run by the tests step: here
    # again, with the engine's kernels under all four compute-sanitizer tools)
    local t tool extra
    for t in gpu_reliability gpu_llm_soak; do run "$t" "$TEST_S" "$bin/$t"; done
    for tool in memcheck racecheck synccheck initcheck; do
        extra=()
        [ "$tool" = memcheck ] && extra=(--leak-check full)
        run "sanitize-engine-$tool" "$SAN_S" compute-sanitizer --tool "$tool" "${extra[@]}" \
            --error-exitcode 9 "$bin/gpu_llm_soak" --filter small_model
    done
    run sanitize-paths-memcheck "$SAN_S" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$bin/gpu_llm_soak" --filter small_matmul
}

# ops_rows MD: proj, M, plan, auto, matvec, read, auto / read, auto eager (µs) of an ops table
ops_rows() {
    grep -E "^\| (q|k|o|gate|down) " "$1" 2>/dev/null |
        awk -F'|' '{ print $2, $4, $5, $6, $10, $11, $12, $15 }'
}
# e2e_rows MD: the whole-model table's rows (prefill and decode per length, split-K on / off)
e2e_rows() { grep -E '^\| [0-9]+ -> |on / off' "$1" 2>/dev/null; }
say_rows() { [ -z "$1" ] || say "$1"; } # say_rows TEXT: TEXT into the summary, if any

step_ops() {
    # shellcheck disable=SC2086 # the extra arguments are words
    run ops 360 "$bin/qmm" bench ops --out "$out/ops.md" --csv "$out/ops.csv" \
        --json "$out/ops.json" ${QMM_OPS_ARGS:-}
    ops_rows "$out/ops.md" | head -n 60
}

step_overlap() {
    # shellcheck disable=SC2086
    run overlap 120 "$bin/qmm" bench overlap --out "$out/overlap.md" --csv "$out/overlap.csv" \
        ${QMM_OVERLAP_ARGS:-}
}

step_e2e() {
    # shellcheck disable=SC2086
    run e2e 300 "$bin/qmm" bench e2e --model qwen3-4b --out "$out/e2e.md" --json "$out/e2e.json" \
        ${QMM_E2E_ARGS:-} && say_rows "$(e2e_rows "$out/e2e.md")"
}

step_quick() {
    local t
    for t in test_ops gpu_llm gpu_llm_decode_ops; do run "$t" 120 "$bin/$t"; done
}

step_san() {
    local spec
    for spec in "memcheck matvec_fused" "racecheck matvec_fused" "synccheck matvec_fused" \
        "memcheck rope" "racecheck rope" "memcheck attn_prefill"; do
        # shellcheck disable=SC2086 # the tool and the filter
        set -- $spec
        run "san_$1_$2" 120 compute-sanitizer --tool "$1" --error-exitcode 9 "$bin/test_ops" \
            --filter "$2"
    done
    for spec in memcheck racecheck; do
        run "san_engine_$spec" 150 compute-sanitizer --tool "$spec" --error-exitcode 9 \
            "$bin/gpu_llm_soak" --filter small_model
    done
}

step_e2e3() {
    run e2e3 240 "$bin/qmm" bench e2e --model qwen3-4b --input-len 32,128,2048 \
        --output-len 65,129,129 --warmup 1 --repeats 3 --profile --out "$out/e2e3.md" \
        --json "$out/e2e3.json" && say_rows "$(e2e_rows "$out/e2e3.md")"
}

step_opsM() {
    run opsM 200 "$bin/qmm" bench ops --proj q,k,o,gate,down --m "${OPS_MS:-1,8,16}" \
        --out "$out/opsM.md" --csv "$out/opsM.csv" --json "$out/opsM.json" &&
        say_rows "$(ops_rows "$out/opsM.md")"
}

step_cmds() {
    local line name limit cmd
    [ -r "${QMM_CMDS:-}" ] || { failed=$((failed + 1)) && say "-- cmds: no readable QMM_CMDS file"; return; }
    cp -f "$QMM_CMDS" "$out/cmds.txt"
    export B=$bin L=$out
    while IFS= read -r line || [ -n "$line" ]; do
        case $line in '' | '#'*) continue ;; esac
        read -r name limit cmd <<<"$line"
        if ! [[ $limit =~ ^[0-9]+$ ]] || [ -z "$cmd" ]; then
            failed=$((failed + 1))
            say "-- cmds: not NAME LIMIT COMMAND: $line"
            continue
        fi
        # a line's own exit 77 is a skip (h200only.sh: not for this card); the programs it runs
        # still fail without a GPU (QMM_REQUIRE_GPU=1 reaches them)
        case $cmd in # the sanitizer injects itself into the process: no stdbuf under it
        *compute-sanitizer*) QMM_STDBUF=0 may_skip=1 run "$name" "$limit" bash -c "$cmd" ;;
        *) may_skip=1 run "$name" "$limit" bash -c "$cmd" ;;
        esac
    done <"$QMM_CMDS"
}

# ---- main ----------------------------------------------------------------------------------------
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
setup_bins
machine_info
for s in $steps; do
    if declare -F "step_$s" >/dev/null; then
        echo "=== $s ($(date -u +%H:%M:%S), $(left) s of $BUDGET_S left)"
        "step_$s"
    else
        failed=$((failed + 1))
        say "-- unknown step $s"
    fi
done
: # ends with status 0 (not the last command's): finish sets the exit code from the counts
