#!/usr/bin/env bash
# Seed 002 on this machine: socket sharding. Two workers on one shared listening socket versus
# one SO_REUSEPORT socket per worker (`listen ... reuseport`), for shoal and nginx, serving the
# 612-byte index.html with seed 001's tuned configuration (shoal has no `return` yet, which the
# seed's own test configurations use). nginx also runs with `accept_mutex on`, the default of the
# nginx 1.9.1 the seed measured (today's default is off, with EPOLLEXCLUSIVE).
# Load: wrk -t2 -c200 -d10s --latency, interleaved rounds, medians. The seed's figures are the
# latency mean and standard deviation, and req/s.
#
#   bench/seed002.sh                 # ROUNDS=3 DURATION=10s
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (200), WRK_T (2), BASE_PORT (19180),
# SHOAL (a prebuilt binary), SHOAL_REV (build a clean snapshot of that commit; otherwise the checkout is built), KEEP=1 (keep the temp prefix).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-200}
WRK_T=${WRK_T:-2}
BASE_PORT=${BASE_PORT:-19180}

build_all
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

p=$BASE_PORT
start_server nginx-2w        nginx $((p + 0)) 2 0
start_server nginx-2w-rp     nginx $((p + 1)) 2 1
start_server nginx-2w-mutex  nginx $((p + 2)) 2 0 "    accept_mutex on;"
start_server shoal-2w        shoal $((p + 3)) 2 0
start_server shoal-2w-rp     shoal $((p + 4)) 2 1
SERVERS=(nginx-2w nginx-2w-rp nginx-2w-mutex shoal-2w shoal-2w-rp)

{
    echo "# seed 002 — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "servers at start:"; server_state "${SERVERS[@]}"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION bench/seed002.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    for s in "${SERVERS[@]}"; do
        run_wrk seed002 "$s" "$WRK_T" "$CONNS" "$round"
    done
done

echo
cat "$WORK/results/header.txt"
echo
echo "## wrk -t$WRK_T -c$CONNS -d$DURATION --latency, medians of $ROUNDS interleaved rounds; ratios vs nginx-2w (shared socket)"
summarize seed002 nginx-2w
echo
echo "## servers after the load (threads, RSS, open fds; compare with the start above)"
sleep 1
server_state "${SERVERS[@]}"
echo
echo "## server logs (anything besides the expected 'not implemented yet' warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
