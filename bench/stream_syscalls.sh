#!/usr/bin/env bash
# System calls per stream TCP session, shoal vs nginx: one worker each, `proxy_pass` to
# bench/stream_echo.py's echo server, N sessions made one after another (connect, 16 bytes out
# and back, close), `strace -f -c` attached to the serving side (nginx: its worker; shoal: the
# whole process, every thread) for exactly those sessions. Prints each side's per-call counts
# and the calls per session. A count, so the machine's load does not move it. The floor row is
# bench/stream_floor.c, a minimal C accept -> connect -> relay loop: the kernel's share.
#
#   bench/stream_syscalls.sh                  # N=2000, SHOAL=target/release/shoal or $SHOAL
#   N=500 SHOAL=target/debug/shoal bench/stream_syscalls.sh
#
# Everything listens on 127.0.0.1 (BASE_PORT 19480..19483); what was started is stopped by PID.
set -euo pipefail

# As root, shoal without `user` is nginx's two processes: a root master and a child serving as
# nginx's default `nobody`. The benchmarks measure one process (its pid: strace, callgrind, RSS)
# and let it write in the prefix, so shoal is told `user root` (one process, root, as before).
SHOAL_ARGS=()
[ "$(id -u)" = 0 ] && SHOAL_ARGS=(-g "user root;")
cd "$(dirname "$0")/.."
N=${N:-2000}
BASE=${BASE_PORT:-19480}
SHOAL=${SHOAL:-${CARGO_TARGET_DIR:-target}/release/shoal}
[ -x "$SHOAL" ] || { echo "no shoal at $SHOAL (set SHOAL)" >&2; exit 1; }
command -v strace >/dev/null || { echo "strace is needed" >&2; exit 1; }
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/logs" "$WORK/conf"
ECHO=$BASE
python3 bench/stream_echo.py server "$ECHO" &
PIDS+=($!)

conf() { # NAME PORT
    cat >"$WORK/conf/$1.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
daemon off;
pid logs/$1.pid;
error_log logs/$1.error.log;
events { worker_connections 1024; }
stream { server { listen 127.0.0.1:$2; proxy_pass 127.0.0.1:$ECHO; } }
CONF
}

# N sessions to PORT, one at a time.
sessions() {
    python3 - "$1" "$N" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"s" * 16)
    got = b""
    while len(got) < 16:
        b = c.recv(64)
        if not b:
            raise SystemExit("closed early")
        got += b
    c.close()
PY
}

wait_port() {
    for _ in $(seq 100); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=1).close()" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "port $1 never opened" >&2
    exit 1
}

# usage: count NAME KIND PORT; prints the strace summary and "NAME: X calls/session".
count() {
    local name=$1 kind=$2 port=$3 pid target
    conf "$name" "$port"
    case $kind in
        shoal) "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf" >"$WORK/logs/$name.out" 2>&1 & ;;
        nginx) nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf" >"$WORK/logs/$name.out" 2>&1 & ;;
        floor) "$WORK/stream_floor" "$ECHO" "$port" & ;;
    esac
    pid=$!
    PIDS+=("$pid")
    wait_port "$port"
    sessions "$port" >/dev/null 2>&1 || true # warm: the first sessions allocate
    target=$pid
    [ "$kind" = nginx ] && target=$(pgrep -P "$pid" | head -1)
    strace -f -c -o "$WORK/$name.strace" -p "$target" &
    local st=$!
    sleep 1
    sessions "$port"
    sleep 0.5
    kill -INT "$st"
    wait "$st" 2>/dev/null || true
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "== $name ($kind), $N sessions"
    cat "$WORK/$name.strace"
    local total
    total=$(awk '$NF == "total" {print $4}' "$WORK/$name.strace")
    awk -v t="$total" -v n="$N" -v name="$name" 'BEGIN { printf "%s: %.2f calls per session\n", name, t / n }'
}

gcc -O2 -o "$WORK/stream_floor" bench/stream_floor.c
count nginx nginx $((BASE + 1))
count shoal shoal $((BASE + 2))
count floor floor $((BASE + 3))
