#!/usr/bin/env bash
# Builds bench/splice/relay.c and runs it: read/write through a buffer against splice(2) through
# a pipe, 16 KiB (proxy_buffer_size's default) and 64 KiB per call, interleaved, ROUNDS (3) rounds
# of SECONDS (1) each. Results and what was decided from them: bench/README.md, "splice".
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp /tmp/relay.XXXXXX)
trap 'rm -f "$bin"' EXIT
gcc -O2 -pthread -o "$bin" "$dir/relay.c"
for _ in $(seq "${ROUNDS:-3}"); do
    for m in "rw 16384" "splice 16384" "rw 65536" "splice 65536"; do
        # shellcheck disable=SC2086
        "$bin" $m "${SECONDS_RUN:-1}"
    done
done
