#!/usr/bin/env bash
# Memory per idle HTTP/2 connection (issue 22: ≤ nginx's), h2c and TLS, shoal beside nginx and
# h2o: each server runs alone with one worker (nginx: `master_process off`, so its one process
# holds the connections; h2o: `num-threads: 1`, `http2-idle-timeout: 300`),
# `keepalive_timeout 300s`, no access log; bench/h2_idle_memory.py opens
# IDLE_CONNS connections (default 1000), asks GET / (seed 001's page) on each and keeps them
# open, and prints the server's RSS growth per connection.
#
#   SHOAL=/path/to/shoal bench/h2_idle.sh          # else the checkout is built (release)
#   IDLE_CONNS=2000 BATCHES=4 SERVERS="shoal" KINDS="h2c" bench/h2_idle.sh
#
# Listens on 127.0.0.1 only; stops what it started by PID.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
BASE_PORT=${BASE_PORT:-19560}
IDLE_CONNS=${IDLE_CONNS:-1000}
SERVERS=${SERVERS:-nginx h2o shoal}
KINDS=${KINDS:-h2c tls}
export BATCHES=${BATCHES:-1}

build_shoal
WORK=$(mktemp -d /tmp/shoal-h2idle.XXXXXX)
trap 'stop_all; rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/conf" "$WORK/logs"
cp "$REPO/html/index.html" "$WORK/html/index.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null
chmod -R a+rX "$WORK"

conf() { # NAME PLAIN_PORT TLS_PORT: one file both servers read
    cat >"$WORK/conf/$1.conf" <<CONF
worker_processes 1;
daemon off;
$([ "$1" = nginx ] && echo "master_process off;")
pid logs/$1.pid;
error_log logs/$1.error.log warn;
events { worker_connections $((IDLE_CONNS + 100)); }
http {
    default_type application/octet-stream;
    access_log off;
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$2;
        listen 127.0.0.1:$3 ssl;
        http2 on;
        ssl_certificate $WORK/conf/cert.pem;
        ssl_certificate_key $WORK/conf/key.pem;
        root $WORK/html;
    }
}
CONF
    # nginx 1.22 has no `http2` directive: the listen parameter.
    if [ "$1" = nginx ]; then
        sed -i -e 's/^        http2 on;$//' -e "s/listen 127.0.0.1:$2;/listen 127.0.0.1:$2 http2;/" \
            -e "s/listen 127.0.0.1:$3 ssl;/listen 127.0.0.1:$3 ssl http2;/" "$WORK/conf/$1.conf"
    fi
}

# h2o 2.2: one thread, idle HTTP/2 connections kept 300 s (its default closes them after 10 s).
# As root it needs `user: root`: as nobody it cannot write its pid file in the prefix and exits.
h2o_conf() { # PLAIN_PORT TLS_PORT
    cat >"$WORK/conf/h2o.conf" <<CONF
$([ "$(id -u)" = 0 ] && echo "user: root")
num-threads: 1
pid-file: $WORK/logs/h2o.pid
error-log: $WORK/logs/h2o.error.log
http2-idle-timeout: 300
listen:
  host: 127.0.0.1
  port: $1
listen:
  host: 127.0.0.1
  port: $2
  ssl:
    certificate-file: $WORK/conf/cert.pem
    key-file: $WORK/conf/key.pem
hosts:
  default:
    paths:
      /:
        file.dir: $WORK/html
CONF
}

echo "## memory per idle HTTP/2 connection, $IDLE_CONNS connections, BATCHES=$BATCHES ($(date -u +%F), shoal: $SHOAL_DESC)"
n=0
for name in $SERVERS; do
    plain=$((BASE_PORT + n)) tls=$((BASE_PORT + n + 1))
    n=$((n + 2))
    port_free "$plain" && port_free "$tls" || die "port $plain or $tls is in use"
    case $name in
    h2o) h2o_conf "$plain" "$tls" ;;
    *) conf "$name" "$plain" "$tls" ;;
    esac
    case $name in
    shoal) (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$WORK/logs/$name.out" 2>&1 & ;;
    nginx) (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/nginx.error.log" -c "conf/$name.conf") >"$WORK/logs/$name.out" 2>&1 & ;;
    h2o) (cd "$WORK" && exec h2o -c conf/h2o.conf) >"$WORK/logs/$name.out" 2>&1 & ;;
    *) die "unknown server $name" ;;
    esac
    pid=$!
    STARTED_PIDS+=("$pid")
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        curl -sk -o /dev/null --http2 "https://127.0.0.1:$tls/" && break
        sleep 0.1
    done
    curl -sfk -o /dev/null --http2 "https://127.0.0.1:$tls/" || {
        cat "$WORK/logs/$name.out" >&2
        die "$name does not answer h2 over TLS (its output above)"
    }
    for kind in $KINDS; do
        port=$plain tlsenv=0
        [ "$kind" = tls ] && port=$tls tlsenv=1
        # A few connections first, so what every connection's first use allocates once is
        # not counted.
        (TLS=$tlsenv BATCHES=1 python3 "$BENCH_DIR/h2_idle_memory.py" "$port" 20 "$pid" >/dev/null) ||
            die "$name $kind: h2_idle_memory.py failed"
        printf '%-6s %-4s ' "$name" "$kind"
        (ulimit -n $((IDLE_CONNS + 1000)); TLS=$tlsenv python3 "$BENCH_DIR/h2_idle_memory.py" "$port" "$IDLE_CONNS" "$pid") ||
            die "$name $kind: h2_idle_memory.py failed"
    done
    stop_all
done
