#!/usr/bin/env bash
# HTTP/2 side by side (issue 22's table): shoal, nginx and h2o serving seed 001's page and a
# 1 MiB file, over h2c (prior knowledge) and over TLS (ALPN h2), loaded by h2load; server CPU
# per request (utime+stime of the server's process tree / requests), req/s, interleaved rounds,
# medians. One worker each (nginx `worker_processes 1`, h2o `num-threads: 1`), the same files.
#
#   bench/h2.sh                      # ROUNDS=3 REQUESTS=200000 CLIENTS=100 STREAMS=10
#   SHOAL=/path/to/shoal bench/h2.sh # a prebuilt binary (else SHOAL_REV=HEAD is built; PGO=1:
#                                    # bench/pgo.sh's build of the checkout)
#
# Cases: page-h2c and page-tls (h2load -n$REQUESTS -c$CLIENTS -m$STREAMS), 1m-h2c and 1m-tls
# (FILE_REQUESTS (2000) responses of 1 MiB over one connection, -c1 -m1). A round counts only
# when every request was answered with a 2xx of the file's size over the protocol asked for;
# otherwise it shows in `notes`. Environment: SERVERS ("nginx h2o shoal"; add shoal0 for a
# second shoal, the binary SHOAL0, e.g. the plain build beside bench/pgo.sh's), CASES (all four, e.g.
# CASES=1m-h2c for the 1 MiB file over h2c alone), OPEN_FILE_CACHE
# (shoal's and nginx's: "max=100 inactive=20s" as seed 001's, or "off"), BASE_PORT (19480),
# KEEP=1 (keep the prefix with configs, logs and raw.tsv).
#
# Needs nghttp2-client (h2load), nginx and h2o (bench/install.sh). Listens on 127.0.0.1 only;
# stops what it started by PID. Not run by the tests: it loads the machine for minutes.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
ROUNDS=${ROUNDS:-3} REQUESTS=${REQUESTS:-200000} CLIENTS=${CLIENTS:-100} STREAMS=${STREAMS:-10}
FILE_REQUESTS=${FILE_REQUESTS:-2000}
OPEN_FILE_CACHE=${OPEN_FILE_CACHE:-max=100 inactive=20s}
BASE_PORT=${BASE_PORT:-19480}
SERVERS=${SERVERS:-nginx h2o shoal}
CASES=${CASES:-page-h2c page-tls 1m-h2c 1m-tls}
HZ=$(getconf CLK_TCK)
STARTED_PIDS=()
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"
command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"
if [[ " $SERVERS " == *" h2o "* ]] && ! command -v h2o >/dev/null; then
    log "h2o is not installed (bench/install.sh): left out"
    SERVERS=${SERVERS//h2o/}
fi

if [ -z "${SHOAL:-}" ] && [ "${PGO:-0}" = 1 ]; then
    build_shoal # bench/pgo.sh's build of the checkout
elif [ -z "${SHOAL:-}" ]; then
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
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/conf" "$WORK/logs"
# Seed 001's page (612 bytes), as bench/seed001.sh serves it.
cp "$REPO/html/index.html" "$WORK/html/index.html"
head -c 1048576 /dev/urandom >"$WORK/html/1m.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null
chmod -R a+rX "$WORK"
declare -A SIZE=([page]=$(wc -c <"$WORK/html/index.html") [1m]=1048576)

# shoal and nginx 1.22 read the same file. `open_file_cache` is seed 001's (h2o keeps open files
# at its defaults too); `keepalive_requests` lets every connection carry its share of the run, as
# h2o's do (at nginx's default of 1000, h2load's connections would end after -n 100000 and the
# rest of its requests fail).
nginx_like_conf() { # NAME PLAIN_PORT TLS_PORT
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
    open_file_cache $OPEN_FILE_CACHE;
    keepalive_requests $((REQUESTS / CLIENTS + FILE_REQUESTS + 1000));
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

# h2o 2.2 answers h2c with prior knowledge and h2 over TLS at its defaults. Started as root
# without `user:`, it switches to nobody before writing its pid file, which nobody may not
# create in the prefix: it exits at start ("failed to open pid file ... Permission denied").
h2o_conf() { # PLAIN_PORT TLS_PORT
    cat >"$WORK/conf/h2o.conf" <<CONF
$([ "$(id -u)" = 0 ] && echo "user: root")
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
    local name=$1 pid
    port_free "$2" && port_free "$3" || die "port $2 or $3 is in use"
    case $name in
    shoal)
        nginx_like_conf shoal "$2" "$3"
        (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c conf/shoal.conf) >"$WORK/logs/shoal.out" 2>&1 &
        ;;
    shoal0)
        nginx_like_conf shoal0 "$2" "$3"
        (cd "$WORK" && exec "$SHOAL0" "${SHOAL_ARGS[@]}" -p "$WORK/" -c conf/shoal0.conf) >"$WORK/logs/shoal0.out" 2>&1 &
        ;;
    nginx)
        nginx_like_conf nginx "$2" "$3"
        (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/nginx.error.log" -c conf/nginx.conf) >"$WORK/logs/nginx.out" 2>&1 &
        ;;
    h2o)
        h2o_conf "$2" "$3"
        (cd "$WORK" && exec h2o -c conf/h2o.conf) >"$WORK/logs/h2o.out" 2>&1 &
        ;;
    *) die "unknown server $name" ;;
    esac
    pid=$!
    SPID[$name]=$pid PLAIN[$name]=$2 TLS[$name]=$3
    STARTED_PIDS+=("$pid")
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        curl -sk -o /dev/null --http2 "https://127.0.0.1:$3/" && break
        sleep 0.1
    done
    if ! curl -sfk -o /dev/null --http2 "https://127.0.0.1:$3/index.html" ||
        ! curl -sf -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$2/index.html"; then
        cat "$WORK/logs/$name.out" "$WORK/logs/$name.error.log" >&2 2>/dev/null || true
        die "$name does not answer h2 over TLS and h2c with prior knowledge (its output above)"
    fi
    log "started $name (pid $pid, h2c port $2, TLS port $3)"
}

n=0
for name in $SERVERS; do
    start "$name" $((BASE_PORT + n)) $((BASE_PORT + n + 1))
    n=$((n + 2))
done

printf 'server\tcase\tround\treq_s\tcpu_us\tsys_us\tnote\n' >"$WORK/raw.tsv"
# One h2load run; counted only when every request asked (-nN) was answered with a 2xx of the
# file's size over the protocol asked for.
measure() { # NAME CASE URL REQUESTS CLIENTS STREAMS
    local name=$1 case=$2 url=$3 asked=$4 want_proto=h2c
    local pid=${SPID[$name]} before after sys0 sys1 out reqs ok data rps cpu sys proto note=""
    before=$(tree_ticks "$pid")
    sys0=$(tree_ticks "$pid" sys)
    out=$(timeout -k 5 300 h2load -n"$asked" -c"$5" -m"$6" "$url" 2>&1) || note="h2load-exit-$?"
    after=$(tree_ticks "$pid")
    sys1=$(tree_ticks "$pid" sys)
    reqs=$(awk '/^requests:/ {print $8}' <<<"$out")
    ok=$(awk '/^status codes:/ {print $3}' <<<"$out")
    data=$(sed -n 's/^traffic:.*(\([0-9]*\)) data$/\1/p' <<<"$out")
    proto=$(awk '/^Application protocol:/ {print $3}' <<<"$out")
    rps=$(awk '/^finished in/ {print $4}' <<<"$out" | tr -d ',')
    [[ $url == https:* ]] && want_proto=h2
    if [ -z "$note" ] && [ "$proto" != "$want_proto" ]; then note="protocol=${proto:-none}"; fi
    if [ -z "$note" ] && [ "${reqs:-0}" != "$asked" ]; then note="served=${reqs:-0}/$asked"; fi
    if [ -z "$note" ] && [ "$ok" != "$reqs" ]; then note="2xx=$ok/$reqs"; fi
    if [ -z "$note" ] && [ "$data" != $((reqs * SIZE[${case%%-*}])) ]; then note="body-bytes=$data"; fi
    if [ -n "$note" ]; then
        rps=nan cpu=nan sys=nan
        printf '%s\n' "$out" >"$WORK/logs/h2load.$name.$case.$round.out"
    else
        cpu=$(awk -v b="$before" -v a="$after" -v hz="$HZ" -v n="$reqs" 'BEGIN { printf "%.2f", (a - b) / hz * 1e6 / n }')
        sys=$(awk -v b="$sys0" -v a="$sys1" -v hz="$HZ" -v n="$reqs" 'BEGIN { printf "%.2f", (a - b) / hz * 1e6 / n }')
    fi
    kill -0 "$pid" 2>/dev/null || note="${note:+$note,}dead"
    log "round $round $name $case: $rps req/s, $cpu us CPU/req ($sys us kernel)${note:+ [$note]}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$case" "$round" "$rps" "$cpu" "$sys" "$note" >>"$WORK/raw.tsv"
}
for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        for case in $CASES; do
            case $case in
            page-h2c) measure "$name" page-h2c "http://127.0.0.1:${PLAIN[$name]}/index.html" "$REQUESTS" "$CLIENTS" "$STREAMS" ;;
            page-tls) measure "$name" page-tls "https://127.0.0.1:${TLS[$name]}/index.html" "$REQUESTS" "$CLIENTS" "$STREAMS" ;;
            1m-h2c) measure "$name" 1m-h2c "http://127.0.0.1:${PLAIN[$name]}/1m.bin" "$FILE_REQUESTS" 1 1 ;;
            1m-tls) measure "$name" 1m-tls "https://127.0.0.1:${TLS[$name]}/1m.bin" "$FILE_REQUESTS" 1 1 ;;
            *) die "unknown case $case" ;;
            esac
        done
    done
done
echo
echo "## HTTP/2, h2load -c$CLIENTS -m$STREAMS (page), -c1 -m1 (1m), medians of $ROUNDS rounds ($(date -u '+%F %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
# Medians per server and case; ratios against nginx and h2o in the same case (CPU per request,
# and responses/s for the 1 MiB cases, where throughput is the target).
awk -F'\t' 'NR > 1 { k = $1 "\t" $2; seen[k] = 1; if ($7 != "") { bad[k] = bad[k] " r" $3 ":" $7; next }
        cpu[k] = cpu[k] " " $5; rps[k] = rps[k] " " $4; sys[k] = sys[k] " " $6; usr[k] = usr[k] " " ($5 - $6) }
    function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
    function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
    END {
        for (k in cpu) { mc[k] = med(cpu[k]); mr[k] = med(rps[k]) }
        printf "%-10s %-8s %10s %10s %7s %7s %9s %9s %9s %9s  %s\n", "case", "server", "req/s", "CPU us/req", "user", "kernel", "cpu/nginx", "cpu/h2o", "rps/nginx", "rps/h2o", "notes"
        for (k in seen) { split(k, p, "\t"); n = "nginx\t" p[2]; h = "h2o\t" p[2]
            if (!(k in mc)) { printf "%-10s %-8s %10s %10s %7s %7s %9s %9s %9s %9s  %s\n", p[2], p[1], "-", "-", "-", "-", "-", "-", "-", "-", bad[k]; continue }
            printf "%-10s %-8s %10.0f %10.2f %7.2f %7.2f %9s %9s %9s %9s  %s\n", p[2], p[1], mr[k], mc[k], med(usr[k]), med(sys[k]),
                ratio(mc[k], mc[n]), ratio(mc[k], mc[h]), ratio(mr[k], mr[n]), ratio(mr[k], mr[h]), bad[k] } }' "$WORK/raw.tsv" |
    { IFS= read -r header; echo "$header"; sort -k1,1 -k2,2; }
echo "(every round: $WORK/raw.tsv$([ -n "${KEEP:-}" ] || echo ', removed at exit: KEEP=1 keeps it'))"
