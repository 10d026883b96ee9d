#!/usr/bin/env bash
# bench/device.sh without a GPU: stub binaries (one passes, one fails, one sleeps past its limit,
# a qmm that writes benchmark tables) and a stub compute-sanitizer, carried as an archive the way
# the lead packs them. Checks the time budget (a timeout, then skips), the summary lines, the
# logs, the archive packed while it runs and at exit, a run stopped by SIGTERM, and an OUTDIR
# left by an earlier run, and QMM_REQUIRE_GPU (exported; a skip fails, except a two-GPU test's).
# usage: device_sh_check.sh DEVICE_SH WORK_DIR   (bash, coreutils, tar; about 5 s)
set -uo pipefail
dev=$(realpath "$1")
work=$2
rm -rf "$work"
mkdir -p "$work/src/a/lib" "$work/path" "$work/OUT"
work=$(realpath "$work")
pass=0 fail=0
check() { # check NAME CMD...: CMD succeeds
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)) && echo "FAIL $name"; fi
}
has() { grep -qE -- "$2" "$1"; } # has FILE REGEX
lacks() { ! has "$@"; }

# one stub, copied under every binary's name; it acts by its name (STUB_HANG: the one that hangs)
cat >"$work/stub" <<'EOF'
#!/usr/bin/env bash
if [ "${0##*/}" = "${STUB_HANG:-}" ]; then
    [ -n "${QMM_PACK:-}" ] && tar -tzf "$QMM_PACK" >"$STUB_DIR/hanging" 2>&1 # packed so far
    echo "$$" >>"$STUB_DIR/pids"; echo "ok before_the_hang (1.0 ms)"; exec sleep 20
fi
case ${0##*/} in
gpu_llm) echo "ok case_a (1.0 ms)"; echo "    FAIL t.c:1 [case_b] 2.0 > 1e-2"
         echo "FAIL case_b (1.0 ms)"; echo "1 passed, 1 failed"; exit 1 ;;
gpu_tp) echo "require: ${QMM_REQUIRE_GPU-unset}"; echo "SKIP: needs two GPUs"; exit 77 ;;
gpu_nodev) echo "SKIP: no CUDA device (the driver failed)"; echo "0 passed, 0 failed, all skipped"
           exit 77 ;; # a harness that skips all the same under QMM_REQUIRE_GPU=1
nvidia-smi) echo "NVIDIA H200 (stub)" ;;
qmm) while [ $# -gt 0 ]; do case $1 in --out) md=$2 ;; --json | --csv) : >"$2" ;; esac; shift; done
     [ -n "${md:-}" ] && printf '| 32 -> 65 | on | 2.7 | 11932 | 85.1 | 751.9 |\n| q | 2560→4096 | 8 | matvec/1 | 6.34 | 18 | – | 8 | 6.16 | 3.52 | 1.80 | – | 7.7 | 6.87 |\n' >"$md"
     echo "lib path: $LD_LIBRARY_PATH" ;;
compute-sanitizer)
    tool=memcheck
    while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift 2 ;; --*) shift 2 ;; *) break ;; esac; done
    "$@"; rc=$?
    if [ "$tool" = racecheck ] && [ "${*: -1}" = rope ]; then # a hazard in rope
        echo "========= Error: Race reported between Write access at rope_k+0x10 in rope.cu:12"
        echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
        echo "========= ERROR SUMMARY: 1 error"; exit 9
    fi
    [ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
    echo "========= ERROR SUMMARY: 0 errors"; exit $rc ;;
*) echo "${0##*/}: seed 1, require: ${QMM_REQUIRE_GPU-unset}"; echo "ok case_a (1.0 ms)"
   echo "3 passed, 0 failed" ;;
esac
EOF
chmod +x "$work/stub"
for b in qmm test_ops gpu_kernels gpu_llm gpu_llm_decode_ops gpu_llm_soak gpu_nodev gpu_pipeline \
    gpu_tp gpu_tp_fused; do
    cp "$work/stub" "$work/src/a/$b"
done
for b in compute-sanitizer nvidia-smi; do cp "$work/stub" "$work/path/$b"; done
if command -v xz >/dev/null; then arch=$work/a.tar.xz zip=-J; else arch=$work/a.tar.gz zip=-z; fi
tar -C "$work/src" $zip -cf "$arch" a
export PATH=$work/path:$PATH STUB_DIR=$work TMPDIR=$work QMM_MIN_LEFT_S=1 QMM_COMMIT=stub
: >"$work/pids"

# 1. no time pressure, the binaries from the archive: san (a racecheck finding in rope), e2e3, opsM
QMM_BIN_ARCHIVE=$arch QMM_PACK=$work/OUT/device.tar.gz \
    bash "$dev" "$work/r1" san e2e3 opsM nosuch >"$work/r1.out" 2>&1
rc=$?
o=$work/r1.out
check "exit 1 when something failed" [ "$rc" = 1 ]
check "the archive unpacked" has "$o" "^-- unpacked $arch in [0-9]+ s"
check "  ... its folder and lib/ on the loader path" has "$work/r1/e2e3.log" "lib path: $work/qmm-bin[^/]*/a/lib:$work/qmm-bin[^/]*/a$"
check "sanitizer SUMMARY lines" has "$o" '^== san_racecheck_matvec_fused: ok in [0-9]+ s \(limit [0-9]+ s\) \| 3 passed, 0 failed \| RACECHECK SUMMARY: 0 hazards displayed.* \| ERROR SUMMARY: 0 errors'
check "every sanitizer run" [ "$(grep -c '^== san_.*: ok' "$work/r1/summary.txt")" = 7 ]
check "a sanitizer finding" has "$o" '^== san_racecheck_rope: FAILED \(rc=9\) .* \| RACECHECK SUMMARY: 1 hazard displayed \(1 error, 0 warnings\) \| ERROR SUMMARY: 1 error$'
check "  ... with its error line" has "$o" '^     ========= Error: Race reported between Write access at rope_k'
check "e2e rows shown" has "$o" '^\| 32 -> 65 \| on'
check "ops rows shown" has "$o" '^ q +8 +matvec/1 +6.34 +6.16 +3.52 +1.80 +6.87 *$'
check "an unknown step" has "$o" '^-- unknown step nosuch'
check "the counts" has "$o" '^=== done in [0-9]+ s: 10 run, 2 failed, 0 timed out, 0 skipped; exit 1$'
check "the summary printed again at the end" [ "$(grep -c '^== san_racecheck_rope:' "$o")" = 2 ]
check "two files in OUT" [ "$(find "$work/OUT" -type f | wc -l)" = 2 ]
check "  ... the summary" has "$work/OUT/device.summary.txt" '^=== done in'

# 2. a 3-second budget: quick has a pass, a failure and a hang cut to the budget; opsM is skipped
STUB_HANG=gpu_llm_decode_ops QMM_BIN_ARCHIVE=$arch QMM_PACK=$work/OUT/device.tar.gz BUDGET_S=3 \
    bash "$dev" "$work/r2" quick opsM >"$work/r2.out" 2>&1
rc=$?
o=$work/r2.out
check "exit 1 after a timeout" [ "$rc" = 1 ]
check "the archive unpacked once" lacks "$o" '^-- unpacked'
check "a pass with its count" has "$o" '^== test_ops: ok in [0-9]+ s \(limit [0-9]+ s\) \| 3 passed, 0 failed$'
check "a failure with its FAIL lines" has "$o" '^== gpu_llm: FAILED \(rc=1\) .*\| 1 passed, 1 failed'
check "  ... indented" has "$o" '^     FAIL t.c:1 \[case_b\]'
check "a timeout, cut to the budget" has "$o" '^== gpu_llm_decode_ops: TIMED OUT \(rc=124\) in [0-9] s \(limit [1-3] s\)'
check "  ... with the log's last line" has "$o" '^     ok before_the_hang'
check "a skip for lack of time" has "$o" '^-- opsM: skipped, -?[0-9]+ s left of the 3 s budget'
check "the counts, within the budget" has "$o" '^=== done in [2-4] s: 3 run, 1 failed, 1 timed out, 1 skipped; exit 1$'
check "logs as they ran" has "$work/r2/gpu_llm_decode_ops.log" 'ok before_the_hang'
check "the archive packed while running" has "$work/hanging" 'r2/gpu_llm.log'
tar -tzf "$work/OUT/device.tar.gz" >"$work/r2.tar.txt" 2>&1
check "the archive at the end" has "$work/r2.tar.txt" 'r2/gpu_llm_decode_ops.log'

# 3. the tests step with QMM_BIN, sent SIGTERM twice (as timeout does) while gpu_tp_fused hangs
rm -f "$work/hanging"
STUB_HANG=gpu_tp_fused QMM_BIN=$work/src/a QMM_PACK=$work/OUT/t.tar.gz \
    bash "$dev" "$work/r3" tests >"$work/r3.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -e "$work/hanging" ] && break; sleep 0.1; done
kill -TERM "$pid"
sleep 0.02
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
o=$work/r3.out
check "exit 143 on SIGTERM" [ "$rc" = 143 ]
check "every test binary, with its time" [ "$(grep -cE '^== (gpu_|test_ops|plan-device).* in [0-9]+ s' "$work/r3/summary.txt")" = 9 ]
check "a two-GPU test's exit 77 is a skip" has "$o" '^== gpu_tp: skipped itself \(77\)'
check "  ... under QMM_REQUIRE_GPU=1 too (its harness fails on no GPU)" has "$work/r3/gpu_tp.log" '^require: 1$'
check "the other tests under QMM_REQUIRE_GPU=1" has "$work/r3/gpu_kernels.log" 'require: 1$'
check "  ... (test_ops too)" has "$work/r3/test_ops.log" 'require: 1$'
check "  ... where a skip is a failure" has "$o" '^== gpu_nodev: FAILED \(rc=77, a skip where a GPU is required\)'
check "  ... with its SKIP line" has "$o" '^     SKIP: no CUDA device'
check "the signal said" has "$o" '^-- interrupted by a signal'
check "the counts at a signal" has "$o" '^=== done in [0-9]+ s: 9 run, 2 failed, 0 timed out, 0 skipped; exit 143$'
tar -tzf "$work/OUT/t.tar.gz" >"$work/r3.tar.txt" 2>&1
check "packed at the signal" has "$work/r3.tar.txt" 'r3/gpu_tp_fused.log'
sleep 0.3
alive=0
while read -r p; do kill -0 "$p" 2>/dev/null && alive=1 && kill "$p"; done <"$work/pids"
check "the hanging commands stopped" [ "$alive" = 0 ]

# 4. a session's own commands (cmds): B and L exported, a variant folder, a bad line, a failure
mkdir -p "$work/src/a/base" && cp "$work/stub" "$work/src/a/base/qmm"
cat >"$work/cmds.txt" <<'EOF'
# an A/B pair, then a failing test
ab_base 30 $B/base/qmm bench ops --out $L/ab_base.md
ab_new 30 QMM_X=1 $B/qmm bench ops --out $L/ab_new.md

broken-line
t_llm 30 $B/gpu_llm --filter case_b
EOF
QMM_CMDS=$work/cmds.txt QMM_BIN=$work/src/a bash "$dev" "$work/r4" cmds >"$work/r4.out" 2>&1
rc=$?
o=$work/r4.out
check "cmds: exit 1 with a failure and a bad line" [ "$rc" = 1 ]
check "cmds: each line run" has "$o" '^== ab_base: ok in [0-9]+ s'
check "  ... the variant from B" [ -s "$work/r4/ab_base.md" ]
check "  ... env assignments, L" [ -s "$work/r4/ab_new.md" ]
check "  ... the bad line said" has "$o" '^-- cmds: not NAME LIMIT COMMAND: broken-line'
check "  ... the failure" has "$o" '^== t_llm: FAILED \(rc=1\)'
check "  ... the file kept" has "$work/r4/cmds.txt" '^ab_new 30'
check "  ... the counts" has "$o" '^=== done in [0-9]+ s: 3 run, 2 failed, 0 timed out, 0 skipped; exit 1$'

# 5. an OUTDIR that holds an earlier run's files (a lent machine's /tmp): moved aside, not packed
mkdir -p "$work/r5" && echo old >"$work/r5/ops_b.csv"
QMM_CMDS=$work/cmds.txt QMM_BIN=$work/src/a QMM_PACK=$work/OUT/r5.tar.gz \
    bash "$dev" "$work/r5" cmds >"$work/r5.out" 2>&1
o=$work/r5.out
check "an earlier run moved aside" has "$o" "^-- $work/r5 held files of an earlier run: moved to $work/r5.old-"
check "  ... kept there" [ "$(cat "$work"/r5.old-*/ops_b.csv)" = old ]
tar -tzf "$work/OUT/r5.tar.gz" >"$work/r5.tar.txt" 2>&1
check "  ... not packed" lacks "$work/r5.tar.txt" 'ops_b.csv'
check "  ... this run packed" has "$work/r5.tar.txt" 'r5/ab_base.md'

# 6. QMM_REQUIRE_GPU=0 (skips allowed): a skip is a skip again, and the tests see the 0
QMM_REQUIRE_GPU=0 QMM_BIN=$work/src/a bash "$dev" "$work/r6" tests >"$work/r6.out" 2>&1
o=$work/r6.out
check "QMM_REQUIRE_GPU=0: a skip is a skip" has "$o" '^== gpu_nodev: skipped itself \(77\)'
check "  ... the tests see it" has "$work/r6/gpu_kernels.log" 'require: 0$'
check "  ... the counts (gpu_llm's failure)" has "$o" '^=== done in [0-9]+ s: 10 run, 1 failed, 0 timed out, 0 skipped; exit 1$'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
