#!/usr/bin/env bash
# Seed 000 (and 003) on this machine: thread pools under a disk that cannot keep up, as
# ARCHITECTURE.md's reproduction did. FILES cold 4 MiB files on the real disk, page cache dropped
# before each run, the server's processes in a cgroup (v1) whose reads are throttled (25 MiB/s,
# 100 IOPS) and whose memory is limited (256 MiB) so the page cache stays small; RANDOM_CONNS
# connections read random cold files (bench/seed000/random.lua) while HOT_CONNS connections read
# one hot 4 MiB file, DURATION seconds. For shoal `aio off`, shoal `aio threads` +
# `aio_residency_check off` (always offload, as nginx), shoal `aio threads` (residency check, the
# default), nginx `aio off`, nginx `aio threads`: hot-file req/s, p50/p99, total MiB/s.
# Then seed 001's 612-byte file (no throttle): what `aio threads` costs on a hot small file, for
# shoal and nginx (req/s and server CPU per request, interleaved rounds, medians).
#
#   bench/seed000.sh                          # everything, defaults below (about 7 minutes)
#   FILES=96 DURATION=10 bench/seed000.sh     # smaller
#   SHOAL=/path/to/shoal SKIP_SMALL=1 bench/seed000.sh
#
# Environment: FILES (192), FILE_MB (4), RANDOM_CONNS (40), HOT_CONNS (20), DURATION (13, s),
# ROUNDS (3, interleaved), READ_BPS (26214400), READ_IOPS (100), MEM_LIMIT (256M), WORKERS (2),
# DATA (data directory on a real disk, reused between runs: /var/tmp/shoal-seed000-data),
# VARIANTS (names to run: default the five above; also shoal-always-64 and shoal-check-64),
# SMALL_ROUNDS (3), SMALL_DURATION (8, s), SMALL_CONNS (100), SKIP_SEED000=1, SKIP_SMALL=1,
# BASE_PORT (18400), KEEP=1 (keep the work directory with configs, logs and wrk outputs).
# shoal: SHOAL=path uses that binary; otherwise a clean snapshot of SHOAL_REV (default HEAD) is
# built (git archive: half-edited files in the checkout do not count) with CARGO_TARGET_DIR
# (default /work/target-bench).
#
# Needs root (cgroups, drop_caches), cgroup v1 blkio and memory controllers, nginx built with
# --with-threads, wrk and curl (bench/install.sh installs them). Listens on 127.0.0.1 only.
# Everything started here is stopped by PID, and every cgroup made here removed, at exit.
set -euo pipefail

# As root, shoal without `user` is nginx's two processes: a root master and a child serving as
# nginx's default `nobody`. The benchmarks measure one process (its pid: strace, callgrind, RSS)
# and let it write in the prefix, so shoal is told `user root` (one process, root, as before).
SHOAL_ARGS=()
[ "$(id -u)" = 0 ] && SHOAL_ARGS=(-g "user root;")

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
FILES=${FILES:-192}
FILE_MB=${FILE_MB:-4}
RANDOM_CONNS=${RANDOM_CONNS:-40}
HOT_CONNS=${HOT_CONNS:-20}
DURATION=${DURATION:-13}
ROUNDS=${ROUNDS:-3}
READ_BPS=${READ_BPS:-26214400}
READ_IOPS=${READ_IOPS:-100}
MEM_LIMIT=${MEM_LIMIT:-256M}
WORKERS=${WORKERS:-2}
DATA=${DATA:-/var/tmp/shoal-seed000-data}
SMALL_ROUNDS=${SMALL_ROUNDS:-3}
SMALL_DURATION=${SMALL_DURATION:-8}
SMALL_CONNS=${SMALL_CONNS:-100}
BASE_PORT=${BASE_PORT:-18400}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
HZ=$(getconf CLK_TCK)
BLKIO=/sys/fs/cgroup/blkio
MEMCG=/sys/fs/cgroup/memory

# Seed 000 variants: name|kind|location lines|main-context lines. The *-64 ones (not run unless
# named in VARIANTS) give shoal's one process-wide default pool the 64 threads that nginx's two
# worker processes have between them (32 each).
SEED000_VARIANTS=(
    "shoal-aio-off|shoal|aio off;|"
    "shoal-always|shoal|aio threads; aio_residency_check off;|"
    "shoal-check|shoal|aio threads;|"
    "nginx-aio-off|nginx|aio off;|"
    "nginx-threads|nginx|aio threads;|"
    "shoal-always-64|shoal|aio threads; aio_residency_check off;|thread_pool default threads=64;"
    "shoal-check-64|shoal|aio threads;|thread_pool default threads=64;"
)
DEFAULT_VARIANTS="shoal-aio-off shoal-always shoal-check nginx-aio-off nginx-threads"
# Seed 001 variants (hot small file, no throttle)
SMALL_VARIANTS=(
    "shoal-off|shoal|aio off;"
    "shoal-threads|shoal|aio threads;"
    "shoal-always|shoal|aio threads; aio_residency_check off;"
    "nginx-off|nginx|aio off;"
    "nginx-threads|nginx|aio threads;"
)

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: the runs use cgroups and drop the page cache"
[ -e $BLKIO/blkio.throttle.read_bps_device ] || die "no cgroup v1 blkio controller at $BLKIO"
[ -e $MEMCG/memory.limit_in_bytes ] || die "no cgroup v1 memory controller at $MEMCG"
if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null || ! command -v curl >/dev/null; then
    [ -x "$BENCH_DIR/install.sh" ] || [ -f "$BENCH_DIR/install.sh" ] || die "nginx, wrk and curl are needed"
    sh "$BENCH_DIR/install.sh" >&2
fi
nginx -V 2>&1 | grep -q -- --with-threads || die "this nginx is built without --with-threads"

# --- shoal ------------------------------------------------------------------------------------
if [ -n "${SHOAL:-}" ]; then
    SHOAL_DESC="$SHOAL (prebuilt)"
else
    rev=$(cd "$REPO" && git rev-parse --short "${SHOAL_REV:-HEAD}") || die "unknown revision ${SHOAL_REV:-HEAD}"
    src=$(mktemp -d /tmp/shoal-src.XXXXXX)
    (cd "$REPO" && git archive "$rev") | tar -x -C "$src"
    log "building shoal $rev (release) from a clean snapshot, CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
    (cd "$src" && cargo build --release) >&2 || { rm -rf "$src"; die "shoal build failed"; }
    rm -rf "$src"
    SHOAL=$CARGO_TARGET_DIR/release/shoal
    SHOAL_DESC="commit $rev (clean snapshot)"
fi
[ -x "$SHOAL" ] || die "no shoal binary at $SHOAL"

# --- state and cleanup ------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/shoal-seed000.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/conf" "$WORK/logs" "$WORK/out" "$WORK/html"
cp "$REPO/tests/confs/mime.types" "$WORK/conf/"
cp "$REPO/html/index.html" "$WORK/html/"
chmod -R a+rX "$WORK"
STARTED_PIDS=()
CGROUPS=()

stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

lift_throttle() {
    local cg=$1
    [ -e "$cg/blkio.throttle.read_bps_device" ] || return 0
    echo "$DEV 0" >"$cg/blkio.throttle.read_bps_device" 2>/dev/null || true
    echo "$DEV 0" >"$cg/blkio.throttle.read_iops_device" 2>/dev/null || true
}

remove_cgroup() {
    local cg=$1 root p i
    [ -d "$cg" ] || return 0
    lift_throttle "$cg"
    root=$(dirname "$cg")
    for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do echo "$p" >"$root/cgroup.procs" 2>/dev/null || true; done
    for i in $(seq 50); do rmdir "$cg" 2>/dev/null && return 0; sleep 0.1; done
    log "warning: could not remove cgroup $cg"
}

cleanup() {
    local pid cg
    for cg in ${CGROUPS[@]+"${CGROUPS[@]}"}; do lift_throttle "$cg"; done
    for pid in ${STARTED_PIDS[@]+"${STARTED_PIDS[@]}"}; do stop_pid "$pid"; done
    for cg in ${CGROUPS[@]+"${CGROUPS[@]}"}; do remove_cgroup "$cg"; done
    if [ -n "${KEEP:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the data set -----------------------------------------------------------------------------
mkdir -p "$DATA/cold"
case $(stat -f -c %T "$DATA") in
    tmpfs | ramfs) die "$DATA is on a memory filesystem: nothing there is ever cold" ;;
esac
DEV=$(stat -c '%Hd:%Ld' "$DATA")
[ "${DEV%%:*}" != 0 ] || die "$DATA is on an anonymous device ($DEV): blkio cannot throttle it; set DATA"
[ -e "/sys/dev/block/$DEV/partition" ] && DEV=$(cat "/sys/dev/block/$DEV/../dev")
bytes=$((FILE_MB * 1024 * 1024))
make_file() { [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" = "$bytes" ] || head -c "$bytes" /dev/urandom >"$1"; }
log "data set: $FILES x $FILE_MB MiB in $DATA (disk $DEV)"
for i in $(seq 0 $((FILES - 1))); do make_file "$DATA/cold/$i.bin"; done
make_file "$DATA/hot.bin"
chmod -R a+rX "$DATA"
sync

# --- servers ----------------------------------------------------------------------------------
# usage: write_conf TEMPLATE NAME PORT AIO [MAIN]
write_conf() {
    sed -e "s|@WORKERS@|$WORKERS|" -e "s|@NAME@|$2|" -e "s|@PORT@|$3|" -e "s|@DATA@|$DATA|" \
        -e "s|@HTML@|$WORK/html|" -e "s|@AIO@|$4|" -e "s|@MAIN@|${5:-}|" \
        "$BENCH_DIR/seed000/$1" >"$WORK/conf/$2.conf"
}

# Starts a server; with CG set (a cgroup suffix), inside the throttled cgroups. Waits until
# PROBE answers 200 (which also warms it). Sets SERVER_PID.
# usage: start_server NAME KIND PORT PROBE
start_server() {
    local name=$1 kind=$2 port=$3 probe=$4 i
    ! ss -Hltn "sport = :$port" | grep -q . || die "port $port is in use"
    (
        if [ -n "${CG:-}" ]; then
            echo "$BASHPID" >"$BLKIO/$CG/cgroup.procs"
            echo "$BASHPID" >"$MEMCG/$CG/cgroup.procs"
        fi
        cd "$WORK"
        case $kind in
            shoal) exec "$SHOAL" "${SHOAL_ARGS[@]}" -p "$WORK/" -c "conf/$name.conf" ;;
            nginx) exec nginx -p "$WORK/" -e "$WORK/logs/$name.error.log" -c "conf/$name.conf" ;;
        esac
    ) >"$WORK/logs/$name.out" 2>&1 &
    SERVER_PID=$!
    STARTED_PIDS+=("$SERVER_PID")
    for i in $(seq 100); do
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/logs/$name.out" >&2; die "$name exited at start"; }
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$probe" 2>/dev/null)" = 200 ] && return 0
        sleep 0.1
    done
    die "$name does not answer 200 on $probe"
}

# Drops a reaped pid from the list (so cleanup never signals a number the kernel reused).
forget_pid() {
    local p rest=()
    for p in "${STARTED_PIDS[@]}"; do [ "$p" = "$1" ] || rest+=("$p"); done
    STARTED_PIDS=(${rest[@]+"${rest[@]}"})
}

stop_server() {
    stop_pid "$1"
    forget_pid "$1"
}

# CPU clock ticks (user + system) of a process and its children (nginx's workers).
tree_ticks() {
    local p total=0 t
    for p in "$1" $(pgrep -P "$1" || true); do
        t=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
        total=$((total + ${t:-0}))
    done
    echo "$total"
}

# wrk's figures: requests req/s p50_ms p99_ms MiB_read timeouts non2xx
parse_wrk() {
    awk '
        function ms(v) {
            if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
            if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
            if (v ~ /m$/) { sub(/m$/, "", v); return v * 60000 }
            if (v ~ /s$/) { sub(/s$/, "", v); return v * 1000 }
            return -1
        }
        function mib(v,   n) {
            n = v; sub(/[KMGT]?B$/, "", n)
            if (v ~ /KB$/) return n / 1024
            if (v ~ /MB$/) return n + 0
            if (v ~ /GB$/) return n * 1024
            if (v ~ /TB$/) return n * 1048576
            return n / 1048576
        }
        / requests in / { reqs = $1; read = mib($5) }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = ms($2) }
        $1 == "99%" { p99 = ms($2) }
        /Socket errors:/ { gsub(/,/, ""); timeouts = $NF }
        /Non-2xx/ { non2xx = $NF }
        END { printf "%d %.1f %.1f %.1f %.1f %d %d\n", reqs, rps, p50, p99, read, timeouts, non2xx }
    ' "$1"
}

blkio_read_bytes() {
    awk -v dev="$DEV" '$1 == dev && $2 == "Read" { s += $3 } END { print s + 0 }' \
        "$BLKIO/$CG/blkio.throttle.io_service_bytes" 2>/dev/null || echo 0
}

machine_info() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(uname -sr); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
    echo "disk $DEV: scheduler $(cat "/sys/dev/block/$DEV/queue/scheduler" 2>/dev/null), read_ahead_kb $(cat "/sys/dev/block/$DEV/queue/read_ahead_kb" 2>/dev/null)"
    echo "shoal: $SHOAL_DESC; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}

RESULTS=$WORK/results.md
{
    echo "### seed 000 — $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    machine_info
    echo
    echo "command: FILES=$FILES FILE_MB=$FILE_MB RANDOM_CONNS=$RANDOM_CONNS HOT_CONNS=$HOT_CONNS DURATION=$DURATION ROUNDS=$ROUNDS READ_BPS=$READ_BPS READ_IOPS=$READ_IOPS MEM_LIMIT=$MEM_LIMIT WORKERS=$WORKERS SMALL_ROUNDS=$SMALL_ROUNDS SMALL_DURATION=$SMALL_DURATION bench/seed000.sh"
} >"$RESULTS"

selected() { [[ " ${VARIANTS:-$DEFAULT_VARIANTS} " == *" $1 "* ]]; }

# --- seed 000: hot file under random cold load --------------------------------------------------
if [ -z "${SKIP_SEED000:-}" ]; then
    raw=$WORK/out/seed000.tsv
    : >"$raw"
    for round in $(seq "$ROUNDS"); do
        port=$BASE_PORT
        for v in "${SEED000_VARIANTS[@]}"; do
            IFS='|' read -r name kind aio main <<<"$v"
            port=$((port + 1))
            selected "$name" || continue
            write_conf seed000.conf.in "$name" "$port" "$aio" "$main"
            log "$name round $round: dropping caches, $RANDOM_CONNS random + $HOT_CONNS hot connections for ${DURATION}s"
            sync
            echo 3 >/proc/sys/vm/drop_caches
            CG=shoal-seed000-$$-$name
            mkdir "$BLKIO/$CG" "$MEMCG/$CG"
            CGROUPS+=("$BLKIO/$CG" "$MEMCG/$CG")
            echo "$DEV $READ_BPS" >"$BLKIO/$CG/blkio.throttle.read_bps_device"
            echo "$DEV $READ_IOPS" >"$BLKIO/$CG/blkio.throttle.read_iops_device"
            echo "$MEM_LIMIT" >"$MEMCG/$CG/memory.limit_in_bytes"
            start_server "$name" "$kind" "$port" /hot.bin
            disk0=$(blkio_read_bytes)
            out=$WORK/out/$name.r$round
            wrk -t1 -c"$RANDOM_CONNS" -d"${DURATION}s" --timeout 30s --latency -s "$BENCH_DIR/seed000/random.lua" \
                "http://127.0.0.1:$port/" "$FILES" >"$out.random.wrk" 2>&1 &
            rnd=$!
            wrk -t1 -c"$HOT_CONNS" -d"${DURATION}s" --timeout 30s --latency \
                "http://127.0.0.1:$port/hot.bin" >"$out.hot.wrk" 2>&1 &
            hot=$!
            STARTED_PIDS+=("$rnd" "$hot")
            wait "$rnd" || log "warning: random wrk exited with $?"
            wait "$hot" || log "warning: hot wrk exited with $?"
            forget_pid "$rnd"; forget_pid "$hot"
            disk1=$(blkio_read_bytes)
            lift_throttle "$BLKIO/$CG"
            kill -0 "$SERVER_PID" 2>/dev/null || log "warning: $name died during the run"
            stop_server "$SERVER_PID"
            remove_cgroup "$BLKIO/$CG"; remove_cgroup "$MEMCG/$CG"
            read -r _ h_rps h_p50 h_p99 h_mib h_to h_non <<<"$(parse_wrk "$out.hot.wrk")"
            read -r _ r_rps r_p50 _ r_mib _ _ <<<"$(parse_wrk "$out.random.wrk")"
            total=$(awk -v a="$h_mib" -v b="$r_mib" -v d="$DURATION" 'BEGIN { printf "%.0f", (a + b) / d }')
            disk=$(awk -v a="$disk0" -v b="$disk1" -v d="$DURATION" 'BEGIN { printf "%.1f", (b - a) / 1048576 / d }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$h_rps" "$h_p50" "$h_p99" \
                "$((h_to + h_non))" "$r_rps" "$r_p50" "$total" "$disk" >>"$raw"
            log "$name round $round: hot $h_rps req/s, p50 $h_p50 ms, p99 $h_p99 ms; random $r_rps req/s; $total MiB/s sent, disk $disk MiB/s"
        done
    done
    {
        echo
        echo "#### seed 000: hot file while $RANDOM_CONNS connections read random cold files"
        echo
        echo "$FILES cold ${FILE_MB} MiB files + 1 hot, $WORKERS workers, reads throttled to $((READ_BPS / 1048576)) MiB/s and $READ_IOPS IOPS, memory $MEM_LIMIT, caches dropped before each run; wrk -t1 -c$HOT_CONNS (hot) and -t1 -c$RANDOM_CONNS (random, bench/seed000/random.lua), ${DURATION}s, --timeout 30s; medians of $ROUNDS interleaved rounds (hot req/s: every round)."
        echo
        echo "| server | hot req/s | (rounds) | hot p50 ms | hot p99 ms | random req/s | random p50 ms | total MiB/s sent | disk MiB/s read | errors |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        awk -F'\t' '
            function median(s,   n, a, i, j, t) {
                n = split(s, a, " ")
                for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
                return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            {
                if (!($1 in hr)) order[++n] = $1
                hr[$1] = hr[$1] " " $3; p50[$1] = p50[$1] " " $4; p99[$1] = p99[$1] " " $5; err[$1] += $6
                rr[$1] = rr[$1] " " $7; rp50[$1] = rp50[$1] " " $8; tot[$1] = tot[$1] " " $9; disk[$1] = disk[$1] " " $10
            }
            END {
                for (i = 1; i <= n; i++) {
                    k = order[i]; all = hr[k]; gsub(/^ /, "", all); gsub(/ /, ", ", all)
                    printf "| %s | %.1f | %s | %.1f | %.0f | %.1f | %.0f | %.0f | %.1f | %d |\n", k, median(hr[k]), all,
                        median(p50[k]), median(p99[k]), median(rr[k]), median(rp50[k]), median(tot[k]), median(disk[k]), err[k]
                }
            }' "$raw"
    } >>"$RESULTS"
fi

# --- seed 001: what aio threads costs on a hot small file ---------------------------------------
if [ -z "${SKIP_SMALL:-}" ]; then
    CG=
    declare -A SPID
    names=()
    port=$((BASE_PORT + 20))
    for v in "${SMALL_VARIANTS[@]}"; do
        IFS='|' read -r name kind aio <<<"$v"
        name=small-$name
        port=$((port + 1))
        write_conf seed001.conf.in "$name" "$port" "$aio"
        start_server "$name" "$kind" "$port" /
        SPID[$name]=$SERVER_PID
        names+=("$name|$port")
    done
    raw=$WORK/out/small.tsv
    : >"$raw"
    for round in $(seq "$SMALL_ROUNDS"); do
        for np in "${names[@]}"; do
            IFS='|' read -r name port <<<"$np"
            pid=${SPID[$name]}
            t0=$(tree_ticks "$pid")
            wrk -t1 -c"$SMALL_CONNS" -d"${SMALL_DURATION}s" --latency "http://127.0.0.1:$port/" \
                >"$WORK/out/$name.r$round.wrk" 2>&1 || log "warning: wrk exited with $? for $name"
            t1=$(tree_ticks "$pid")
            read -r reqs rps p50 p99 _ _ non <<<"$(parse_wrk "$WORK/out/$name.r$round.wrk")"
            cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v n="$reqs" 'BEGIN { printf "%.2f", (n > 0) ? (b - a) / hz * 1e6 / n : -1 }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$rps" "$p99" "$cpu" "$non" >>"$raw"
            log "$name round $round: $rps req/s, p99 $p99 ms, $cpu us CPU/request${non:+, non-2xx $non}"
        done
    done
    {
        echo
        echo "#### seed 001's 612-byte file: the cost of aio threads on a hot small file"
        echo
        echo "1 worker, seed 001's tuned configuration, no throttle; wrk -t1 -c$SMALL_CONNS -d${SMALL_DURATION}s, medians of $SMALL_ROUNDS interleaved rounds. Cost: vs the same server with aio off."
        echo
        echo "| server | req/s | p99 ms | server CPU µs/req | req/s vs aio off | CPU/req vs aio off |"
        echo "|---|---|---|---|---|---|"
        awk -F'\t' '
            function median(s,   n, a, i, j, t) {
                n = split(s, a, " ")
                for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
                return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            { if (!($1 in rps)) order[++n] = $1; rps[$1] = rps[$1] " " $3; p99[$1] = p99[$1] " " $4; cpu[$1] = cpu[$1] " " $5 }
            END {
                for (i = 1; i <= n; i++) { k = order[i]; R[k] = median(rps[k]); C[k] = median(cpu[k]); P[k] = median(p99[k]) }
                for (i = 1; i <= n; i++) {
                    k = order[i]; base = k; sub(/-(threads|always)$/, "-off", base)
                    dr = (base != k && R[base] > 0) ? sprintf("%+.1f%%", (R[k] / R[base] - 1) * 100) : "—"
                    dc = (base != k && C[base] > 0) ? sprintf("%+.1f%%", (C[k] / C[base] - 1) * 100) : "—"
                    label = k; sub(/^small-/, "", label)
                    printf "| %s | %.0f | %.2f | %.2f | %s | %s |\n", label, R[k], P[k], C[k], dr, dc
                }
            }' "$raw"
    } >>"$RESULTS"
    for np in "${names[@]}"; do
        IFS='|' read -r name _ <<<"$np"
        stop_server "${SPID[$name]}"
    done
fi

# --- report -------------------------------------------------------------------------------------
{
    echo
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    odd=$(cat "$WORK"/logs/*.error.log "$WORK"/logs/*.out 2>/dev/null \
        | grep -v -e '\[notice\]' -e 'is not implemented yet' -e 'raised RLIMIT_NOFILE' | sort | uniq -c | sort -rn | head -8 || true)
    if [ -n "$odd" ]; then
        echo
        echo "server log lines besides notices (count, line):"
        echo '```'
        echo "$odd"
        echo '```'
    fi
} >>"$RESULTS"
echo
cat "$RESULTS"
