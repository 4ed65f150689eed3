#!/usr/bin/env bash
# Seed 004 on this machine: the Flask API (bench/seed004/app.py) under gunicorn (sync workers) on
# a unix socket, behind nginx and behind shoal with the same nginx.conf, measured with wrk,
# interleaved rounds, medians. The steps of the article's ladder that need no cache:
#
#   (a) default   a stock Debian-like nginx.conf (worker_processes auto, worker_connections 768,
#                 access_log to a file, gzip on) with a typical `location / { proxy_pass
#                 http://unix:.../api.sock; }`            seed: 1,663 req/s
#   (b) tuned     the seed's knobs on top: worker_connections 1024, access_log off,
#                 keepalive_timeout 15, gzip_vary/proxied/comp_level/buffers/http_version/
#                 min_length/types                         seed: 2,141 req/s
#   (c) cache-disk          (b) + the seed's proxy cache (keys_zone=my_zone:10m inactive=1d,
#                           its key, proxy_cache_valid and X-Cache-Status)  seed: 31,625 req/s
#   (d) cache-tmpfs         the same cache on tmpfs (/dev/shm)               seed: 39,387 req/s
#   (e) cache-tmpfs-logbuf  + access_log ... buffer=256k flush=10s           seed: 50,413 req/s
#   After the check request every request of (c)-(e) is a HIT: their CPUus/req is the hit path's.
#
#   bench/seed004.sh                               # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=3s SHOAL=/path/to/shoal bench/seed004.sh
#   ROUNDS=2 DURATION=5s STEPS="cache-disk cache-tmpfs cache-tmpfs-logbuf" bench/seed004.sh
#
# Reported per server: req/s and latency (gunicorn is the bottleneck: 5 sync workers on 2 cores,
# so req/s says little about the proxy), the proxy's CPU per request (its process tree; the main
# figure) and gunicorn's (upCPUus: master and workers). Before every run the proxy is asked once;
# a wrong status or body is marked BAD in notes and that run is not measured.
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (200, as the seed's wrk -c200), WRK_THREADS (1),
# BASE_PORT (19380), GUNICORN_WORKERS (5, as the seed), ACCEPT_GZIP=1 (wrk sends
# Accept-Encoding: gzip; the seed's wrk did not), SHOAL_VENV (bench/seed004/setup.sh's venv),
# SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in seed001.sh, KEEP=1.
# Every server listens on 127.0.0.1 only; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-200}
WRK_THREADS=${WRK_THREADS:-1}
BASE_PORT=${BASE_PORT:-19380}
GUNICORN_WORKERS=${GUNICORN_WORKERS:-5}
API_PATH=/resource
# In every answer of app.py (its MARKER): tells the API's JSON from a file or an error page.
API_MARKER='"service":"seed004-api"'
WRK_EXTRA=()
[ -n "${ACCEPT_GZIP:-}" ] && WRK_EXTRA=(-H 'Accept-Encoding: gzip')

VENV=$("$BENCH_DIR/seed004/setup.sh" | tail -1)
build_shoal
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
SOCK=$WORK/api.sock
# (d), (e): the cache on tmpfs (/dev/shm: no mount needed), removed at exit.
SHM=/dev/shm/shoal-seed004-$$
mkdir -p "$SHM"
trap 'stop_all; rm -rf "$SHM"; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT

# usage: write_seed004_conf NAME PORT STEP(default|tuned)
write_seed004_conf() {
    local name=$1 port=$2 step=$3 events http
    case $step in
        default)
            events="    worker_connections 768;"
            http="    access_log logs/$name.access.log;
    gzip on;"
            ;;
        tuned)
            # The seed's list, as it gives it (worker_processes auto is already the default here).
            events="    worker_connections 1024;"
            http="    access_log off;
    keepalive_timeout 15;

    gzip on;
    gzip_vary on;
    gzip_proxied any;
    gzip_comp_level 2;
    gzip_buffers 16 8k;
    gzip_http_version 1.1;
    gzip_min_length 256;
    gzip_types text/plain text/css application/json application/x-javascript text/xml application/xml application/xml+rss text/javascript;"
            ;;
        # (c)-(e): the tuned step plus the seed's cache (and, in (e), its buffered access log).
        cache-disk | cache-tmpfs | cache-tmpfs-logbuf)
            write_seed004_conf "$name" "$port" tuned
            local dir=$WORK/cache-$name log="access_log off;"
            [ "$step" = cache-disk ] || dir=$SHM/cache-$name
            [ "$step" = cache-tmpfs-logbuf ] &&
                log="access_log logs/$name.access.log combined buffer=256k flush=10s;"
            sed -i -e "s|^    access_log off;|    $log\n    proxy_cache_path $dir keys_zone=my_zone:10m inactive=1d;|" \
                -e 's|^            proxy_set_header X-Real-IP \$remote_addr;|&\
            proxy_cache my_zone;\
            proxy_cache_key "$host$request_uri$http_authorization";\
            proxy_cache_valid 404 302 1m;\
            proxy_cache_valid 200 1d;\
            add_header X-Cache-Status $upstream_cache_status;|' \
                -e "s|^# bench/seed004.sh step \"tuned\"|# bench/seed004.sh step \"$step\"|" \
                "$WORK/conf/$name.conf"
            return
            ;;
        *) die "unknown step $step" ;;
    esac
    cat >"$WORK/conf/$name.conf" <<CONF
# bench/seed004.sh step "$step": the same file for nginx and shoal.
worker_processes auto;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;

events {
$events
}

http {
    sendfile on;
    tcp_nopush on;
    include mime.types;
    default_type application/octet-stream;

$http

    server {
        listen 127.0.0.1:$port;
        server_name api.endpoint;

        location / {
            proxy_pass http://unix:$SOCK;
            proxy_set_header Host \$host;
            proxy_set_header X-Real-IP \$remote_addr;
        }
    }
}
CONF
}

# gunicorn as the seed runs it under supervisor (`gunicorn api:app --workers=5
# --worker-class=meinheld.gmeinheld.MeinheldWorker --bind=unix:api.sock`), with gunicorn's own
# sync worker instead of meinheld (unmaintained; does not build on current Pythons).
(cd "$WORK" && exec "$VENV/bin/gunicorn" --chdir "$BENCH_DIR/seed004" app:app \
    --workers="$GUNICORN_WORKERS" --worker-class=sync --bind="unix:$SOCK" \
    --pid "$WORK/logs/gunicorn.pid" --error-logfile "$WORK/logs/gunicorn.log") >"$WORK/logs/gunicorn.out" 2>&1 &
GUNICORN_PID=$!
STARTED_PIDS+=("$GUNICORN_PID")
PID[gunicorn]=$GUNICORN_PID
for _ in $(seq 100); do
    kill -0 "$GUNICORN_PID" 2>/dev/null || { cat "$WORK/logs/gunicorn.log" >&2; die "gunicorn exited at start"; }
    curl -s -o "$WORK/logs/gunicorn.check" --unix-socket "$SOCK" "http://api.endpoint$API_PATH" 2>/dev/null && break
    sleep 0.1
done
grep -qF "$API_MARKER" "$WORK/logs/gunicorn.check" || die "gunicorn did not answer $API_PATH with the API's JSON"
log "started gunicorn (pid $GUNICORN_PID, $GUNICORN_WORKERS sync workers, $SOCK)"

p=$BASE_PORT
# STEPS picks steps of the ladder (default: all of them).
SERVERS=()
for step in ${STEPS:-default tuned cache-disk cache-tmpfs cache-tmpfs-logbuf}; do
    SERVERS+=("nginx-$step" "shoal-$step")
done
i=0
for s in "${SERVERS[@]}"; do
    write_seed004_conf "$s" $((p + i)) "${s#*-}"
    start_conf "$s" "${s%%-*}" $((p + i))
    i=$((i + 1))
done

{
    echo "# seed 004 — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "upstream: $("$VENV/bin/gunicorn" --version 2>&1 | head -1), $GUNICORN_WORKERS sync workers, $("$VENV/bin/python" --version), flask $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("flask"))')"
    echo "servers at start:"; server_state "${SERVERS[@]}" gunicorn
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS${ACCEPT_GZIP:+ ACCEPT_GZIP=1}${STEPS:+ STEPS=\"$STEPS\"} bench/seed004.sh"
} | tee "$WORK/results/header.txt" >&2

export UPSTREAM_PID=$GUNICORN_PID
for round in $(seq "$ROUNDS"); do
    for t in $WRK_THREADS; do
        for s in "${SERVERS[@]}"; do
            run_checked "$API_PATH" 200 "$API_MARKER" -- "${s#*-}" "$s" "$t" "$CONNS" "$round" \
                ${WRK_EXTRA[@]+"${WRK_EXTRA[@]}"}
        done
    done
done
unset UPSTREAM_PID

echo
cat "$WORK/results/header.txt"
echo
echo "## wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency $API_PATH, medians of $ROUNDS interleaved rounds"
echo "## CPUus/req: the proxy's process tree; upCPUus: gunicorn's (master + workers); ratios vs nginx at the same step"
declare -A TITLE=(
    [default]="(a) default (seed: 1,663 req/s)"
    [tuned]="(b) tuned: worker_connections 1024, access_log off, keepalive_timeout 15, gzip_* (seed: 2,141 req/s)"
    [cache-disk]="(c) + proxy cache on disk, every request after the first a HIT (seed: 31,625 req/s)"
    [cache-tmpfs]="(d) the cache on tmpfs (seed: 39,387 req/s)"
    [cache-tmpfs-logbuf]="(e) + access_log buffer=256k flush=10s (seed: 50,413 req/s)"
)
for step in ${STEPS:-default tuned cache-disk cache-tmpfs cache-tmpfs-logbuf}; do
    echo "## ${TITLE[$step]}"
    summarize "$step" "nginx-$step"
done
echo
echo "## servers after the load (threads, RSS, open fds; compare with the start above)"
sleep 1
server_state "${SERVERS[@]}" gunicorn
echo
echo "## directives a server did not implement (its numbers are not comparable)"
report_unimplemented
echo
echo "## server logs (anything besides the expected warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
