#!/usr/bin/env bash
# Row 222's timings: sm90_trace BIN over the unsplit 256-token launches below (graph medians over
# cold weight copies, no CPU check), one line a schedule on stdout.
bin=${1:?usage: trace.sh SM90_TRACE}
for s in "q 2048 s1" "gate 2048 s1" "q 1024 s1" "up 2048 s1"; do
    $bin $s 2>/dev/null | grep -v '^proj'
done
