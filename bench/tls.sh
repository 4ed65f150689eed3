#!/usr/bin/env bash
# TLS (issue 20): shoal, nginx and h2o side by side over HTTPS, measured with wrk, interleaved,
# medians; server CPU per handshake and per request from /proc (as bench/seed001.sh).
#
#   bench/tls.sh                               # ROUNDS=3 DURATION=10s, every case
#   CASES="full resumed" ROUNDS=1 SHOAL=/path/to/shoal bench/tls.sh
#
# Cases (each on an ECDSA P-256 and an RSA-2048 certificate where it says "both"):
#   full     full TLSv1.3 handshakes: one request per connection (`Connection: close`; wrk's
#            OpenSSL client resumes nothing), both certificates. CPU/req is CPU per handshake.
#   resumed  resumed TLSv1.3 handshakes: `openssl s_time -reuse` (one client process, so a
#            rate and CPU per connection, not a capacity), ECDSA.
#   page     seed 001's 612-byte page over TLS with keep-alive (wrk -c100), ECDSA.
#   file     a 1 MiB file over TLS with keep-alive (wrk -c10): throughput and CPU per MiB, ECDSA.
#   idle     memory per idle TLS keep-alive connection (1000 connections held by
#            bench/idle_memory.py after one request each), ECDSA.
# The targets (issue 20): full and resumed handshakes ≤ 0.75× nginx's CPU; page ≤ 0.75× nginx's
# and ≤ h2o's CPU per request; file ≥ nginx's throughput and ≤ its CPU per byte; idle ≤ nginx's.
#
# Environment: CASES, KINDS ("shoal nginx h2o": the servers to run), ROUNDS (3), DURATION (10s), WRK_THREADS (1), BASE_PORT (19440), SHOAL (a
# prebuilt binary), SHOAL_REV, CARGO_TARGET_DIR (as bench/lib.sh), KEEP=1 (keep the prefix).
# Every server: one worker/thread, 127.0.0.1 only, `ssl_protocols TLSv1.2 TLSv1.3` (nginx 1.22
# offers only TLSv1.2 unless told), session cache and tickets on. Everything started here is
# stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CASES=${CASES:-full resumed page file idle}
KINDS=${KINDS:-shoal nginx h2o}
WRK_THREADS=${WRK_THREADS:-1}
BASE_PORT=${BASE_PORT:-19440}
command -v h2o >/dev/null || die "h2o is not installed (apt-get install h2o)"
command -v openssl >/dev/null || die "openssl is not installed"

build_shoal
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# Certificates: a CA, then an ECDSA P-256 and an RSA-2048 server certificate for localhost.
CERTS=$WORK/certs
mkdir -p "$CERTS"
(
    cd "$CERTS"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
        -out ca.crt -days 30 -subj "/CN=bench CA" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ecdsa.key \
        -out ecdsa.csr -subj /CN=localhost 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.csr -subj /CN=localhost 2>/dev/null
    for k in ecdsa rsa; do
        openssl x509 -req -in $k.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $k.crt \
            -days 30 -extfile ext.cnf 2>/dev/null
    done
)
chmod -R a+rX "$CERTS"
head -c $((1 << 20)) /dev/urandom >"$WORK/html/1m.bin"
chmod a+r "$WORK/html/1m.bin"

# nginx.conf (nginx and shoal alike): seed 001's tuned server over TLS.
# usage: write_tls_conf FILE PORT NAME CERT(ecdsa|rsa)
write_tls_conf() {
    local file=$1 port=$2 name=$3 cert=$4
    cat >"$file" <<CONF
# seed 001's tuned configuration over TLS, for bench/tls.sh.
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 10240; }
http {
    include mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=100 inactive=20s;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    server {
        listen 127.0.0.1:$port ssl;
        server_name localhost;
        ssl_certificate $CERTS/$cert.crt;
        ssl_certificate_key $CERTS/$cert.key;
        location / { root html; index index.html; }
    }
}
CONF
}

write_h2o_tls_conf() {
    local file=$1 port=$2 name=$3 cert=$4
    cat >"$file" <<CONF
# h2o over TLS for bench/tls.sh: one thread, static files from the prefix, no access log.
user: root
num-threads: 1
pid-file: $WORK/logs/$name.pid
error-log: $WORK/logs/$name.error.log
listen:
  host: 127.0.0.1
  port: $port
  ssl:
    certificate-file: $CERTS/$cert.crt
    key-file: $CERTS/$cert.key
    min-version: TLSv1.2
hosts:
  default:
    paths:
      /:
        file.dir: $WORK/html
CONF
}

# usage: start_tls NAME KIND(shoal|nginx|h2o) PORT CERT
start_tls() {
    local name=$1 kind=$2 port=$3 cert=$4
    port_free "$port" || die "port $port is in use"
    local out=$WORK/logs/$name.out
    case $kind in
        shoal)
            write_tls_conf "$WORK/conf/$name.conf" "$port" "$name" "$cert"
            (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$out" 2>&1 &
            ;;
        nginx)
            write_tls_conf "$WORK/conf/$name.conf" "$port" "$name" "$cert"
            (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf") >"$out" 2>&1 &
            ;;
        h2o)
            write_h2o_tls_conf "$WORK/conf/$name.yaml" "$port" "$name" "$cert"
            (cd "$WORK" && exec h2o -c "conf/$name.yaml") >"$out" 2>&1 &
            ;;
    esac
    local pid=$!
    STARTED_PIDS+=("$pid")
    PID[$name]=$pid PORT[$name]=$port KIND[$name]=$kind
    local i
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; die "$name exited at start"; }
        curl -s --cacert "$CERTS/ca.crt" -o "$WORK/logs/$name.check" "https://localhost:$port/" 2>/dev/null && break
        sleep 0.1
    done
    [ "$(wc -c <"$WORK/logs/$name.check" 2>/dev/null || echo 0)" -eq 612 ] || die "$name did not answer over TLS"
    log "started $name (pid $pid, port $port, $cert)"
}

SERVERS=()
p=$BASE_PORT
for cert in ecdsa rsa; do
    for kind in $KINDS; do
        start_tls "$kind-$cert" "$kind" "$p" "$cert"
        SERVERS+=("$kind-$cert")
        p=$((p + 1))
    done
done

# `openssl s_time` against a server: connections in DURATION and the server's CPU per
# connection, appended to raw.tsv as run_wrk's lines are.
run_s_time() {
    local test=$1 name=$2 round=$3 pid=${PID[$2]} port=${PORT[$2]}
    local out=$WORK/results/$test.$name.r$round.stime before after
    before=$(tree_ticks "$pid")
    openssl s_time -connect "127.0.0.1:$port" -CAfile "$CERTS/ca.crt" -reuse \
        -time "${DURATION%s}" -www / >"$out" 2>&1 || log "warning: s_time exited with $? for $name"
    after=$(tree_ticks "$pid")
    local conns rate cpu
    conns=$(awk '/connections in/ && /real seconds/ {print $1; exit}' "$out")
    rate=$(awk -v n="${conns:-0}" -v d="${DURATION%s}" 'BEGIN { printf "%.1f", n / d }')
    cpu=$(awk -v b="$before" -v a="$after" -v hz="$HZ" -v n="${conns:-0}" \
        'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    printf '%s\t%s\t1\t%s\t%s\t%s\tnan\tnan\tnan\tnan\t%s\t-\t0\t-\t-\n' "$test" "$name" "$round" \
        "${conns:-0}" "$rate" "$cpu" >>"$WORK/results/raw.tsv"
    log "$test $name round $round: $rate conn/s, $cpu us CPU/conn"
}

# Memory per idle keep-alive TLS connection: RSS growth with 1000 connections held open.
run_idle() {
    local name=$1 pid=${PID[$1]} port=${PORT[$1]}
    # nginx's connections are its worker's (the master's only child).
    [ "${KIND[$name]}" = nginx ] && pid=$(pgrep -P "$pid" | head -1)
    printf '%s: ' "$name" >>"$WORK/results/idle.txt"
    (ulimit -n 20000; TLS_CAFILE=$CERTS/ca.crt python3 "$BENCH_DIR/idle_memory.py" "$port" \
        "${IDLE_CONNS:-1000}" "$pid") >>"$WORK/results/idle.txt" 2>&1 ||
        echo "idle_memory.py failed" >>"$WORK/results/idle.txt"
}

{
    echo "# TLS — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "shoal: $SHOAL_DESC; nginx: $(nginx -v 2>&1); h2o: $(h2o --version | head -1)"
    echo "command: CASES=\"$CASES\" ROUNDS=$ROUNDS DURATION=$DURATION bench/tls.sh"
} | tee "$WORK/results/header.txt" >&2

for round in $(seq "$ROUNDS"); do
    for c in $CASES; do
        case $c in
            full)
                for s in "${SERVERS[@]}"; do
                    SCHEME=https run_wrk full "$s" "$WRK_THREADS" 50 "$round" -H "Connection: close"
                done
                ;;
            resumed)
                for k in $KINDS; do run_s_time resumed "$k-ecdsa" "$round"; done
                ;;
            page)
                for k in $KINDS; do
                    SCHEME=https run_wrk page "$k-ecdsa" "$WRK_THREADS" 100 "$round"
                done
                ;;
            file)
                for k in $KINDS; do
                    SCHEME=https WRK_PATH=/1m.bin run_wrk file "$k-ecdsa" "$WRK_THREADS" 10 "$round"
                done
                ;;
            idle) if [ "$round" = 1 ]; then for k in $KINDS; do run_idle "$k-ecdsa"; done; fi ;;
            *) die "unknown case $c" ;;
        esac
    done
done

echo
cat "$WORK/results/header.txt"
for c in $CASES; do
    case $c in
        full) echo; echo "## full TLSv1.3 handshakes (Connection: close), wrk -c50: CPUus/req = CPU per handshake"
              summarize full nginx-ecdsa ;;
        resumed) echo; echo "## resumed handshakes, openssl s_time -reuse: req/s = connections/s, CPUus/req per connection"
                 summarize resumed nginx-ecdsa ;;
        page) echo; echo "## the 612-byte page over TLS, keep-alive, wrk -c100"; summarize page nginx-ecdsa ;;
        file) echo; echo "## 1 MiB over TLS, keep-alive, wrk -c10: CPUus/req is per MiB"; summarize file nginx-ecdsa ;;
        idle) echo; echo "## memory per idle TLS keep-alive connection"; cat "$WORK/results/idle.txt" ;;
    esac
done
