#!/usr/bin/env bash
# Runs its arguments only on an H200 (else exit 77, which bench/device.sh counts as skipped by
# the command itself): the call that asks for an H200 may be given an H100, where these
# questions were answered already (2026-12-06-session41/r1).
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    echo "h200only: not an H200 ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)); skipped"
    exit 77
fi
exec "$@"
