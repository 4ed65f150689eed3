#!/bin/bash
# A profile-optimized shoal: profile-guided optimization (PGO) and then BOLT, both trained on the
# paths the benchmarks measure. The plain `cargo build --release` is what the README builds; this
# is the build to ship where speed matters, and what `PGO=1` makes the benchmarks use.
#
# Why: a request runs through ~10,000 instructions of mostly straight-line code, spread over more
# than the core's 32 KB instruction cache. callgrind's cache simulation counted ~825 instruction
# cache misses per static answer for the plain build (h2o: ~80). PGO lays hot code out together
# and inlines by measured use; BOLT then orders the functions and moves cold blocks away.
# bench/README.md ("Session 6") has the counts and times.
#
#   bench/pgo.sh            # -> $CARGO_TARGET_DIR/pgo/shoal (and shoal-pgo, PGO without BOLT)
#   BOLT=0 bench/pgo.sh     # PGO only
#   CHECK=1 bench/pgo.sh    # then run the whole test suite against the result (SHOAL_TEST_BIN)
#
# Steps:
#   1. LLVM tools of rustc's own LLVM major version (`rustc -vV`): llvm-profdata from Debian's
#      llvm-N, llvm-bolt from bolt-N, installed with apt-get when missing (root).
#   2. An instrumented build (-Cprofile-generate) in $CARGO_TARGET_DIR/pgo-gen.
#   3. Training (train below): seed 001's static page, a proxy with upstream keepalive to
#      bench/hello, and proxy_cache HITs with a buffered access log, `wrk -c10` and `-c100` for
#      TRAIN_SECONDS each, plus a few rarer answers (404, HEAD, a range, a 304). A graceful stop
#      (SIGQUIT) writes the profile.
#   4. The optimized build (-Cprofile-use, linked with --emit-relocs so BOLT may move code) in
#      $CARGO_TARGET_DIR/pgo-use.
#   5. BOLT: the binary instrumented, the same training, then rewritten with the profile.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BOLT=${BOLT:-1}
CHECK=${CHECK:-0}
TRAIN_SECONDS=${TRAIN_SECONDS:-3}
BASE_PORT=${BASE_PORT:-19760}
OUT=$CARGO_TARGET_DIR/pgo

command -v wrk >/dev/null || die "wrk is not installed (bench/install.sh)"
command -v curl >/dev/null || die "curl is not installed (bench/install.sh)"

llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$llvm_major" ] || die "cannot tell rustc's LLVM version from rustc -vV"
LLVM_BIN=/usr/lib/llvm-$llvm_major/bin
want=("llvm-$llvm_major")
[ "$BOLT" = 1 ] && want+=("bolt-$llvm_major")
missing=()
for pkg in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} (rustc's LLVM is $llvm_major; a profile must be read by the same major version)"
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
        die "could not install ${missing[*]}"
fi

build_hello
make_prefix
PROFILES=$WORK/profiles
mkdir -p "$PROFILES" "$OUT"
cache_dir=$(mktemp -d /dev/shm/shoal-pgo-cache.XXXXXX)
cleanup() {
    for p in "${STARTED_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK" "$cache_dir"
}
trap cleanup EXIT

static_port=$BASE_PORT proxy_port=$((BASE_PORT + 1)) hit_port=$((BASE_PORT + 2)) hello_port=$((BASE_PORT + 9))
for p in $static_port $proxy_port $hit_port $hello_port; do port_free "$p" || die "port $p is in use"; done
(cd "$WORK" && exec "$HELLO" "$hello_port" 1) >"$WORK/logs/hello.out" 2>&1 &
STARTED_PIDS+=($!)

cat >"$WORK/conf/train.conf" <<CONF
# bench/pgo.sh's training: the three paths the benchmarks measure, in one worker.
worker_processes 1;
daemon off;
pid logs/train.pid;
error_log logs/train.error.log warn;
events { worker_connections 10240; }
http {
    include mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    open_file_cache max=100 inactive=20s;
    proxy_cache_path $cache_dir levels=1:2 keys_zone=zone:10m inactive=1d;
    upstream hello { server 127.0.0.1:$hello_port; keepalive 32; }
    server {
        listen 127.0.0.1:$static_port;
        server_name localhost;
        location / { root html; index index.html index.htm; }
    }
    server {
        listen 127.0.0.1:$proxy_port;
        location / {
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://hello;
        }
    }
    server {
        listen 127.0.0.1:$hit_port;
        access_log logs/hit.access.log combined buffer=64k;
        location / {
            proxy_cache zone;
            proxy_cache_valid 200 10m;
            add_header X-Cache-Status \$upstream_cache_status;
            proxy_pass http://127.0.0.1:$hello_port;
        }
    }
}
CONF

# usage: train BIN: runs the training load against BIN and stops it gracefully.
train() {
    local bin=$1 pid
    rm -rf "${cache_dir:?}"/*
    (cd "$WORK" && exec "$bin" -p "$WORK" -c conf/train.conf) >"$WORK/logs/train.out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$static_port/" && break; sleep 0.1; done
    curl -sf -o /dev/null "http://127.0.0.1:$static_port/" || die "the training server did not start ($WORK/logs/train.out)"
    for c in 10 100; do
        for port in $static_port $proxy_port $hit_port; do
            timeout $((TRAIN_SECONDS + 10)) wrk -t1 -c$c -d"${TRAIN_SECONDS}s" "http://127.0.0.1:$port/" >/dev/null ||
                die "wrk failed against port $port"
        done
    done
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$static_port/missing"
        curl -s -o /dev/null -I "http://127.0.0.1:$static_port/index.html"
        curl -s -o /dev/null -H 'Range: bytes=0-99' "http://127.0.0.1:$static_port/index.html"
        curl -s -o /dev/null -H 'If-Modified-Since: Tue, 01 Jan 2030 00:00:00 GMT' "http://127.0.0.1:$static_port/index.html"
    done
    kill -QUIT "$pid"
    wait "$pid" || die "the training server exited with $? ($WORK/logs/train.out)"
}

# usage: cargo_build DIR RUSTFLAGS: a release build of the checkout in its own target directory
cargo_build() {
    log "cargo build --release, RUSTFLAGS='$2', in $1"
    (cd "$REPO" && CARGO_TARGET_DIR=$1 RUSTFLAGS=$2 cargo build --release) >&2 || die "build failed"
}

cargo_build "$CARGO_TARGET_DIR/pgo-gen" "-Cprofile-generate=$PROFILES"
# The build scripts of dependencies ran instrumented too: only the training's profile counts.
rm -f "$PROFILES"/*.profraw
log "training the instrumented build"
train "$CARGO_TARGET_DIR/pgo-gen/release/shoal"
"$LLVM_BIN/llvm-profdata" merge -o "$WORK/shoal.profdata" "$PROFILES"/*.profraw

cargo_build "$CARGO_TARGET_DIR/pgo-use" "-Cprofile-use=$WORK/shoal.profdata -Clink-arg=-Wl,--emit-relocs"
cp "$CARGO_TARGET_DIR/pgo-use/release/shoal" "$OUT/shoal-pgo"
result=$OUT/shoal-pgo

if [ "$BOLT" = 1 ]; then
    log "BOLT: instrumenting, training, rewriting"
    "$LLVM_BIN/llvm-bolt" "$OUT/shoal-pgo" -instrument -instrumentation-file="$WORK/bolt.fdata" \
        -o "$WORK/shoal.inst" >"$WORK/logs/bolt-instrument.log" 2>&1 || die "llvm-bolt -instrument failed ($WORK/logs/bolt-instrument.log)"
    train "$WORK/shoal.inst"
    "$LLVM_BIN/llvm-bolt" "$OUT/shoal-pgo" -o "$OUT/shoal" -data="$WORK/bolt.fdata" \
        -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
        -split-eh -icf=1 -use-gnu-stack >"$OUT/bolt.log" 2>&1 || die "llvm-bolt failed ($OUT/bolt.log)"
    result=$OUT/shoal
else
    cp "$OUT/shoal-pgo" "$OUT/shoal"
fi
log "optimized shoal: $result"

if [ "$CHECK" = 1 ]; then
    log "the whole test suite against $result"
    (cd "$REPO" && SHOAL_TEST_BIN=$result cargo test --workspace --no-fail-fast) >&2 ||
        die "tests failed against $result"
fi
echo "$result"
