#!/usr/bin/env bash
# shoal vs nginx as a `stream {}` TCP proxy, side by side, the same configuration file for both
# (nginx loads ngx_stream_module; shoal accepts the line). Interleaved rounds, medians.
#
#   bench/stream.sh                                   # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=1s SHOAL=/path/to/shoal bench/stream.sh   # a quick check that it runs
#
# Three tables:
#   echo      one worker each, `proxy_pass 127.0.0.1:ECHO;` in front of bench/stream_echo.py's
#             echo server; ECHO_CONNS (4) connections each sending 1 MiB and reading it back, in
#             a loop: the proxy's CPU (its process tree, from /proc) per MiB echoed (1 MiB in and
#             1 MiB out through each side of the proxy).
#   sessions  the same servers; SESSION_CONNS (8) clients each opening a session, 16 bytes out
#             and back, closing, in a loop: the proxy's CPU per session.
#             Both tables have a floor-1w row: bench/stream_floor.c (a one-thread epoll
#             accept -> connect -> relay loop in C, nothing else), what the kernel costs.
#   seed002   seed 002's comparison for stream: 2 workers, one shared listening socket versus
#             `listen ... reuseport`, `proxy_pass 127.0.0.1:HELLO;` in front of bench/hello;
#             wrk -t2 -c200 --latency through the proxy (keep-alive HTTP inside each session):
#             latency mean and standard deviation, req/s, CPU per request.
# The Python clients bound the load of the first two tables; what is compared is CPU per unit.
#
# Environment: ROUNDS (3), DURATION (10s), ECHO_CONNS (4), SESSION_CONNS (8), CONNS (200),
# WRK_T (2), BASE_PORT (19380), SKIP_SEED002=1, SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in
# seed001.sh, KEEP=1. Everything listens on 127.0.0.1; what was started is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ECHO_CONNS=${ECHO_CONNS:-4}
SESSION_CONNS=${SESSION_CONNS:-8}
CONNS=${CONNS:-200}
WRK_T=${WRK_T:-2}
BASE_PORT=${BASE_PORT:-19380}
SECONDS_RUN=${DURATION%s}
MIB=1048576

build_shoal
build_hello
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# usage: write_stream_conf NAME WORKERS BODY
write_stream_conf() {
    cat >"$WORK/conf/$1.conf" <<CONF
# bench/stream.sh: the same file for nginx and shoal.
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes $2;
daemon off;
pid logs/$1.pid;
error_log logs/$1.error.log;

events {
    worker_connections 10240;
}

stream {
$3
}
CONF
}

# Starts a server on its configuration and waits until PORT accepts; sets PID, PORT, KIND.
# usage: start_stream NAME KIND(nginx|shoal) PORT
start_stream() {
    local name=$1 kind=$2 port=$3
    port_free "$port" || die "port $port is in use"
    local out=$WORK/logs/$name.out
    case $kind in
        shoal) (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$out" 2>&1 & ;;
        nginx) (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf") >"$out" 2>&1 & ;;
        floor) exec "$FLOOR" "$echo_port" "$port" $((port + 1)) >"$out" 2>&1 & ;;
    esac
    local pid=$! i
    STARTED_PIDS+=("$pid")
    PID[$name]=$pid PORT[$name]=$port KIND[$name]=$kind
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; die "$name exited at start"; }
        port_free "$port" || break
        sleep 0.1
    done
    log "started $name (pid $pid, port $port)"
}

p=$BASE_PORT
echo_port=$((p + 19)) hello_port=$((p + 18))
port_free "$echo_port" || die "port $echo_port is in use"
port_free "$hello_port" || die "port $hello_port is in use"
python3 "$BENCH_DIR/stream_echo.py" server "$echo_port" >"$WORK/logs/echo.out" 2>&1 &
ECHO_PID=$!
STARTED_PIDS+=("$ECHO_PID")
(cd "$WORK" && exec "$HELLO" "$hello_port" 1) >"$WORK/logs/hello.out" 2>&1 &
HELLO_PID=$!
STARTED_PIDS+=("$HELLO_PID")
PID[hello]=$HELLO_PID PORT[hello]=$hello_port PID[echo]=$ECHO_PID
for _ in $(seq 50); do port_free "$echo_port" || break; sleep 0.1; done
for _ in $(seq 50); do port_free "$hello_port" || break; sleep 0.1; done

# The floor: bench/stream_floor.c, the least a proxy can do per session (what the kernel costs).
FLOOR=$WORK/stream_floor
gcc -O2 -o "$FLOOR" "$BENCH_DIR/stream_floor.c" || die "building bench/stream_floor.c"
ONE=(nginx-1w shoal-1w floor-1w)
declare -A SESS_PORT
i=0
for s in "${ONE[@]}"; do
    [ "$s" = floor-1w ] || write_stream_conf "$s" 1 "    server { listen 127.0.0.1:$((p + i)); proxy_pass 127.0.0.1:$echo_port; }
    server { listen 127.0.0.1:$((p + i + 1)); proxy_pass 127.0.0.1:$echo_port; }"
    start_stream "$s" "${s%%-*}" $((p + i))
    SESS_PORT[$s]=$((p + i + 1))
    i=$((i + 2))
done

SEED=()
if [ -z "${SKIP_SEED002:-}" ]; then
    i=10
    for s in nginx-2w nginx-2w-rp shoal-2w shoal-2w-rp; do
        rp=""
        case $s in *-rp) rp=" reuseport" ;; esac
        write_stream_conf "$s" 2 "    server { listen 127.0.0.1:$((p + i))$rp; proxy_pass 127.0.0.1:$hello_port; }"
        start_stream "$s" "${s%%-*}" $((p + i))
        SEED+=("$s")
        i=$((i + 1))
    done
fi

{
    echo "# stream — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "echo upstream: bench/stream_echo.py (Python threads); seed002 upstream: bench/hello, 1 thread"
    echo "servers at start:"; server_state "${ONE[@]}" ${SEED[@]+"${SEED[@]}"}
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION ECHO_CONNS=$ECHO_CONNS SESSION_CONNS=$SESSION_CONNS bench/stream.sh"
} | tee "$WORK/results/header.txt" >&2

# usage: measure TEST NAME ROUND PORT -- client arguments; appends "test name round units cpu_us"
measure() {
    local test=$1 name=$2 round=$3 port=$4; shift 5
    local pid=${PID[$name]} before after out units
    before=$(tree_ticks "$pid")
    out=$(timeout -k 5 $((SECONDS_RUN + 60)) python3 "$BENCH_DIR/stream_echo.py" "$1" "$port" "$SECONDS_RUN" "${@:2}") || true
    after=$(tree_ticks "$pid")
    case $test in
        echo) units=$(echo "$out" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p') ;;
        sessions) units=$(echo "$out" | sed -n 's/.*sessions=\([0-9]*\).*/\1/p') ;;
    esac
    local errors
    errors=$(echo "$out" | sed -n 's/.*errors=\([0-9]*\).*/\1/p')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$test" "$name" "$round" "${units:-0}" "$(awk -v b="$before" -v a="$after" -v hz="$HZ" 'BEGIN { printf "%.0f", (a - b) / hz * 1e6 }')" "${errors:-?}" >>"$WORK/results/units.tsv"
    log "$test $name round $round: $out, $(( (after - before) * 1000 / HZ )) ms CPU"
}

for round in $(seq "$ROUNDS"); do
    for s in "${ONE[@]}"; do
        measure echo "$s" "$round" "${PORT[$s]}" -- client "$MIB" "$ECHO_CONNS"
        measure sessions "$s" "$round" "${SESS_PORT[$s]}" -- sessions "$SESSION_CONNS"
    done
    for s in ${SEED[@]+"${SEED[@]}"}; do
        run_wrk seed002 "$s" "$WRK_T" "$CONNS" "$round"
    done
done

# usage: per_unit TEST UNIT_NAME SCALE (CPU us per SCALE units, medians over rounds)
per_unit() {
    awk -F'\t' -v test="$1" -v unit="$2" -v scale="$3" '
        $1 == test && $4 > 0 { k = $2; v[k] = v[k] " " ($5 / $4 * scale); u[k] = u[k] " " $4; e[k] += $6; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
        function median(s,   a, m, i, j, t) {
            m = split(s, a, " ")
            for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        END {
            printf "%-12s %14s %16s %8s %s\n", "server", "CPUus/" unit, unit "s/run", "vs nginx", "errors"
            for (i = 1; i <= n; i++) { k = order[i]; c[k] = median(v[k]) }
            for (i = 1; i <= n; i++) {
                k = order[i]; base = c["nginx-1w"]
                printf "%-12s %14.2f %16.0f %8s %s\n", k, c[k], median(u[k]) / scale, (base > 0 ? sprintf("%.2f", c[k] / base) : "-"), e[k]
            }
        }' "$WORK/results/units.tsv"
}

echo
cat "$WORK/results/header.txt"
echo
echo "## echo: 1 MiB out and back per round trip, $ECHO_CONNS connections, one worker; CPU per MiB echoed, medians of $ROUNDS rounds"
per_unit echo MiB "$MIB"
echo
echo "## sessions: a new session per 16-byte exchange, $SESSION_CONNS clients, one worker; CPU per session"
per_unit sessions session 1
if [ ${#SEED[@]} -gt 0 ]; then
    echo
    echo "## seed002 for stream: 2 workers, shared socket vs reuseport, wrk -t$WRK_T -c$CONNS -d$DURATION --latency through the proxy to bench/hello; ratios vs nginx-2w"
    summarize seed002 nginx-2w
fi
echo
echo "## servers after the load (threads, RSS, open fds)"
sleep 1
server_state "${ONE[@]}" ${SEED[@]+"${SEED[@]}"}
echo
echo "## server logs (anything unexpected)"
report_logs
echo "(raw results: $WORK/results/{units,raw}.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
