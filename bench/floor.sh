#!/usr/bin/env bash
# Where shoal's CPU per static answer goes: the same connection loop answering a fixed reply
# (no server, location, file or header work: bench/floor/canned-answer.patch, built from a
# snapshot of HEAD) beside shoal serving seed 001's page, nginx and the canned-response loop.
# The floor row is what the runtime, the socket calls and the head parser cost; shoal's row
# minus it is the HTTP handling; the floor minus canned is the framework over raw epoll.
#
#   bench/floor.sh                   # ROUNDS=3 DURATION=10s
#   ROUNDS=5 DURATION=5s SHOAL=/path/to/shoal bench/floor.sh
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (100), BASE_PORT (19180), SHOAL (a prebuilt
# binary for the plain row; else the checkout is built), CARGO_TARGET_DIR (the floor build goes
# to CARGO_TARGET_DIR-floor), KEEP=1. wrk -t1, one worker each; 127.0.0.1 only; everything
# started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-100}
BASE_PORT=${BASE_PORT:-19180}

build_all
src=$(mktemp -d /tmp/shoal-floor.XXXXXX)
(cd "$REPO" && git archive HEAD) | tar -x -C "$src"
(cd "$src" && patch -s -p1 <"$BENCH_DIR/floor/canned-answer.patch") || die "the floor patch does not apply to HEAD"
log "building the floor variant (HEAD + bench/floor/canned-answer.patch) in $src"
(cd "$src" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR-floor cargo build --release) >&2 || die "floor build failed"
rm -rf "$src"
SHOAL0=$CARGO_TARGET_DIR-floor/release/shoal

make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

p=$BASE_PORT
start_server nginx-1w nginx $((p + 0)) 1 0
start_server shoal-1w shoal $((p + 1)) 1 0
start_server floor-1w shoal0 $((p + 2)) 1 0
start_server canned canned $((p + 3))
# The floor build answers /canned from its patch, and anything else as shoal does.
check=$(curl -s "http://127.0.0.1:$((p + 2))/canned" | wc -c)
[ "$check" -eq 612 ] || die "the floor build answered /canned with $check bytes, not 612"

{
    echo "# floor — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION bench/floor.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    run_wrk plain nginx-1w 1 "$CONNS" "$round"
    run_wrk plain shoal-1w 1 "$CONNS" "$round"
    WRK_PATH=/canned run_wrk plain floor-1w 1 "$CONNS" "$round"
    run_wrk plain canned 1 "$CONNS" "$round"
done

echo
cat "$WORK/results/header.txt"
echo
echo "## wrk -t1 -c$CONNS -d$DURATION, medians of $ROUNDS interleaved rounds; floor-1w: /canned on the patched build"
summarize plain nginx-1w canned
