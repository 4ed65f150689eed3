#!/usr/bin/env bash
# User-space instructions per stream session and per relayed request, shoal vs nginx, counted
# by valgrind's callgrind (as bench/instructions.sh does for HTTP): a count the machine's load
# does not move, for changes of a few percent that stream.sh's CPU times cannot see. Kernel
# work is not in it (bench/stream_syscalls.sh counts the system calls).
#
# Each server runs alone under callgrind with one worker (nginx: master_process off), warmed up
# with counting off, then counted:
#   sessions  `proxy_pass` to bench/stream_echo.py's echo server; SESSION_CONNS (4) Python
#             clients each opening a session, 16 bytes out and back, closing, for 4 s: Ir per
#             session
#   echo      the same upstream; ECHO_CONNS (4) connections each sending 1 MiB and reading it
#             back, in a loop, for 4 s: Ir per MiB echoed (1 MiB in and out through each side;
#             not run by default)
#   relay     `proxy_pass` to bench/hello; `wrk -t1 -c10 -d4s` through the proxy (keep-alive
#             HTTP inside each session, seed 002's traffic): Ir per request relayed
#
#   SHOAL=/path/to/shoal bench/stream_instructions.sh
#   CASES=sessions SHOAL=... SHOAL0=/path/to/older/shoal bench/stream_instructions.sh
#
# Everything listens on 127.0.0.1 (BASE_PORT 19860...); what was started is stopped by PID.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CASES=${CASES:-sessions relay}
SESSION_CONNS=${SESSION_CONNS:-4}
ECHO_CONNS=${ECHO_CONNS:-4}
BASE_PORT=${BASE_PORT:-19860}
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
command -v callgrind_annotate >/dev/null || die "callgrind_annotate is missing (valgrind package)"

build_shoal
build_hello
make_prefix
cleanup() {
    for p in "${STARTED_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    # KEEP=DIR keeps the callgrind files (for callgrind_annotate).
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$WORK"/results/*.callgrind.* "$KEEP"/ 2>/dev/null
    [ -n "${KEEP:-}" ] && cp -r "$WORK"/logs "$KEEP"/ 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

hello_port=$((BASE_PORT + 9)) echo_port=$((BASE_PORT + 8))
port_free "$hello_port" || die "port $hello_port is in use"
port_free "$echo_port" || die "port $echo_port is in use"
(cd "$WORK" && exec "$HELLO" "$hello_port" 1) >"$WORK/logs/hello.out" 2>&1 &
STARTED_PIDS+=($!)
python3 "$BENCH_DIR/stream_echo.py" server "$echo_port" >"$WORK/logs/echo.out" 2>&1 &
STARTED_PIDS+=($!)
for _ in $(seq 50); do port_free "$hello_port" || port_free "$echo_port" || break; sleep 0.1; done

# usage: count NAME KIND(shoal|nginx) BINARY CASE PORT -> prints "Ir/unit units"
count() {
    local name=$1 kind=$2 bin=$3 case=$4 port=$5
    local conf=$WORK/conf/$name.conf out=$WORK/results/$name.callgrind up=$echo_port
    [ "$case" = relay ] && up=$hello_port
    cat >"$conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
daemon off;
$([ "$kind" = nginx ] && echo "master_process off;")
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 1024; }
stream { server { listen 127.0.0.1:$port; proxy_pass 127.0.0.1:$up; } }
CONF
    port_free "$port" || die "port $port is in use"
    local cmd=("$bin" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf")
    [ "$kind" = nginx ] && cmd=(nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf")
    (cd "$WORK" && exec valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$out.%p" "${cmd[@]}") >"$WORK/logs/$name.valgrind" 2>&1 &
    local vpid=$! n
    STARTED_PIDS+=("$vpid")
    for _ in $(seq 100); do port_free "$port" || break; sleep 0.3; done
    case $case in
    sessions)
        python3 "$BENCH_DIR/stream_echo.py" sessions "$port" 2 "$SESSION_CONNS" >/dev/null
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(python3 "$BENCH_DIR/stream_echo.py" sessions "$port" 4 "$SESSION_CONNS" |
            sed -n 's/.*sessions=\([0-9]*\) errors=0.*/\1/p')
        ;;
    echo)
        python3 "$BENCH_DIR/stream_echo.py" client "$port" 2 1048576 "$ECHO_CONNS" >/dev/null
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(python3 "$BENCH_DIR/stream_echo.py" client "$port" 4 1048576 "$ECHO_CONNS" |
            sed -n 's/.*bytes=\([0-9]*\) .*errors=0.*/\1/p')
        n=$((${n:-0} / 1048576))
        ;;
    relay)
        timeout 20 wrk -t1 -c10 -d2s "http://127.0.0.1:$port/" >/dev/null
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(timeout 30 wrk -t1 -c10 -d4s "http://127.0.0.1:$port/" | awk '/requests in/ {print $1}')
        ;;
    esac
    callgrind_per_unit "$vpid" "$out" "$n" || die "$name: nothing counted (or client errors)"
}

echo "# stream: user-space instructions per unit (callgrind), $(date -u +%FT%TZ)"
echo "# shoal: $SHOAL_DESC${SHOAL0:+; shoal0: $SHOAL0}; nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
printf '%-9s %-8s %10s %10s %10s\n' case server Ir/unit units vs-nginx
p=$BASE_PORT
for case in $CASES; do
    read -r ngx_ir ngx_n < <(count "nginx-$case" nginx nginx "$case" $((p++)))
    printf '%-9s %-8s %10d %10d %10s\n' "$case" nginx "$ngx_ir" "$ngx_n" 1.00
    servers=("shoal:$SHOAL")
    [ -n "${SHOAL0:-}" ] && servers+=("shoal0:$SHOAL0")
    for s in "${servers[@]}"; do
        read -r ir n < <(count "${s%%:*}-$case" shoal "${s#*:}" "$case" $((p++)))
        printf '%-9s %-8s %10d %10d %10.2f\n' "$case" "${s%%:*}" "$ir" "$n" \
            "$(awk -v a="$ir" -v b="$ngx_ir" 'BEGIN {print a / b}')"
    done
done
