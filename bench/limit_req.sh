#!/usr/bin/env bash
# shoal vs nginx under a limit_req flood: many clients far over the rate, nearly every request
# refused with 503. What it costs a server to say no: its CPU per request (process tree, from
# /proc), the same nginx.conf for both, wrk, interleaved rounds, medians.
#
#   bench/limit_req.sh                            # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=1s SHOAL=/path/to/shoal bench/limit_req.sh   # a quick check
#
# The configuration (worker_processes 1, access_log off):
#   limit_req_zone $binary_remote_addr$remote_port zone=flood:10m rate=1r/s;
#   location / { limit_req zone=flood; limit_req_log_level LOG_LEVEL; }   (html/index.html)
# (A static file, not `return`: `return` answers in the rewrite phase, before limit_req.)
# The key holds the client's port: each of wrk's CONNS connections is a client of its own, each
# allowed its first request and then refused for the run. Refusals are logged at LOG_LEVEL (warn
# by default, below the error log's level: the figure is the refusal, not log writes; LOG_LEVEL=
# error writes a line per refusal, as nginx's default does). A table "flood": all refused but
# CONNS; "burst": `burst=5 nodelay`, the same with a burst to count.
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (100), WRK_THREADS (1), BASE_PORT (19380),
# LOG_LEVEL (warn), SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in seed001.sh, KEEP=1.
# Every server listens on 127.0.0.1 only; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-100}
WRK_THREADS=${WRK_THREADS:-1}
BASE_PORT=${BASE_PORT:-19380}
LOG_LEVEL=${LOG_LEVEL:-warn}

build_shoal
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# usage: write_flood_conf NAME PORT LIMIT_REQ_ARGS
write_flood_conf() {
    local name=$1 port=$2 args=$3
    cat >"$WORK/conf/$name.conf" <<CONF
# bench/limit_req.sh: the same file for nginx and shoal.
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;

events {
    worker_connections 10240;
}

http {
    access_log off;
    limit_req_zone \$binary_remote_addr\$remote_port zone=flood:10m rate=1r/s;

    server {
        listen 127.0.0.1:$port;
        location / {
            limit_req zone=flood$args;
            limit_req_log_level $LOG_LEVEL;
            root html;
        }
    }
}
CONF
}

p=$BASE_PORT
SERVERS=()
# usage: add_servers TEST LIMIT_REQ_ARGS NGINX_PORT SHOAL_PORT
add_servers() {
    local test=$1 args=$2
    SERVERS+=("nginx-$test" "shoal-$test")
    write_flood_conf "nginx-$test" "$3" "$args"
    write_flood_conf "shoal-$test" "$4" "$args"
    start_conf "nginx-$test" nginx "$3"
    start_conf "shoal-$test" shoal "$4"
}
add_servers flood "" $((p + 0)) $((p + 1))
add_servers burst " burst=5 nodelay" $((p + 2)) $((p + 3))

{
    echo "# limit_req flood — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "servers at start:"; server_state "${SERVERS[@]}"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS LOG_LEVEL=$LOG_LEVEL bench/limit_req.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    for s in "${SERVERS[@]}"; do
        # A new connection is a new client: its first request passes.
        run_checked /index.html 200 "shoal is running" -- "${s#*-}" "$s" "$WRK_THREADS" "$CONNS" "$round"
    done
done

echo
cat "$WORK/results/header.txt"
echo
for test in flood burst; do
    echo "## $test: limit_req zone=flood (1r/s per connection)$([ $test = burst ] && echo ', burst=5 nodelay'), wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency, medians of $ROUNDS interleaved rounds"
    echo "## nearly every request is a 503 (wrk's Non-2xx in notes); CPUus/req: the server's process tree per request; cpu/base: vs nginx"
    summarize "$test" "nginx-$test"
    echo
done
echo "## refusals per server (Non-2xx of all requests, every round)"
awk -F'\t' '$5 != "BAD" && $5 != "DEAD" { n[$2] += $5; r[$2] += $13 }
    END { for (s in n) printf "%-16s %d of %d requests refused\n", s, r[s], n[s] }' "$WORK/results/raw.tsv" | sort
echo
echo "## servers after the load (threads, RSS, open fds; compare with the start above)"
sleep 1
server_state "${SERVERS[@]}"
echo
echo "## directives a server did not implement (its numbers are not comparable)"
report_unimplemented
echo
echo "## server logs (anything besides the expected warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
