# shellcheck shell=bash
# Shared helpers for bench/seed001.sh and bench/seed002.sh: building, starting the servers in a
# temporary prefix, measuring server CPU per request, parsing wrk, medians. Sourced, not run.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
HZ=$(getconf CLK_TCK)
STARTED_PIDS=()

# As root, shoal without `user` is nginx's two processes: a root master and a child serving as
# nginx's default `nobody`. The benchmarks measure one process (its pid: strace, callgrind, RSS)
# and let it write in the prefix, so shoal is told `user root` (one process, root, as before).
SHOAL_ARGS=()
[ "$(id -u)" = 0 ] && SHOAL_ARGS=(-g "user root;")

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Builds shoal (build_shoal) and the canned server (build_all does both). shoal: SHOAL=path uses
# that binary; PGO=1 builds bench/pgo.sh's profile-optimized binary of the checkout; SHOAL_REV=rev
# builds a clean snapshot of that commit (git archive, so half-edited files in the checkout do not
# count); otherwise the checkout is built as it is.
build_shoal() {
    if [ -n "${SHOAL:-}" ]; then
        SHOAL_DESC="$SHOAL (prebuilt)"
    elif [ "${PGO:-0}" = 1 ]; then
        log "building a profile-optimized shoal (bench/pgo.sh) from the checkout"
        SHOAL=$("$BENCH_DIR/pgo.sh" | tail -1) || die "bench/pgo.sh failed"
        SHOAL_DESC="checkout at $(cd "$REPO" && git rev-parse --short HEAD), $(cat "$(dirname "$SHOAL")/shoal.desc") (bench/pgo.sh)"
    elif [ -n "${SHOAL_REV:-}" ]; then
        local rev src
        rev=$(cd "$REPO" && git rev-parse --short "$SHOAL_REV") || die "unknown revision $SHOAL_REV"
        src=$(mktemp -d /tmp/shoal-src.XXXXXX)
        (cd "$REPO" && git archive "$rev") | tar -x -C "$src"
        log "building shoal $rev (release) from a snapshot in $src, CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
        (cd "$src" && cargo build --release) >&2 || die "shoal build failed"
        rm -rf "$src"
        SHOAL=$CARGO_TARGET_DIR/release/shoal
        SHOAL_DESC="commit $rev (clean snapshot)"
    else
        log "building shoal (release) in $REPO, CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
        (cd "$REPO" && cargo build --release) >&2 || die "shoal build failed"
        SHOAL=$CARGO_TARGET_DIR/release/shoal
        SHOAL_DESC="checkout at $(cd "$REPO" && git rev-parse --short HEAD)$(cd "$REPO" && git diff --quiet HEAD -- . ':!bench' || echo ' + uncommitted changes')"
    fi
    [ -x "$SHOAL" ] || die "no shoal binary at $SHOAL"
}

build_canned() {
    log "building bench/canned"
    cargo build --release --manifest-path "$BENCH_DIR/canned/Cargo.toml" >&2 || die "canned build failed"
    CANNED=$CARGO_TARGET_DIR/release/canned
}

# The hello-world upstream of the proxy benchmarks (bench/hello).
build_hello() {
    log "building bench/hello"
    cargo build --release --manifest-path "$BENCH_DIR/hello/Cargo.toml" >&2 || die "hello build failed"
    HELLO=$CARGO_TARGET_DIR/release/hello
}

build_all() {
    build_shoal
    build_canned
}

# A prefix directory readable by nginx's unprivileged workers, holding html/ and conf/.
make_prefix() {
    WORK=$(mktemp -d /tmp/shoal-bench.XXXXXX)
    chmod 755 "$WORK"
    mkdir -p "$WORK/html" "$WORK/conf" "$WORK/logs" "$WORK/results"
    cp "$REPO/html/index.html" "$WORK/html/"
    cp "$REPO/tests/confs/mime.types" "$WORK/conf/"
    chmod -R a+rX "$WORK"
    [ "$(wc -c <"$WORK/html/index.html")" -eq 612 ] || log "warning: html/index.html is not 612 bytes"
}

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

# nginx.conf for nginx and shoal alike: seed 001's tuned configuration with the port, worker
# count and reuseport changed, daemon off, and paths inside the prefix.
# usage: write_nginx_conf FILE PORT WORKERS REUSEPORT(0|1) NAME [EXTRA_EVENTS]
write_nginx_conf() {
    local file=$1 port=$2 workers=$3 rp=$4 name=$5 extra_events=${6:-}
    local listen="127.0.0.1:$port"
    [ "$rp" = 1 ] && listen="$listen reuseport"
    cat >"$file" <<CONF
# seed 001's tuned configuration (tests/confs/seed001-tuned.conf), for the benchmark:
# port, worker count, reuseport, pid and log paths changed; daemon off.
worker_processes $workers;
daemon off;
pid logs/$name.pid;
error_log logs/$name.error.log;

events {
    worker_connections  10240;
    accept_mutex_delay 100ms;
$extra_events
}

http {
    include       mime.types;
    default_type  application/octet-stream;

    access_log off;

    sendfile on;
    open_file_cache max=100 inactive=20s;
    tcp_nopush on;

    keepalive_timeout  65;

    server {
        listen       $listen;
        server_name  localhost;
        location / {
            root   html;
            index  index.html index.htm;
        }
    }
}
CONF
}

write_h2o_conf() {
    local file=$1 port=$2 threads=$3 name=$4
    cat >"$file" <<CONF
# h2o for the benchmark: $threads thread(s), static files from the prefix, no access log.
user: root
num-threads: $threads
pid-file: $WORK/logs/$name.pid
error-log: $WORK/logs/$name.error.log
listen:
  host: 127.0.0.1
  port: $port
hosts:
  default:
    paths:
      /:
        file.dir: $WORK/html
CONF
}

# Starts a server configuration; sets PID[name] and PORT[name].
# usage: start_server NAME KIND PORT [ARGS...]
#   KIND shoal|shoal0|nginx: ARGS = WORKERS REUSEPORT [EXTRA_EVENTS]; h2o: THREADS; canned: none
#   (shoal0: the binary $SHOAL0, a second build in the same run)
declare -A PID PORT KIND
start_server() {
    local name=$1 kind=$2 port=$3; shift 3
    port_free "$port" || die "port $port is in use"
    local out=$WORK/logs/$name.out
    case $kind in
        shoal | shoal0)
            local bin=$SHOAL
            [ "$kind" = shoal0 ] && bin=$SHOAL0
            write_nginx_conf "$WORK/conf/$name.conf" "$port" "$1" "$2" "$name" "${3:-}"
            (cd "$WORK" && exec "$bin" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$out" 2>&1 &
            ;;
        nginx)
            write_nginx_conf "$WORK/conf/$name.conf" "$port" "$1" "$2" "$name" "${3:-}"
            (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf") >"$out" 2>&1 &
            ;;
        h2o)
            write_h2o_conf "$WORK/conf/$name.yaml" "$port" "$1" "$name"
            (cd "$WORK" && exec h2o -c "conf/$name.yaml") >"$out" 2>&1 &
            ;;
        canned)
            (cd "$WORK" && exec "$CANNED" "$port") >"$out" 2>&1 &
            ;;
        *) die "unknown server kind $kind" ;;
    esac
    local pid=$!
    STARTED_PIDS+=("$pid")
    PID[$name]=$pid PORT[$name]=$port KIND[$name]=$kind
    local i
    for i in $(seq 50); do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$out" >&2
            die "$name exited at start"
        fi
        if curl -s -o "$WORK/logs/$name.check" "http://127.0.0.1:$port/" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    local size
    size=$(wc -c <"$WORK/logs/$name.check" 2>/dev/null || echo 0)
    [ "$size" -eq 612 ] || die "$name answered $size bytes, not 612"
    log "started $name (pid $pid, port $port)"
}

# Stops what this script started, by PID, and waits for it.
stop_all() {
    local pid
    for pid in "${STARTED_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${STARTED_PIDS[@]}"; do
        local i
        for i in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    STARTED_PIDS=()
}

# CPU clock ticks (utime + stime, all threads) of a process and all its descendants; with
# a second argument `sys`, only the kernel's share (stime).
tree_ticks() {
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$1" -v only_sys="${2:-}" '
        {
            pid = $1
            rest = $0; sub(/^.*\) /, "", rest); n = split(rest, f, " ")
            ppid[pid] = f[2]; ticks[pid] = (only_sys == "sys") ? f[13] : f[12] + f[13]
        }
        END {
            inset[root] = 1; changed = 1
            while (changed) {
                changed = 0
                for (p in ppid) if (!(p in inset) && (ppid[p] in inset)) { inset[p] = 1; changed = 1 }
            }
            total = 0
            for (p in inset) total += ticks[p]
            print total
        }'
}

# Latency in wrk's units (us, ms, s) to milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else printf "nan" }'
}

# Runs wrk against a started server and appends one result line to $WORK/results/raw.tsv:
#   test name wrk_threads round reqs req_s p50_ms p99_ms mean_ms stdev_ms cpu_us_per_req errors non2xx
#   upstream_cpu_us_per_req sys_us_per_req (the kernel's part of cpu_us_per_req)
# usage: run_wrk TEST NAME THREADS CONNS ROUND [extra wrk options...]
# (arguments for a wrk script, which go after the URL, in the array WRK_SCRIPT_ARGS; the path
# asked for in WRK_PATH, default /; SCHEME=https for a TLS server; with UPSTREAM_PID set, the CPU of that process tree (a proxy's
# upstream) per request is recorded too, else "-")
run_wrk() {
    local test=$1 name=$2 threads=$3 conns=$4 round=$5; shift 5
    local pid=${PID[$name]} port=${PORT[$name]}
    if ! kill -0 "$pid" 2>/dev/null; then
        log "warning: $name (pid $pid) is gone; skipping"
        printf '%s\t%s\t%s\t%s\tDEAD\n' "$test" "$name" "$threads" "$round" >>"$WORK/results/raw.tsv"
        return
    fi
    local out=$WORK/results/$test.$name.t$threads.r$round.wrk
    local before after up_before=0 up_after=0 sys_before sys_after
    sys_before=$(tree_ticks "$pid" sys)
    before=$(tree_ticks "$pid")
    [ -n "${UPSTREAM_PID:-}" ] && up_before=$(tree_ticks "$UPSTREAM_PID")
    timeout -k 5 $(( ${DURATION%s} + 30 )) wrk -t"$threads" -c"$conns" -d"$DURATION" --latency "$@" \
        "${SCHEME:-http}://127.0.0.1:$port${WRK_PATH:-/}" ${WRK_SCRIPT_ARGS[@]+"${WRK_SCRIPT_ARGS[@]}"} >"$out" 2>&1 || log "warning: wrk exited with $? for $name"
    after=$(tree_ticks "$pid")
    sys_after=$(tree_ticks "$pid" sys)
    [ -n "${UPSTREAM_PID:-}" ] && up_after=$(tree_ticks "$UPSTREAM_PID")
    if ! kill -0 "$pid" 2>/dev/null; then
        log "warning: $name (pid $pid) died during the run"
    fi
    local reqs rps p50 p99 mean stdev errors non2xx
    reqs=$(awk '/requests in/ {print $1}' "$out")
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")
    # Under pipelining wrk sometimes prints 0.00us for the high percentiles: no value, not zero.
    [ "$p99" = "0.000" ] && p99=nan
    mean=$(to_ms "$(awk '$1 == "Latency" && NF >= 4 {print $2; exit}' "$out")")
    stdev=$(to_ms "$(awk '$1 == "Latency" && NF >= 4 {print $3; exit}' "$out")")
    errors=$(awk '/Socket errors:/ {gsub(/,/, ""); print "connect=" $4 ",read=" $6 ",write=" $8 ",timeout=" $10}' "$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' "$out")
    local cpu sys up_cpu=-
    cpu=$(awk -v b="$before" -v a="$after" -v hz="$HZ" -v n="${reqs:-0}" \
        'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    sys=$(awk -v b="$sys_before" -v a="$sys_after" -v hz="$HZ" -v n="${reqs:-0}" \
        'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    [ -n "${UPSTREAM_PID:-}" ] && up_cpu=$(awk -v b="$up_before" -v a="$up_after" -v hz="$HZ" -v n="${reqs:-0}" \
        'BEGIN { if (n > 0) printf "%.2f", (a - b) / hz * 1e6 / n; else print "nan" }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$test" "$name" "$threads" "$round" \
        "${reqs:-0}" "${rps:-0}" "$p50" "$p99" "$mean" "$stdev" "$cpu" "${errors:--}" "${non2xx:-0}" "$up_cpu" \
        "$sys" >>"$WORK/results/raw.tsv"
    log "$test $name -t$threads round $round: ${rps:-?} req/s, p50 ${p50} ms, p99 ${p99} ms, ${cpu} us CPU/req (${sys} in the kernel)${UPSTREAM_PID:+ (upstream $up_cpu)}${errors:+, socket errors $errors}${non2xx:+, non-2xx $non2xx}"
}

# Median table for one test from raw.tsv.
# usage: summarize TEST BASELINE_NAME [CANNED_NAME]   (names are matched per wrk thread count)
# Rows marked BAD (record_bad: the server's answer was wrong, so wrk was not run) show up in
# notes, and a server with no good run at all gets a row of dashes. With upstream CPU recorded
# (UPSTREAM_PID in run_wrk) an "upCPUus" column follows CPUus/req, and "sysUS" (the server's
# kernel time per request, part of CPUus/req) follows when recorded; canned's column is left out
# when no CANNED_NAME is given.
summarize() {
    local test=$1 base=$2 canned=${3:-}
    awk -F'\t' -v test="$test" -v base="$base" -v canned="$canned" '
        function median(key,   n, m, i, j, t, a, b) {
            # "nan" and "-" samples (no usable value) are left out.
            m = split(vals[key], b, " "); n = 0
            for (i = 1; i <= m; i++) if (b[i] != "nan" && b[i] != "-") a[++n] = b[i]
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
            if (n == 0) return "nan"
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function remember(k) { if (!(k in seen)) { seen[k] = 1; order[++cnt] = k } }
        $1 == test && $5 != "DEAD" && $5 != "BAD" {
            k = $2 SUBSEP $3
            remember(k)
            vals[k, "rps"] = vals[k, "rps"] " " $6; vals[k, "p50"] = vals[k, "p50"] " " $7
            vals[k, "p99"] = vals[k, "p99"] " " $8; vals[k, "mean"] = vals[k, "mean"] " " $9
            vals[k, "sd"] = vals[k, "sd"] " " $10; vals[k, "cpu"] = vals[k, "cpu"] " " $11
            if (NF >= 14 && $14 != "-") { vals[k, "up"] = vals[k, "up"] " " $14; has_up = 1 }
            if (NF >= 15 && $15 != "-") { vals[k, "sys"] = vals[k, "sys"] " " $15; has_sys = 1 }
            runs[k]++
            if ($12 != "-" && $12 != "connect=0,read=0,write=0,timeout=0") errs[k] = errs[k] " r" $4 ":" $12
            if ($13 + 0 > 0) errs[k] = errs[k] " r" $4 ":non2xx=" $13
        }
        $1 == test && $5 == "DEAD" { k = $2 SUBSEP $3; remember(k); errs[k] = errs[k] " r" $4 ":DEAD" }
        $1 == test && $5 == "BAD" { k = $2 SUBSEP $3; remember(k); errs[k] = errs[k] " r" $4 ":BAD(" $6 ")" }
        END {
            for (i = 1; i <= cnt; i++) {
                k = order[i]
                if (runs[k] > 0) { cpu[k] = median(k SUBSEP "cpu"); rps[k] = median(k SUBSEP "rps") }
            }
            printf "%-16s %3s %4s %10s %8s %8s %8s %8s %9s", "server", "wrk", "runs", "req/s", "p50ms", "p99ms", "meanms", "sdevms", "CPUus/req"
            if (has_sys) printf " %8s", "sysUS"
            if (has_up) printf " %8s", "upCPUus"
            printf " %8s", "cpu/base"
            if (canned != "") printf " %8s", "cpu/cann"
            printf " %8s  %s\n", "rps/base", "notes"
            for (i = 1; i <= cnt; i++) {
                k = order[i]; split(k, kk, SUBSEP); t = kk[2]
                if (runs[k] == 0) {
                    printf "%-16s -t%s %4d %10s %8s %8s %8s %8s %9s", kk[1], t, 0, "-", "-", "-", "-", "-", "-"
                    if (has_sys) printf " %8s", "-"
                    if (has_up) printf " %8s", "-"
                    printf " %8s", "-"
                    if (canned != "") printf " %8s", "-"
                    printf " %8s %s\n", "-", errs[k]
                    continue
                }
                bk = base SUBSEP t; ck = canned SUBSEP t
                rb = (bk in cpu && cpu[bk] > 0) ? sprintf("%.2f", cpu[k] / cpu[bk]) : "-"
                rc = (canned != "" && ck in cpu && cpu[ck] > 0) ? sprintf("%.2f", cpu[k] / cpu[ck]) : "-"
                rr = (bk in rps && rps[bk] > 0) ? sprintf("%.2f", rps[k] / rps[bk]) : "-"
                printf "%-16s -t%s %4d %10.0f %8.2f %8.2f %8.2f %8.2f %9.2f", kk[1], t, runs[k], rps[k], median(k SUBSEP "p50"), median(k SUBSEP "p99"), median(k SUBSEP "mean"), median(k SUBSEP "sd"), cpu[k]
                if (has_sys) { sy = median(k SUBSEP "sys"); if (sy == "nan") printf " %8s", sy; else printf " %8.2f", sy }
                if (has_up) { up = median(k SUBSEP "up"); if (up == "nan") printf " %8s", up; else printf " %8.2f", up }
                printf " %8s", rb
                if (canned != "") printf " %8s", rc
                printf " %8s %s\n", rr, errs[k]
            }
        }' "$WORK/results/raw.tsv"
}

# Records that NAME's answer was wrong in this round (wrk not run): a BAD row for summarize.
# usage: record_bad TEST NAME THREADS ROUND REASON
record_bad() {
    printf '%s\t%s\t%s\t%s\tBAD\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$WORK/results/raw.tsv"
    log "warning: $2 answered wrong ($5); $1 round $4 not measured"
}

# Asks a started server for PATH once and checks the status and that the body contains NEEDLE
# (fixed string). Returns 0 if right; else 1, with what was wrong in CHECK_MSG (no spaces).
# usage: check_answer NAME PATH STATUS NEEDLE
check_answer() {
    local name=$1 path=$2 want=$3 needle=$4
    local out=$WORK/logs/$name.check code
    code=$(curl -s -o "$out" -w '%{http_code}' --max-time 10 "http://127.0.0.1:${PORT[$name]}$path" 2>/dev/null) || true
    CHECK_MSG=
    if [ "$code" != "$want" ]; then
        CHECK_MSG="status=${code:-none}"
    elif ! grep -qF -- "$needle" "$out"; then
        CHECK_MSG="wrong-body($(wc -c <"$out")B)"
    fi
    [ -z "$CHECK_MSG" ]
}

# check_answer, then run_wrk if the answer was right, record_bad if not.
# usage: run_checked PATH STATUS NEEDLE -- run_wrk's arguments (TEST NAME THREADS CONNS ROUND ...)
run_checked() {
    local path=$1 want=$2 needle=$3; shift 4
    if check_answer "$2" "$path" "$want" "$needle"; then
        WRK_PATH=$path run_wrk "$@"
    else
        record_bad "$1" "$2" "$3" "$5" "$CHECK_MSG"
    fi
}

# Starts nginx or shoal on a configuration file already written to $WORK/conf/NAME.conf, and waits
# until PORT answers HTTP at all (what it answers is check_answer's business); sets PID, PORT, KIND.
# usage: start_conf NAME KIND(nginx|shoal|shoal0) PORT   (shoal0: the binary $SHOAL0, a second
# shoal to compare with, e.g. an earlier commit)
start_conf() {
    local name=$1 kind=$2 port=$3
    port_free "$port" || die "port $port is in use"
    local out=$WORK/logs/$name.out
    case $kind in
        shoal) (cd "$WORK" && exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$out" 2>&1 & ;;
        shoal0) (cd "$WORK" && exec "$SHOAL0" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf") >"$out" 2>&1 & ;;
        nginx) (cd "$WORK" && exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf") >"$out" 2>&1 & ;;
        *) die "start_conf: unknown server kind $kind" ;;
    esac
    local pid=$!
    STARTED_PIDS+=("$pid")
    PID[$name]=$pid PORT[$name]=$port KIND[$name]=$kind
    local i
    for i in $(seq 50); do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$out" "$WORK/logs/$name.error.log" >&2 2>/dev/null || true
            die "$name exited at start"
        fi
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" 2>/dev/null && break
        sleep 0.1
    done
    log "started $name (pid $pid, port $port)"
}

# The features a server said it does not implement (shoal's "[warn] ... is not implemented yet"):
# a result from a server that ignored part of its configuration is not comparable.
report_unimplemented() {
    local f
    for f in "$WORK"/logs/*.out "$WORK"/logs/*.error.log; do
        [ -s "$f" ] || continue
        grep -h 'not implemented yet' "$f" | sed 's/^.*\[warn\] //' | sort -u | sed "s/^/$(basename "$f" | cut -d. -f1): /" || true
    done | sort -u
}

# Scans the servers' error logs and stdout/stderr for anything but the expected warnings.
report_logs() {
    local f
    for f in "$WORK"/logs/*.out "$WORK"/logs/*.error.log; do
        [ -s "$f" ] || continue
        local odd
        odd=$(grep -v -e 'is not implemented yet, ignored' -e 'raised RLIMIT_NOFILE' \
            -e 'is ready to serve requests' -e '\[notice\]' "$f" | head -20 || true)
        if [ -n "$odd" ]; then
            echo "--- $(basename "$f"):"
            echo "$odd"
        fi
    done
}

machine_info() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(nproc) cores, $(uname -sr); $(nginx -v 2>&1); $(h2o --version | head -1); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
    echo "shoal: $SHOAL_DESC; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# One line per server: alive or not, threads, RSS and open descriptors (process tree), to spot
# crashes and leaked connections after the load stops.
server_state() {
    local name pid
    printf '%-16s %7s %5s %8s %6s %s\n' server pid alive threads RSS_KiB fds
    for name in "$@"; do
        pid=${PID[$name]}
        if ! kill -0 "$pid" 2>/dev/null; then
            printf '%-16s %7s %5s\n' "$name" "$pid" DEAD
            continue
        fi
        local pids p th=0 rss=0 fds=0
        pids="$pid $(pgrep -P "$pid" | tr "\n" " " || true)"
        for p in $pids; do
            th=$((th + $(awk '/^Threads:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
            rss=$((rss + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
            fds=$((fds + $(ls "/proc/$p/fd" 2>/dev/null | wc -l)))
        done
        printf '%-16s %7s %5s %8s %6s %s\n' "$name" "$pid" yes "$th" "$rss" "$fds"
    done
}

# callgrind_per_unit VPID OUT N: stops counting in the valgrind process VPID, dumps and ends
# it, and prints its user-space instructions per unit (the largest OUT.* file's total / N)
# and N; fails when N is empty or 0.
callgrind_per_unit() {
    local vpid=$1 out=$2 n=$3 file total
    callgrind_control -i off "$vpid" >/dev/null 2>&1
    callgrind_control -d "$vpid" >/dev/null 2>&1
    sleep 0.5
    kill "$vpid" 2>/dev/null || true
    wait "$vpid" 2>/dev/null || true
    file=$(ls -S "$out".* | head -1)
    total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(/,/, "", $1); print $1}')
    [ -n "$n" ] && [ "$n" -gt 0 ] || return 1
    echo "$((total / n)) $n"
}
