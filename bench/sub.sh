#!/usr/bin/env bash
# sub_filter: shoal and nginx side by side on the same nginx.conf, a 100 KB HTML page
# (generated) served as it is (/plain/), with links rewritten everywhere (/links/:
# `sub_filter http://backend.local/ https://example.com/; sub_filter_once off`, ~500 matches)
# and with a snippet injected once (/inject/: `sub_filter </head> '<script ...></head>'`);
# server CPU per request (utime+stime of the server's process tree / requests), req/s,
# interleaved rounds, medians.
#
#   bench/sub.sh                      # ROUNDS=3 DURATION=10s CONNS=50
#   SHOAL=/path/to/shoal bench/sub.sh # a prebuilt binary (else SHOAL_REV=HEAD is built)
#
# Listens on 127.0.0.1 only; stops what it started by PID.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10s} CONNS=${CONNS:-50} BASE_PORT=${BASE_PORT:-19390}
HZ=$(getconf CLK_TCK)
STARTED_PIDS=()
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"
trap stop_all EXIT

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

WORK=$(mktemp -d /tmp/shoal-sub.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/conf" "$WORK/logs"
python3 - "$WORK/html/page.html" <<'PY'
import sys, random
random.seed(4)
words = "shoal nginx worker thread pool cache proxy gzip header request response location server".split()
parts = ["<!DOCTYPE html>\n<html><head><title>A 100 KB page</title></head><body>\n"]
size = sum(map(len, parts))
i = 0
while size < 100 * 1024:
    p = "<p id=\"p%d\">%s <a href=\"http://backend.local/p/%d\">next</a></p>\n" % (
        i, " ".join(random.choice(words) for _ in range(30)), i)
    parts.append(p); size += len(p); i += 1
parts.append("</body></html>\n")
open(sys.argv[1], "w").write("".join(parts))
PY
chmod -R a+rX "$WORK"

conf() { # NAME PORT
    cat >"$WORK/conf/$1.conf" <<CONF
worker_processes 1;
daemon off;
pid logs/$1.pid;
error_log logs/$1.error.log warn;
events { worker_connections 1024; }
http {
    types { text/html html; }
    default_type application/octet-stream;
    access_log off;
    keepalive_timeout 15;
    server {
        listen 127.0.0.1:$2;
        location /plain/ { alias $WORK/html/; }
        location /links/ { alias $WORK/html/; sub_filter http://backend.local/ https://example.com/; sub_filter_once off; }
        location /inject/ { alias $WORK/html/; sub_filter </head> '<script src="/a.js"></script></head>'; }
    }
}
CONF
}

declare -A SPID SPORT
start() { # NAME KIND PORT
    conf "$1" "$3"
    if [ "$2" = shoal ]; then
        (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$1.conf") >"$WORK/logs/$1.out" 2>&1 &
    else
        (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$1.error.log" -c "conf/$1.conf") >"$WORK/logs/$1.out" 2>&1 &
    fi
    SPID[$1]=$! SPORT[$1]=$3
    STARTED_PIDS+=("$!")
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$3/plain/page.html" && break; sleep 0.1; done
    # (The bodies are read whole first: `grep -q` stopping early would fail curl's pipe.)
    local body
    body=$(curl -s "http://127.0.0.1:$3/links/page.html")
    grep -q 'https://example.com/p/7"' <<<"$body" || die "$1 does not rewrite /links/"
    body=$(curl -s "http://127.0.0.1:$3/inject/page.html")
    grep -q '<script src="/a.js"></script></head>' <<<"$body" || die "$1 does not inject /inject/"
}

start shoal shoal "$BASE_PORT"
start nginx nginx $((BASE_PORT + 1))
NAMES="nginx shoal"
printf 'server\tpath\tround\treq_s\tcpu_us\n' >"$WORK/raw.tsv"
for round in $(seq "$ROUNDS"); do
    for path in plain links inject; do
        for name in $NAMES; do
            pid=${SPID[$name]} port=${SPORT[$name]}
            before=$(tree_ticks "$pid")
            out=$(timeout -k 5 60 wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$port/$path/page.html")
            after=$(tree_ticks "$pid")
            reqs=$(awk '/requests in/ {print $1}' <<<"$out")
            rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
            cpu=$(awk -v b="$before" -v a="$after" -v hz="$HZ" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
            log "round $round $name $path: $rps req/s, $cpu us CPU/req"
            printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$path" "$round" "$rps" "$cpu" >>"$WORK/raw.tsv"
        done
    done
done
echo
echo "## sub_filter on a 100 KB page, wrk -t1 -c$CONNS -d$DURATION, medians of $ROUNDS rounds ($(date -u +%F))"
awk -F'\t' 'NR > 1 { k = $1 "\t" $2; cpu[k] = cpu[k] " " $5; rps[k] = rps[k] " " $4 }
    function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
    END { printf "%-10s %-10s %10s %10s\n", "server", "path", "req/s", "CPU us/req"
          for (k in cpu) { split(k, p, "\t"); m[p[2]] = 1; srv[p[1]] = 1; c[k] = med(cpu[k]); r[k] = med(rps[k]); printf "%-10s %-10s %10.0f %10.2f\n", p[1], p[2], r[k], c[k] }
          for (f in m) for (s in srv) if (s != "nginx") printf "%s/nginx CPU per request, %s: %.2f\n", s, f, c[s "\t" f] / c["nginx\t" f] }' "$WORK/raw.tsv"
