#!/usr/bin/env bash
# Row 223's timings: `sm90_trace BIN` (graph medians over cold weight copies, and each output's
# hash) over the stream-K launches below; with the same data in both builds the hashes compare
# their bits.
set -u
bin=${1:?usage: trace.sh SM90_TRACE}
while read -r proj m scheds; do
    "$bin" "$proj" "$m" $scheds 2>/dev/null | grep -v '^proj,'
done <<'LIST'
o 128 auto sk
o 256 auto sk
q 256 auto sk
gate 128 auto sk
gate 256 auto sk
gate 512 auto sk
down 256 auto sk
down 512 auto sk
q 1024 sk
o 2048 auto sk
down 2048 sk
LIST
