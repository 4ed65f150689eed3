#!/usr/bin/env bash
# shoal vs nginx as a reverse proxy in front of bench/hello (a cheap keep-alive hello-world
# upstream), same nginx.conf for both, wrk, interleaved rounds, medians.
#
#   bench/proxy.sh                            # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=3s SHOAL=/path/to/shoal bench/proxy.sh
#
# Two tables:
#   keepalive  upstream backend { server 127.0.0.1:HELLO; keepalive 32; } with proxy_http_version
#              1.1 and proxy_set_header Connection "": upstream connections are reused.
#   close      proxy_pass http://127.0.0.1:HELLO; with nginx's defaults (HTTP/1.0, Connection:
#              close): a new upstream connection per request.
# Both: worker_processes 1, access_log off. Reported: req/s, latency, the proxy's CPU per request
# (the main figure; its process tree), the upstream's CPU per request (upCPUus), ratios vs nginx.
# Before every run the proxy is asked once; a wrong status or body (shoal without proxy_pass
# answers from files) is marked BAD in notes and that run is not measured.
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (50), WRK_THREADS (1), BASE_PORT (19280),
# HELLO_THREADS (1), SKIP_CLOSE=1, SKIP_KA=1, SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in seed001.sh,
# KEEP=1, SHOAL0=/path/to/another/shoal (adds shoal0-* rows: that binary on the same files, run
# interleaved with the others, for a before/after comparison).
# Every server listens on 127.0.0.1 only; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-50}
WRK_THREADS=${WRK_THREADS:-1}
BASE_PORT=${BASE_PORT:-19280}
HELLO_THREADS=${HELLO_THREADS:-1}
HELLO_BODY='Hello, world!'

build_shoal
build_hello
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# usage: write_proxy_conf NAME PORT MODE(keepalive|close) HELLO_PORT
write_proxy_conf() {
    local name=$1 port=$2 mode=$3 up=$4 upstream_block="" location
    if [ "$mode" = keepalive ]; then
        upstream_block="    upstream backend {
        server 127.0.0.1:$up;
        keepalive 32;
    }
"
        location='            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";'
    else
        location="            proxy_pass http://127.0.0.1:$up;"
    fi
    cat >"$WORK/conf/$name.conf" <<CONF
# bench/proxy.sh ($mode): the same file for nginx and shoal.
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;

events {
    worker_connections 10240;
}

http {
    access_log off;

$upstream_block
    server {
        listen 127.0.0.1:$port;
        location / {
$location
        }
    }
}
CONF
}

p=$BASE_PORT
hello_port=$((p + 9))
port_free "$hello_port" || die "port $hello_port is in use"
(cd "$WORK" && exec "$HELLO" "$hello_port" "$HELLO_THREADS") >"$WORK/logs/hello.out" 2>&1 &
HELLO_PID=$!
STARTED_PIDS+=("$HELLO_PID")
PID[hello]=$HELLO_PID PORT[hello]=$hello_port
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$hello_port/" && break; sleep 0.1; done
check_answer hello / 200 "$HELLO_BODY" || die "bench/hello answered wrong: $CHECK_MSG"
log "started hello (pid $HELLO_PID, port $hello_port, $HELLO_THREADS thread(s))"

[ -z "${SHOAL0:-}" ] || [ -x "$SHOAL0" ] || die "no shoal binary at SHOAL0=$SHOAL0"
SERVERS=()
# usage: add_servers NAME(ka|close) MODE(keepalive|close) NGINX_PORT SHOAL_PORT SHOAL0_PORT
add_servers() {
    local name=$1 mode=$2
    SERVERS+=("nginx-$name" "shoal-$name")
    write_proxy_conf "nginx-$name" "$3" "$mode" "$hello_port"
    write_proxy_conf "shoal-$name" "$4" "$mode" "$hello_port"
    start_conf "nginx-$name" nginx "$3"
    start_conf "shoal-$name" shoal "$4"
    if [ -n "${SHOAL0:-}" ]; then
        SERVERS+=("shoal0-$name")
        write_proxy_conf "shoal0-$name" "$5" "$mode" "$hello_port"
        start_conf "shoal0-$name" shoal0 "$5"
    fi
}
if [ -z "${SKIP_KA:-}" ]; then
    add_servers ka keepalive $((p + 0)) $((p + 1)) $((p + 4))
fi
if [ -z "${SKIP_CLOSE:-}" ]; then
    add_servers close close $((p + 2)) $((p + 3)) $((p + 5))
fi

{
    echo "# proxy — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "upstream: bench/hello, $HELLO_THREADS thread(s), 14-byte body; net.ipv4.tcp_tw_reuse=$(cat /proc/sys/net/ipv4/tcp_tw_reuse)"
    echo "servers at start:"; server_state "${SERVERS[@]}" hello
    [ -z "${SHOAL0:-}" ] || echo "shoal0: $SHOAL0"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS${SKIP_KA:+ SKIP_KA=1}${SKIP_CLOSE:+ SKIP_CLOSE=1}${SHOAL0:+ SHOAL0=...} bench/proxy.sh"
} | tee "$WORK/results/header.txt" >&2

export UPSTREAM_PID=$HELLO_PID
for round in $(seq "$ROUNDS"); do
    for t in $WRK_THREADS; do
        for s in "${SERVERS[@]}"; do
            case $s in *-ka) test=keepalive ;; *) test=close ;; esac
            run_checked / 200 "$HELLO_BODY" -- "$test" "$s" "$t" "$CONNS" "$round"
        done
    done
done
unset UPSTREAM_PID

echo
cat "$WORK/results/header.txt"
echo
if [ -z "${SKIP_KA:-}" ]; then
    echo "## upstream keepalive 32 (proxy_http_version 1.1, Connection \"\"), wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency, medians of $ROUNDS interleaved rounds"
    echo "## CPUus/req: the proxy's process tree; upCPUus: bench/hello's; cpu/base, rps/base: vs nginx-ka"
    summarize keepalive nginx-ka
    echo
fi
if [ -z "${SKIP_CLOSE:-}" ]; then
    echo "## no upstream keepalive (proxy_pass http://127.0.0.1:PORT, HTTP/1.0): a new upstream connection per request"
    summarize close nginx-close
fi
echo
echo "## servers after the load (threads, RSS, open fds; compare with the start above)"
sleep 1
server_state "${SERVERS[@]}" hello
echo
echo "## directives a server did not implement (its numbers are not comparable)"
report_unimplemented
echo
echo "## server logs (anything besides the expected warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
