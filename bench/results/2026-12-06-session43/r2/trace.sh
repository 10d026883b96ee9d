#!/usr/bin/env bash
# Row 218's timings: sm90_trace BIN over the shapes below (graph medians over cold weight copies,
# no CPU check: the nocopy builds' outputs are wrong by design), one line a schedule on stdout.
bin=${1:?usage: trace.sh SM90_TRACE}
for s in "q 512 s1" "o 512 s1 sk" "gate 256 sk" "q 128 auto" "o 128 auto" "k 128 auto" "q 2048 s1" "q 32 auto" "o 16 auto"; do
    $bin $s 2>/dev/null | grep -v '^proj'
done
