#!/usr/bin/env bash
# Row 224's timings: `sm90_trace BIN` (graph medians over cold weight copies, output hashes) over
# the stream-K launches of 128-token tiles.
set -u
bin=${1:?usage: trace.sh SM90_TRACE}
while read -r proj m scheds; do
    "$bin" "$proj" "$m" $scheds 2>/dev/null | grep -v '^proj,'
done <<'LIST'
o 128 sk
o 256 sk
q 256 sk
gate 128 sk
gate 256 sk
down 256 sk
gate 512 sk
down 512 sk
o 512 sk
LIST
