#!/usr/bin/env bash
# shoal vs nginx in front of PHP-FPM (Debian's php-fpm, a "hello" script), same nginx.conf for
# both, wrk, interleaved rounds, medians (issue #23's performance lines).
#
#   bench/fastcgi.sh                          # ROUNDS=3 DURATION=10s
#   ROUNDS=1 DURATION=1s bench/fastcgi.sh     # a quick check that it runs
#
# Two tables:
#   keepalive  upstream php { server 127.0.0.1:FPM; keepalive 8; keepalive_timeout 2s; } with
#              fastcgi_keep_conn on: every request goes to PHP-FPM on a reused connection.
#              A PHP-FPM child serves one connection until it closes, so FPM_CHILDREN must exceed
#              the connections kept (CONNS per server); idle ones close 2 s after a server's run,
#              and each run waits that long before it starts.
#   cache      the same location with fastcgi_cache (fastcgi_cache_key $uri, 200 valid 1h),
#              primed before the load: every request is a HIT, PHP-FPM idle (compare with
#              bench/seed004.sh's proxy_cache HIT).
# Both: worker_processes 1, access_log off. Reported: req/s, latency, the proxy's CPU per request
# (the main figure; its process tree), PHP-FPM's CPU per request (upCPUus), ratios vs nginx.
# Before every run the server is asked once; a wrong status or body is marked BAD in notes and
# that run is not measured.
#
# Environment: ROUNDS (3), DURATION (10s), CONNS (8), WRK_THREADS (1), BASE_PORT (19380),
# FPM_CHILDREN (24), SKIP_CACHE=1, SKIP_KA=1, SHOAL / SHOAL_REV / CARGO_TARGET_DIR as in seed001.sh,
# SHOAL0 (a second shoal binary, rows shoal0-ka and shoal0-cache), KEEP=1. Every server listens
# on 127.0.0.1 only; everything started here is stopped by PID at exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-8}
WRK_THREADS=${WRK_THREADS:-1}
BASE_PORT=${BASE_PORT:-19380}
FPM_CHILDREN=${FPM_CHILDREN:-24}
HELLO_BODY='Hello, world!'

FPM=$(ls /usr/sbin/php-fpm* 2>/dev/null | sort | tail -1)
[ -n "$FPM" ] || die "php-fpm is not installed (apt-get install php-fpm)"

build_shoal
make_prefix
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

p=$BASE_PORT
fpm_port=$((p + 9))
port_free "$fpm_port" || die "port $fpm_port is in use"
mkdir -p "$WORK/php" "$WORK/cache"
printf '<?php echo "%s";\n' "$HELLO_BODY" >"$WORK/php/hello.php"
cat >"$WORK/conf/php-fpm.conf" <<CONF
[global]
pid = $WORK/logs/php-fpm.pid
error_log = $WORK/logs/php-fpm.log
daemonize = no
[bench]
listen = 127.0.0.1:$fpm_port
pm = static
pm.max_children = $FPM_CHILDREN
pm.max_requests = 0
$( [ "$(id -u)" = 0 ] && printf 'user = nobody\ngroup = nogroup\n' )
CONF
chmod 755 "$WORK" "$WORK/php"; chmod 644 "$WORK/php/hello.php"
"$FPM" --nodaemonize --fpm-config "$WORK/conf/php-fpm.conf" $( [ "$(id -u)" = 0 ] && echo -R ) \
    >"$WORK/logs/php-fpm.out" 2>&1 &
FPM_PID=$!
STARTED_PIDS+=("$FPM_PID")
for _ in $(seq 50); do port_free "$fpm_port" || break; sleep 0.1; done
log "started php-fpm (pid $FPM_PID, port $fpm_port, $FPM_CHILDREN children)"

# usage: write_fcgi_conf NAME PORT MODE(keepalive|cache)
write_fcgi_conf() {
    local name=$1 port=$2 mode=$3 cache_http="" cache_loc=""
    if [ "$mode" = cache ]; then
        cache_http="    fastcgi_cache_path cache/$name keys_zone=$name:10m;"
        cache_loc="            fastcgi_cache $name;
            fastcgi_cache_key \$uri;
            fastcgi_cache_valid 200 1h;"
    fi
    cat >"$WORK/conf/$name.conf" <<CONF
# bench/fastcgi.sh ($mode): the same file for nginx and shoal.
worker_processes 1;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;

events {
    worker_connections 10240;
}

http {
    access_log off;
$cache_http
    upstream php {
        server 127.0.0.1:$fpm_port;
        keepalive $CONNS;
        keepalive_timeout 2s;
    }

    server {
        listen 127.0.0.1:$port;
        location / {
            fastcgi_param SCRIPT_FILENAME $WORK/php/hello.php;
            fastcgi_param REQUEST_METHOD \$request_method;
            fastcgi_param QUERY_STRING \$query_string;
            fastcgi_keep_conn on;
            fastcgi_pass php;
$cache_loc
        }
    }
}
CONF
}

SERVERS=()
# usage: add_servers NAME(ka|cache) MODE NGINX_PORT SHOAL_PORT SHOAL0_PORT (the last: with SHOAL0)
add_servers() {
    local name=$1 mode=$2
    SERVERS+=("nginx-$name" "shoal-$name")
    write_fcgi_conf "nginx-$name" "$3" "$mode"
    write_fcgi_conf "shoal-$name" "$4" "$mode"
    start_conf "nginx-$name" nginx "$3"
    start_conf "shoal-$name" shoal "$4"
    if [ -n "${SHOAL0:-}" ]; then
        SERVERS+=("shoal0-$name")
        write_fcgi_conf "shoal0-$name" "$5" "$mode"
        start_conf "shoal0-$name" shoal0 "$5"
    fi
}
[ "$FPM_CHILDREN" -gt $((2 * CONNS + 4)) ] || log "warning: FPM_CHILDREN=$FPM_CHILDREN may be too few for CONNS=$CONNS kept connections" 
[ -n "${SKIP_KA:-}" ] || add_servers ka keepalive $((p + 0)) $((p + 1)) $((p + 4))
[ -n "${SKIP_CACHE:-}" ] || add_servers cache cache $((p + 2)) $((p + 3)) $((p + 5))

{
    echo "# fastcgi — $(date -u '+%Y-%m-%d %H:%M UTC')"
    machine_info
    echo "upstream: $FPM, $FPM_CHILDREN children (pm static), hello.php ($HELLO_BODY)"
    echo "servers at start:"; server_state "${SERVERS[@]}"
    echo "command: ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS FPM_CHILDREN=$FPM_CHILDREN${SKIP_KA:+ SKIP_KA=1}${SKIP_CACHE:+ SKIP_CACHE=1} bench/fastcgi.sh"
} | tee "$WORK/results/header.txt" >&2

export UPSTREAM_PID=$FPM_PID
for round in $(seq "$ROUNDS"); do
    for s in "${SERVERS[@]}"; do
        case $s in *-ka) test=keepalive ;; *) test=cache ;; esac
        # The previous server's idle connections to PHP-FPM close first (keepalive_timeout).
        sleep 2.5
        run_checked /hello 200 "$HELLO_BODY" -- "$test" "$s" "$WRK_THREADS" "$CONNS" "$round"
    done
done
unset UPSTREAM_PID

echo
cat "$WORK/results/header.txt"
echo
if [ -z "${SKIP_KA:-}" ]; then
    echo "## fastcgi_pass to upstream keepalive $CONNS with fastcgi_keep_conn on, wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency, medians of $ROUNDS interleaved rounds"
    echo "## CPUus/req: the proxy's process tree; upCPUus: PHP-FPM's; cpu/base, rps/base: vs nginx-ka"
    summarize keepalive nginx-ka
    echo
fi
if [ -z "${SKIP_CACHE:-}" ]; then
    echo "## fastcgi_cache HIT (primed by the check before each run)"
    summarize cache nginx-cache
fi
echo
echo "## directives a server did not implement (its numbers are not comparable)"
report_unimplemented
echo
echo "## server logs (anything besides the expected warnings)"
report_logs
echo "(raw results: $WORK/results/raw.tsv${KEEP:+, kept}; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
