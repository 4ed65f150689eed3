#!/usr/bin/env bash
# shoal vs nginx as a gRPC proxy (grpc_pass, upstream keepalive) in front of the Python gRPC
# server of the tests (tests/e2e/grpc_support/server.py, python3-grpcio), same configuration for
# both; unary calls (/test.Echo/Echo, a 5-byte message) from h2load over h2c, interleaved rounds,
# medians. The figure to compare is the proxy's CPU per call (its process tree, from /proc);
# calls/s is mostly the Python server's limit.
#
#   bench/grpc.sh                                      # ROUNDS=3 DURATION=10 CONNS=8
#   ROUNDS=1 DURATION=1 SHOAL=target/debug/shoal bench/grpc.sh   # a check that it runs
#
# Environment: ROUNDS (3), DURATION (seconds, 10), CONNS (8), STREAMS (1: calls in flight per
# client connection), BASE_PORT (19380), SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in seed001.sh,
# SHOAL0 (a second shoal binary, a row of its own),
# KEEP=1. Everything listens on 127.0.0.1; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10}
DURATION=${DURATION%s}
CONNS=${CONNS:-8}
STREAMS=${STREAMS:-1}
BASE_PORT=${BASE_PORT:-19380}
PYTHON=/usr/bin/python3
command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"
"$PYTHON" -c 'import grpc' 2>/dev/null || die "python3-grpcio is missing (apt-get install python3-grpcio)"

build_shoal
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

wait_port() {
    local i
    for i in $(seq 100); do
        ss -Hltn "sport = :$1" | grep -q . && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}

up_port=$((BASE_PORT + 9))
port_free "$up_port" || die "port $up_port is in use"
"$PYTHON" "$REPO/tests/e2e/grpc_support/server.py" "$up_port" >"$WORK/logs/grpc-server.out" 2>&1 &
UP_PID=$!
STARTED_PIDS+=("$UP_PID")
wait_port "$up_port"
log "started the gRPC server (pid $UP_PID, port $up_port)"

declare -A PID PORT
SERVERS=(nginx shoal)
# SHOAL0: a second shoal beside the first (e.g. the plain build beside bench/pgo.sh's).
[ -n "${SHOAL0:-}" ] && SERVERS+=(shoal0)
for i in "${!SERVERS[@]}"; do
    name=${SERVERS[$i]}
    port=$((BASE_PORT + i))
    port_free "$port" || die "port $port is in use"
    cat >"$WORK/conf/$name.conf" <<CONF
# bench/grpc.sh: the same file for nginx and shoal.
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path tmp;
    upstream grpc_backend { server 127.0.0.1:$up_port; keepalive 32; }
    server {
        listen 127.0.0.1:$port http2;
        location / { grpc_pass grpc://grpc_backend; }
    }
}
CONF
    mkdir -p "$WORK/tmp"
    case $name in
        nginx) (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf") >"$WORK/logs/$name.out" 2>&1 & ;;
        shoal) (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$WORK/logs/$name.out" 2>&1 & ;;
        shoal0) (cd "$WORK" && exec "$SHOAL0" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$WORK/logs/$name.out" 2>&1 & ;;
    esac
    PID[$name]=$!
    PORT[$name]=$port
    STARTED_PIDS+=("${PID[$name]}")
    wait_port "$port"
    log "started $name (pid ${PID[$name]}, port $port)"
done

# One gRPC message: uncompressed, 5 bytes.
printf '\0\0\0\0\5hello' >"$WORK/call.bin"

# usage: run NAME ROUND — one h2load run; appends "name round calls calls_per_s cpu_us_per_call
# upstream_cpu_us_per_call failed sys_us_per_call" to results/raw.tsv.
run() {
    local name=$1 round=$2 pid=${PID[$1]} port=${PORT[$1]} out t0 t1 u0 u1 s0 s1
    out=$WORK/results/$name.$round.txt
    s0=$(tree_ticks "$pid" sys)
    t0=$(tree_ticks "$pid")
    u0=$(tree_ticks "$UP_PID")
    h2load -D "$DURATION" -c "$CONNS" -m "$STREAMS" -d "$WORK/call.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://127.0.0.1:$port/test.Echo/Echo" >"$out" 2>&1 || true
    t1=$(tree_ticks "$pid")
    s1=$(tree_ticks "$pid" sys)
    u1=$(tree_ticks "$UP_PID")
    awk -v name="$name" -v round="$round" -v t="$((t1 - t0))" -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v hz="$HZ" '
        /^requests:/ { done = $8; failed = $10 }
        /^finished in/ { rps = $4 }
        END {
            cpu = done > 0 ? t * 1e6 / hz / done : 0
            up = done > 0 ? u * 1e6 / hz / done : 0
            sys = done > 0 ? s * 1e6 / hz / done : 0
            printf "%s\t%s\t%d\t%.0f\t%.1f\t%.1f\t%d\t%.1f\n", name, round, done, rps, cpu, up, failed, sys
        }' "$out" >>"$WORK/results/raw.tsv"
}

{
    echo "# grpc — $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(nproc) cores, $(uname -sr); $(nginx -v 2>&1); shoal: $SHOAL_DESC${SHOAL0:+; shoal0: $SHOAL0}"
    echo "upstream: tests/e2e/grpc_support/server.py (python3-grpcio $("$PYTHON" -c 'import grpc; print(grpc.__version__)')), keepalive 32"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS STREAMS=$STREAMS bench/grpc.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    for name in "${SERVERS[@]}"; do
        log "round $round: $name"
        run "$name" "$round"
    done
done

echo
cat "$WORK/results/header.txt"
echo "## h2load -D $DURATION -c $CONNS -m $STREAMS, unary calls; medians of $ROUNDS interleaved rounds"
echo "## CPUus/call: the proxy's process tree (userUS + sysUS: in user space and in the kernel);"
echo "## upCPUus: the Python server's; cpu/nginx: ratio; every round's CPUus/call after the table"
awk -F'\t' '
    function median(list, n,    a, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        calls[$1] = calls[$1] " " $4; cpu[$1] = cpu[$1] " " $5; up[$1] = up[$1] " " $6; failed[$1] += $7
        sys[$1] = sys[$1] " " $8; user[$1] = user[$1] " " ($5 - $8); rounds[$1] = rounds[$1] " " $5
    }
    END {
        printf "%-8s %10s %11s %8s %8s %9s %9s %7s\n", "server", "calls/s", "CPUus/call", "userUS", "sysUS", "upCPUus", "cpu/nginx", "failed"
        base = median(cpu["nginx"])
        for (s in calls) {
            c = median(cpu[s])
            printf "%-8s %10.0f %11.1f %8.1f %8.1f %9.1f %9.2f %7d\n", s, median(calls[s]), c, median(user[s]), median(sys[s]), median(up[s]), (base > 0 ? c / base : 0), failed[s]
        }
        for (s in rounds) printf "rounds %-8s%s\n", s, rounds[s]
    }' "$WORK/results/raw.tsv"
echo
echo "## server logs (anything besides notices)"
for f in "$WORK"/logs/nginx.error.log "$WORK"/logs/shoal.error.log "$WORK"/logs/*.out; do
    [ -s "$f" ] || continue
    odd=$(grep -v -e '\[notice\]' -e 'is deprecated' "$f" | head -10 || true)
    [ -z "$odd" ] || { echo "--- $(basename "$f"):"; echo "$odd"; }
done
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept})"
