#!/usr/bin/env bash
# Row 223's miss: `sm90_trace BIN` over the 128-token stream-K launches that lost in r2.
set -u
bin=${1:?usage: trace.sh SM90_TRACE}
while read -r proj m scheds; do
    "$bin" "$proj" "$m" $scheds 2>/dev/null | grep -v '^proj,'
done <<'LIST'
o 128 sk
o 256 sk
q 256 sk
gate 128 sk
down 256 sk
LIST
