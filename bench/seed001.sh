#!/usr/bin/env bash
# Seed 001 on this machine: a 612-byte index.html served by shoal, nginx (seed 001's tuned
# nginx.conf), h2o and the canned-response loop, measured with wrk, interleaved, medians.
#
#   bench/seed001.sh                 # ROUNDS=3 DURATION=10s
#   ROUNDS=2 SHOAL=/path/to/shoal bench/seed001.sh
#
# Environment: ROUNDS (3), DURATION (10s), WRK_THREADS ("1 2"), CONNS (100), PIPE_DEPTH (16),
# BASE_PORT (19080), SHOAL (a prebuilt binary), SHOAL_REV (build a clean snapshot of that
# commit; otherwise the checkout is built as it is; CARGO_TARGET_DIR, default /work/target-bench),
# SKIP_PIPELINE=1, KEEP=1 (keep the temp prefix), SHOAL0 (a second shoal binary, e.g. the plain
# build beside bench/pgo.sh's: adds a shoal0-1w row, one worker, run in the same rounds).
# Every server listens on 127.0.0.1 only; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

WRK_THREADS=${WRK_THREADS:-"1 2"}
CONNS=${CONNS:-100}
PIPE_DEPTH=${PIPE_DEPTH:-16}
BASE_PORT=${BASE_PORT:-19080}

build_all
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# All configurations run side by side on their own ports (an idle server costs nothing), so the
# runs can interleave without restarts: A B C ... A B C ...
p=$BASE_PORT
start_server nginx-1w      nginx  $((p + 0)) 1 0
start_server nginx-1w-rp   nginx  $((p + 1)) 1 1
start_server nginx-2w      nginx  $((p + 2)) 2 0
start_server nginx-2w-rp   nginx  $((p + 3)) 2 1
start_server shoal-1w      shoal  $((p + 4)) 1 0
start_server shoal-1w-rp   shoal  $((p + 5)) 1 1
start_server shoal-2w      shoal  $((p + 6)) 2 0
start_server shoal-2w-rp   shoal  $((p + 7)) 2 1
start_server h2o-1t        h2o    $((p + 8)) 1
start_server h2o-2t        h2o    $((p + 9)) 2
start_server canned        canned $((p + 10))
SERVERS=(nginx-1w nginx-1w-rp nginx-2w nginx-2w-rp shoal-1w shoal-1w-rp shoal-2w shoal-2w-rp h2o-1t h2o-2t canned)
if [ -n "${SHOAL0:-}" ]; then
    [ -x "$SHOAL0" ] || die "no shoal binary at SHOAL0=$SHOAL0"
    start_server shoal0-1w shoal0 $((p + 11)) 1 0
    SERVERS+=(shoal0-1w)
fi
PIPE_SERVERS=(nginx-1w shoal-1w h2o-1t canned)

{
    echo "# seed 001 — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "servers at start:"; server_state "${SERVERS[@]}"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION WRK_THREADS=\"$WRK_THREADS\" bench/seed001.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    for t in $WRK_THREADS; do
        for s in "${SERVERS[@]}"; do
            run_wrk plain "$s" "$t" "$CONNS" "$round"
        done
    done
    if [ -z "${SKIP_PIPELINE:-}" ]; then
        for s in "${PIPE_SERVERS[@]}"; do
            WRK_SCRIPT_ARGS=("$PIPE_DEPTH")
            run_wrk pipe$PIPE_DEPTH "$s" 1 "$CONNS" "$round" -s "$BENCH_DIR/pipeline16.lua"
            WRK_SCRIPT_ARGS=()
        done
    fi
done

echo
cat "$WORK/results/header.txt"
echo
echo "## wrk -t{1,2} -c$CONNS -d$DURATION --latency, medians of $ROUNDS interleaved rounds"
echo "## cpu/base, rps/base: vs nginx-1w at the same wrk -t; cpu/cann: vs the canned loop"
summarize plain nginx-1w canned
if [ -z "${SKIP_PIPELINE:-}" ]; then
    echo
    echo "## pipelined: $PIPE_DEPTH requests per write (bench/pipeline16.lua), wrk -t1 -c$CONNS -d$DURATION"
    summarize pipe$PIPE_DEPTH nginx-1w canned
fi
echo
echo "## servers after the load (threads, RSS, open fds; compare with the start above)"
sleep 1
server_state "${SERVERS[@]}"
echo
echo "## server logs (anything besides the expected 'not implemented yet' warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
