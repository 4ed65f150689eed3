#!/usr/bin/env bash
# HTTP/2 side by side (issue 22's table): shoal, nginx and h2o serving the same small page and a
# 1 MiB file, over h2c (prior knowledge) and over TLS (ALPN h2), loaded by h2load; server CPU
# per request (utime+stime of the server's process tree / requests), req/s, interleaved rounds,
# medians.
#
#   bench/h2.sh                      # ROUNDS=3 REQUESTS=200000 CLIENTS=100 STREAMS=10
#   SHOAL=/path/to/shoal bench/h2.sh # a prebuilt binary (else SHOAL_REV=HEAD is built)
#
# Needs nghttp2-client (h2load), nginx and h2o (bench/install.sh). Listens on 127.0.0.1 only;
# stops what it started by PID. Not run by the tests: it loads the machine for minutes.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
ROUNDS=${ROUNDS:-3} REQUESTS=${REQUESTS:-200000} CLIENTS=${CLIENTS:-100} STREAMS=${STREAMS:-10}
BASE_PORT=${BASE_PORT:-19480}
HZ=$(getconf CLK_TCK)
STARTED_PIDS=()
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"
trap stop_all EXIT
command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"

if [ -z "${SHOAL:-}" ]; then
    SHOAL_REV=${SHOAL_REV:-HEAD}
    rev=$(cd "$REPO" && git rev-parse --short "$SHOAL_REV")
    src=$(mktemp -d /tmp/shoal-src.XXXXXX)
    (cd "$REPO" && git archive "$rev") | tar -x -C "$src"
    log "building shoal $rev (release)"
    (cd "$src" && cargo build --release) >&2
    rm -rf "$src"
    SHOAL=$CARGO_TARGET_DIR/release/shoal
fi

WORK=$(mktemp -d /tmp/shoal-h2.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/conf" "$WORK/logs"
# Seed 001's page: nginx's welcome page, 612 bytes.
cp /usr/share/nginx/html/index.html "$WORK/html/index.html" 2>/dev/null ||
    head -c 612 /dev/zero | tr '\0' 'x' >"$WORK/html/index.html"
head -c 1048576 /dev/urandom >"$WORK/html/1m.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null
chmod -R a+rX "$WORK"

nginx_like_conf() { # NAME PLAIN_PORT TLS_PORT (shoal and nginx 1.22 read the same file)
    cat >"$WORK/conf/$1.conf" <<CONF
worker_processes 1;
daemon off;
pid logs/$1.pid;
error_log logs/$1.error.log warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    server {
        listen 127.0.0.1:$2 http2;
        listen 127.0.0.1:$3 ssl http2;
        ssl_certificate $WORK/conf/cert.pem;
        ssl_certificate_key $WORK/conf/key.pem;
        root $WORK/html;
    }
}
CONF
}

h2o_conf() { # PLAIN_PORT TLS_PORT
    cat >"$WORK/conf/h2o.conf" <<CONF
num-threads: 1
pid-file: $WORK/logs/h2o.pid
error-log: $WORK/logs/h2o.error.log
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

declare -A SPID PLAIN TLS
start() { # NAME PLAIN_PORT TLS_PORT
    case $1 in
    shoal)
        nginx_like_conf shoal "$2" "$3"
        (cd "$WORK" && exec "$SHOAL" -p "$WORK/" -c conf/shoal.conf) >"$WORK/logs/shoal.out" 2>&1 &
        ;;
    nginx)
        nginx_like_conf nginx "$2" "$3"
        (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/nginx.error.log" -c conf/nginx.conf) >"$WORK/logs/nginx.out" 2>&1 &
        ;;
    h2o)
        h2o_conf "$2" "$3"
        (cd "$WORK" && exec h2o -c conf/h2o.conf) >"$WORK/logs/h2o.out" 2>&1 &
        ;;
    esac
    SPID[$1]=$! PLAIN[$1]=$2 TLS[$1]=$3
    STARTED_PIDS+=("$!")
    for _ in $(seq 50); do curl -sk -o /dev/null --http2 "https://127.0.0.1:$3/" && break; sleep 0.1; done
    if ! curl -sfk -o /dev/null --http2 "https://127.0.0.1:$3/index.html"; then
        [ "$1" = h2o ] || die "$1 does not answer h2 over TLS"
        log "h2o does not answer h2 over TLS (see $WORK/logs/h2o.error.log): left out"
        H2O_OK=0
        return
    fi
    if ! curl -sf -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$2/index.html"; then
        # Debian's h2o 2.2 speaks h2c only after an Upgrade: its h2c cases are left out.
        [ "$1" = h2o ] || die "$1 does not answer h2c"
        log "h2o does not answer h2c with prior knowledge: measured over TLS only"
        PLAIN[$1]=""
    fi
}

start shoal "$BASE_PORT" $((BASE_PORT + 1))
start nginx $((BASE_PORT + 2)) $((BASE_PORT + 3))
NAMES="nginx shoal"
if command -v h2o >/dev/null; then
    H2O_OK=1
    start h2o $((BASE_PORT + 4)) $((BASE_PORT + 5))
    [ "$H2O_OK" = 1 ] && NAMES="nginx h2o shoal"
fi

printf 'server\tcase\tround\treq_s\tcpu_us\tsys_us\n' >"$WORK/raw.tsv"
measure() { # NAME CASE URL H2LOAD-ARGS...
    local name=$1 case=$2 url=$3
    shift 3
    local pid=${SPID[$name]} before after sys0 sys1 out reqs rps cpu sys
    before=$(tree_ticks "$pid")
    sys0=$(tree_ticks "$pid" sys)
    out=$(timeout -k 5 300 h2load "$@" "$url")
    after=$(tree_ticks "$pid")
    sys1=$(tree_ticks "$pid" sys)
    reqs=$(awk '/^requests:/ {print $8}' <<<"$out")
    rps=$(awk '/^finished in/ {print $4}' <<<"$out" | tr -d ',')
    cpu=$(awk -v b="$before" -v a="$after" -v hz="$HZ" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    sys=$(awk -v b="$sys0" -v a="$sys1" -v hz="$HZ" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    log "round $round $name $case: $rps req/s, $cpu us CPU/req ($sys us kernel)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$case" "$round" "$rps" "$cpu" "$sys" >>"$WORK/raw.tsv"
}
for round in $(seq "$ROUNDS"); do
    for name in $NAMES; do
        if [ -n "${PLAIN[$name]}" ]; then
            measure "$name" page-h2c "http://127.0.0.1:${PLAIN[$name]}/index.html" -n"$REQUESTS" -c"$CLIENTS" -m"$STREAMS"
        fi
        measure "$name" page-tls "https://127.0.0.1:${TLS[$name]}/index.html" -n"$REQUESTS" -c"$CLIENTS" -m"$STREAMS"
        if [ -n "${PLAIN[$name]}" ]; then
            measure "$name" 1m-one-conn "http://127.0.0.1:${PLAIN[$name]}/1m.bin" -n2000 -c1 -m1
        fi
    done
done
echo
echo "## HTTP/2, h2load -c$CLIENTS -m$STREAMS (page), -c1 (1 MiB), medians of $ROUNDS rounds ($(date -u +%F))"
awk -F'\t' 'NR > 1 { k = $1 "\t" $2; cpu[k] = cpu[k] " " $5; rps[k] = rps[k] " " $4; sys[k] = sys[k] " " $6; usr[k] = usr[k] " " ($5 - $6) }
    function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
    END { printf "%-8s %-12s %10s %10s %8s %8s\n", "server", "case", "req/s", "CPU us/req", "user", "kernel"
          for (k in cpu) { split(k, p, "\t"); printf "%-8s %-12s %10.0f %10.2f %8.2f %8.2f\n", p[1], p[2], med(rps[k]), med(cpu[k]), med(usr[k]), med(sys[k]) } }' "$WORK/raw.tsv"
echo "(every round: $WORK/raw.tsv)"
