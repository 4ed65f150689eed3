#!/bin/bash
# User-space instructions per request, shoal vs nginx, counted by valgrind's callgrind: a figure
# that does not move with the machine's load (CPU time does, by ±20 % on a shared machine), so
# a change of a few percent in the request path can be seen. Kernel work is not counted: it is
# the same send and receive for both servers (see bench/README.md), and the CPU benchmarks
# (seed001.sh, proxy.sh, seed004.sh) still decide the performance targets.
#
# Each server runs alone under callgrind with one worker (nginx: master_process off), is warmed
# up with `wrk -c10` for 2 s with counting off, then counted over a 4-second `wrk -c10` run.
# Instructions counted / requests wrk completed = Ir/req (the warm-up is not counted).
#
#   SHOAL=/path/to/shoal bench/instructions.sh            # static, hit and proxy
#   CASES="static hit" SHOAL=... SHOAL0=/path/to/older/shoal bench/instructions.sh
#
# Cases:
#   static  seed 001's tuned nginx.conf, GET / (the index file, 612 bytes)
#   close   the same, each request on a connection of its own (`Connection: close`): what a
#           connection's accept, task and close cost beside its one answer (not run by default)
#   hit     proxy_cache on tmpfs (/dev/shm) in front of bench/hello, every request after the
#           first a HIT (seed 004's cache step, with add_header X-Cache-Status)
#   hitlog  the same with seed 004's last step, `access_log ... combined buffer=256k flush=10s`
#           (not run by default; hitlog - hit is what a logged line costs)
#   proxy   proxy_pass to bench/hello with upstream keepalive 32 and proxy_http_version 1.1
#   h2c     seed 001's page over HTTP/2 with prior knowledge, `h2load -c10 -m10` (warm-up 2,000
#           requests, 10,000 counted: 1,000 per connection, nginx's `keepalive_requests`, so no
#           server ends a connection before h2load is done with it; not run by default)
#   h2tls   the same over TLS (ALPN h2, ECDSA P-256; not run by default)
#   grpc    bench/grpc.sh's unary calls: `grpc_pass` (upstream keepalive 32) to the Python gRPC
#           server of the tests, `h2load -c8 -m1` over h2c (warm-up 500 calls, 4,000 counted;
#           not run by default; needs python3-grpcio)
# CACHESIM=1 runs callgrind with its cache and branch simulation (the host's cache sizes) and
# adds a comment line per server: I1 and D1 misses and mispredicted branches per request (a
# code path larger than the I1 cache costs CPU time the instruction count does not show).
# SHOAL0 adds a second shoal (an earlier build) to every case, for before/after. h2o (when
# installed; H2O=0 leaves it out) has a row in static, h2c and h2tls: one thread
# (`num-threads: 1`), `file.dir` on the same html directory, no access log, its defaults
# otherwise (its open-file cache is on by default, nginx's and shoal's is not in these cases).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CASES=${CASES:-static hit proxy}
H2O=${H2O:-1}
command -v h2o >/dev/null || H2O=0
BASE_PORT=${BASE_PORT:-19840}
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
command -v callgrind_annotate >/dev/null || die "callgrind_annotate is missing (valgrind package)"

build_shoal
build_hello
make_prefix
CACHE_DIR=$(mktemp -d /dev/shm/shoal-instr-cache.XXXXXX)
cleanup() {
    for p in "${STARTED_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    # KEEP=DIR keeps the callgrind files (for callgrind_annotate).
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$WORK"/results/*.callgrind.* "$KEEP"/ 2>/dev/null
    rm -rf "$WORK" "$CACHE_DIR"
}
trap cleanup EXIT

hello_port=$((BASE_PORT + 9))
port_free "$hello_port" || die "port $hello_port is in use"
(cd "$WORK" && exec "$HELLO" "$hello_port" 1) >"$WORK/logs/hello.out" 2>&1 &
STARTED_PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$hello_port/" && break; sleep 0.1; done

grpc_port=$((BASE_PORT + 8))
case " $CASES " in
*" grpc "*)
    /usr/bin/python3 -c 'import grpc' 2>/dev/null || die "python3-grpcio is missing"
    command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"
    port_free "$grpc_port" || die "port $grpc_port is in use"
    /usr/bin/python3 "$REPO/tests/e2e/grpc_support/server.py" "$grpc_port" >"$WORK/logs/grpc.out" 2>&1 &
    STARTED_PIDS+=($!)
    for _ in $(seq 100); do ss -Hltn "sport = :$grpc_port" | grep -q . && break; sleep 0.1; done
    # One gRPC message: uncompressed, 5 bytes (as bench/grpc.sh sends it).
    printf '\0\0\0\0\5hello' >"$WORK/call.bin"
    ;;
esac

# usage: write_case_conf FILE CASE PORT NAME KIND
write_case_conf() {
    local file=$1 case=$2 port=$3 name=$4 kind=$5
    if [ "$case" = h2c ] || [ "$case" = h2tls ]; then
        local listen="listen 127.0.0.1:$port http2;"
        if [ "$case" = h2tls ]; then
            [ -f "$WORK/conf/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt \
                ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
                -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null
            listen="listen 127.0.0.1:$port ssl http2;
        ssl_certificate $WORK/conf/cert.pem;
        ssl_certificate_key $WORK/conf/key.pem;"
        fi
        cat >"$file" <<CONF
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 1024; }
http {
    default_type application/octet-stream;
    access_log off;
    server {
        $listen
        root $WORK/html;
    }
}
CONF
    elif [ "$case" = grpc ]; then
        cat >"$file" <<CONF
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path tmp;
    upstream grpc_backend { server 127.0.0.1:$grpc_port; keepalive 32; }
    server {
        listen 127.0.0.1:$port http2;
        location / { grpc_pass grpc://grpc_backend; }
    }
}
CONF
        mkdir -p "$WORK/tmp"
    elif [ "$case" = static ] || [ "$case" = close ]; then
        write_nginx_conf "$file" "$port" 1 0 "$name"
    else
        local location
        local log="access_log off;"
        [ "$case" = hitlog ] && log="access_log logs/$name.access.log combined buffer=256k flush=10s;"
        if [ "$case" = hit ] || [ "$case" = hitlog ]; then
            location="proxy_cache zone;
            proxy_cache_valid 200 10m;
            add_header X-Cache-Status \$upstream_cache_status;
            proxy_pass http://127.0.0.1:$hello_port;"
        else
            location="proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";"
        fi
        cat >"$file" <<CONF
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;
events { worker_connections 1024; }
http {
    $log
    proxy_cache_path $CACHE_DIR/$name levels=1:2 keys_zone=zone:10m;
    upstream backend { server 127.0.0.1:$hello_port; keepalive 32; }
    server {
        listen 127.0.0.1:$port;
        location / {
            $location
        }
    }
}
CONF
    fi
    if [ "$kind" = nginx ]; then
        # One process: valgrind follows it, and callgrind_control reaches it by its pid.
        sed -i 's/^daemon off;/daemon off;\nmaster_process off;/' "$file"
    fi
}

# h2o's configuration for the static, h2c and h2tls cases. Started as root, h2o needs `user:
# root`: as nobody it could not write its pid file in the prefix and would exit.
# usage: write_h2o_case_conf FILE CASE PORT NAME
write_h2o_case_conf() {
    local file=$1 case=$2 port=$3 name=$4 ssl=""
    if [ "$case" = h2tls ]; then
        [ -f "$WORK/conf/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt \
            ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
            -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null
        ssl="  ssl:
    certificate-file: $WORK/conf/cert.pem
    key-file: $WORK/conf/key.pem"
    fi
    cat >"$file" <<CONF
$([ "$(id -u)" = 0 ] && echo "user: root")
num-threads: 1
pid-file: $WORK/logs/$name.pid
error-log: $WORK/logs/$name.error.log
listen:
  host: 127.0.0.1
  port: $port
$ssl
hosts:
  default:
    paths:
      /:
        file.dir: $WORK/html
CONF
}

# usage: count NAME KIND(shoal|nginx|h2o) BINARY CASE PORT -> prints "Ir/req requests"
count() {
    local name=$1 kind=$2 bin=$3 case=$4 port=$5
    local conf=$WORK/conf/$name.conf out=$WORK/results/$name.callgrind
    if [ "$kind" = h2o ]; then
        write_h2o_case_conf "$conf" "$case" "$port" "$name"
    else
        write_case_conf "$conf" "$case" "$port" "$name" "$kind"
    fi
    port_free "$port" || die "port $port is in use"
    local cmd=("$bin" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf")
    [ "$kind" = nginx ] && cmd=(nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf")
    [ "$kind" = h2o ] && cmd=(h2o -c "conf/$name.conf")
    local sim=()
    [ "${CACHESIM:-0}" = 1 ] && sim=(--cache-sim=yes --branch-sim=yes)
    (cd "$WORK" && exec valgrind --tool=callgrind "${sim[@]}" --instr-atstart=no \
        --callgrind-out-file="$out.%p" "${cmd[@]}") >"$WORK/logs/$name.valgrind" 2>&1 &
    local vpid=$!
    STARTED_PIDS+=("$vpid")
    local path=/
    [ "$case" = hit ] || [ "$case" = hitlog ] && path=/object
    local n url=http://127.0.0.1:$port$path
    local wrk_args=()
    [ "$case" = close ] && wrk_args=(-H 'Connection: close')
    local grpc_args=(-d "$WORK/call.bin" -H 'content-type: application/grpc' -H 'te: trailers')
    [ "$case" = grpc ] && path=/test.Echo/Echo url=http://127.0.0.1:$port/test.Echo/Echo
    case $case in
    grpc) for _ in $(seq 100); do h2load -n1 "${grpc_args[@]}" "$url" 2>/dev/null | grep -q '1 succeeded' && break; sleep 0.3; done ;;
    h2c) for _ in $(seq 100); do curl -s -o /dev/null --http2-prior-knowledge "$url" && break; sleep 0.3; done ;;
    h2tls)
        url=https://127.0.0.1:$port$path
        for _ in $(seq 100); do curl -sk -o /dev/null --http2 "$url" && break; sleep 0.3; done
        ;;
    *) for _ in $(seq 100); do curl -s -o /dev/null "$url" && break; sleep 0.3; done ;;
    esac
    if [ "$case" = grpc ]; then
        timeout 120 h2load -n500 -c8 -m1 "${grpc_args[@]}" "$url" >/dev/null
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(timeout 300 h2load -n4000 -c8 -m1 "${grpc_args[@]}" "$url" | awk '/^requests:/ {print $8}')
    elif [ "$case" = h2c ] || [ "$case" = h2tls ]; then
        timeout 60 h2load -n2000 -c10 -m10 "$url" >/dev/null
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(timeout 120 h2load -n10000 -c10 -m10 "$url" | awk '/^requests:/ {print $8}')
        [ "$n" = 10000 ] || die "$name: $n of 10000 requests answered"
    else
        timeout 20 wrk -t1 -c10 -d2s "${wrk_args[@]}" "$url" >/dev/null
    fi
    if [ "$path" = /object ]; then
        curl -s -D- -o /dev/null "http://127.0.0.1:$port$path" | grep -qi '^X-Cache-Status: HIT' ||
            die "$name: the hit case does not hit"
    fi
    if [ "$case" != h2c ] && [ "$case" != h2tls ] && [ "$case" != grpc ]; then
        callgrind_control -i on "$vpid" >/dev/null 2>&1
        n=$(timeout 30 wrk -t1 -c10 -d4s "${wrk_args[@]}" "$url" | awk '/requests in/ {print $1}')
    fi
    callgrind_per_unit "$vpid" "$out" "$n" || die "$name: no requests counted"
}

# usage: misses NAME N: with CACHESIM=1, a comment line of NAME's simulated cache and branch
# misses per request (the largest of its callgrind files, N requests).
misses() {
    [ "${CACHESIM:-0}" = 1 ] || return 0
    local file
    file=$(ls -S "$WORK/results/$1.callgrind".* | head -1)
    callgrind_annotate --show=I1mr,D1mr,D1mw,Bcm,Bim "$file" 2>/dev/null |
        awk -v name="$1" -v n="$2" '/PROGRAM TOTALS/ {
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9,]+$/) { gsub(/,/, "", $i); v[++k] = $i }
            printf "#   %s per request: I1 misses %d, D1 misses %d (read %d, write %d), branches mispredicted %d\n",
                name, v[1] / n, (v[2] + v[3]) / n, v[2] / n, v[3] / n, (v[4] + v[5]) / n }'
}

echo "# user-space instructions per request (callgrind), $(date -u +%FT%TZ)"
echo "# shoal: $SHOAL_DESC${SHOAL0:+; shoal0: $SHOAL0}; nginx: $(nginx -v 2>&1 | sed 's/.*: //')"
printf '%-8s %-8s %10s %10s %10s\n' case server Ir/req requests vs-nginx
p=$BASE_PORT
for case in $CASES; do
    read -r ngx_ir ngx_n < <(count "nginx-$case" nginx nginx "$case" $((p++)))
    printf '%-8s %-8s %10d %10d %10s\n' "$case" nginx "$ngx_ir" "$ngx_n" 1.00
    misses "nginx-$case" "$ngx_n"
    servers=("shoal:$SHOAL")
    [ -n "${SHOAL0:-}" ] && servers+=("shoal0:$SHOAL0")
    [ "$H2O" = 1 ] && [[ " static close h2c h2tls " == *" $case "* ]] && servers+=("h2o:h2o")
    for s in "${servers[@]}"; do
        kind=shoal
        [ "${s%%:*}" = h2o ] && kind=h2o
        read -r ir n < <(count "${s%%:*}-$case" "$kind" "${s#*:}" "$case" $((p++)))
        printf '%-8s %-8s %10d %10d %10.2f\n' "$case" "${s%%:*}" "$ir" "$n" \
            "$(awk -v a="$ir" -v b="$ngx_ir" 'BEGIN {print a / b}')"
        misses "${s%%:*}-$case" "$n"
    done
done
