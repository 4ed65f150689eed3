#!/bin/bash
# A profile-optimized shoal: profile-guided optimization (PGO) and then BOLT, both trained on the
# paths the benchmarks measure. The plain `cargo build --release` is what the README builds; this
# is the build to ship where speed matters, and what `PGO=1` makes the benchmarks use.
#
# Why: a request runs through ~10,000 instructions of mostly straight-line code, spread over more
# than the core's 32 KB instruction cache. callgrind's cache simulation counted ~825 instruction
# cache misses per static answer for the plain build (h2o: ~80), 1,631 per gRPC call (nginx:
# 319). PGO lays hot code out together and inlines by measured use; BOLT then orders the
# functions and moves cold blocks away. bench/README.md ("PGO") has the counts and times.
#
#   bench/pgo.sh            # -> $CARGO_TARGET_DIR/pgo/shoal (and shoal-pgo, PGO without BOLT)
#   BOLT=0 bench/pgo.sh     # PGO only
#   CHECK=1 bench/pgo.sh    # then run the whole test suite against the result (SHOAL_TEST_BIN)
#
# Steps:
#   1. LLVM tools: llvm-profdata of rustc's own LLVM, from rustup's `llvm-tools` component (added
#      when missing), else Debian's llvm-N of the same major; llvm-bolt from Debian's bolt-N
#      (bookworm-security has bolt-22), installed with apt-get when missing and root. No BOLT to
#      be had: PGO only, said on stderr and in $OUT/shoal.desc.
#   2. An instrumented build (-Cprofile-generate) in $CARGO_TARGET_DIR/pgo-gen (its profile
#      directory is a fixed path, so an unchanged checkout is not built again).
#   3. Training (train below), one worker: seed 001's static page over HTTP/1, HTTP/1 over TLS,
#      HTTP/2 over h2c and over TLS (h2load -m10); a proxy with upstream keepalive to
#      bench/hello; proxy_cache HITs with a buffered access log; gRPC unary calls through
#      grpc_pass to the tests' Python gRPC server (python3-grpcio; left out with a warning
#      without it); FastCGI to PHP-FPM with keepalive and fastcgi_cache HITs (left out without
#      php-fpm); TRAIN_REQUESTS (20,000) each at `-c10` and `-c100` (gRPC: `-c8 -m1`, `-c4 -m4`;
#      FastCGI `-c8`): the same count for every path, not the same time, so a slow path (a gRPC
#      call to Python) weighs as much in the layout as a fast one; plus a little of the rest: a 1 MiB
#      file over HTTP/1 and both HTTP/2s, 404s, HEADs, ranges, 304s, failing gRPC calls. A
#      graceful stop (SIGQUIT) writes the profile.
#   4. The optimized build (-Cprofile-use, linked with --emit-relocs so BOLT may move code) in
#      $CARGO_TARGET_DIR/pgo-use; the profile's file name carries its hash, so a new profile
#      rebuilds every crate.
#   5. BOLT: the binary instrumented, the same training, then rewritten with the profile.
#   6. CHECK=1: `cargo test --workspace` with SHOAL_TEST_BIN naming the result, built in the
#      checkout's own target/ (TEST_TARGET_DIR), as the README's test command builds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BOLT=${BOLT:-1}
CHECK=${CHECK:-0}
TRAIN_REQUESTS=${TRAIN_REQUESTS:-20000}
BASE_PORT=${BASE_PORT:-19760}
OUT=$CARGO_TARGET_DIR/pgo
PYTHON=/usr/bin/python3

for tool in curl h2load openssl; do
    command -v $tool >/dev/null || die "$tool is not installed (bench/install.sh; h2load: nghttp2-client)"
done

# apt_install PKG...: installs Debian packages when missing (as root); fails otherwise.
apt_install() {
    local pkg missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || return 1
    log "installing ${missing[*]}"
    { apt-get install -y -q "${missing[@]}" || { apt-get update -q && apt-get install -y -q "${missing[@]}"; }; } \
        >&2 </dev/null
}
export DEBIAN_FRONTEND=noninteractive

# A profile must be read by rustc's own LLVM major version (`rustc -vV`).
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$llvm_major" ] || die "cannot tell rustc's LLVM version from rustc -vV"
rust_bin=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin
if [ ! -x "$rust_bin/llvm-profdata" ] && command -v rustup >/dev/null; then
    log "rustup component add llvm-tools (llvm-profdata of rustc's LLVM $llvm_major)"
    rustup component add llvm-tools >&2 || log "warning: rustup could not add llvm-tools"
fi
if [ -x "$rust_bin/llvm-profdata" ]; then
    PROFDATA=$rust_bin/llvm-profdata
elif apt_install "llvm-$llvm_major"; then
    PROFDATA=/usr/lib/llvm-$llvm_major/bin/llvm-profdata
else
    die "no llvm-profdata for LLVM $llvm_major (rustup component add llvm-tools, or Debian's llvm-$llvm_major)"
fi
BOLT_BIN=/usr/lib/llvm-$llvm_major/bin/llvm-bolt
if [ "$BOLT" = 1 ] && ! { apt_install "bolt-$llvm_major" && [ -x "$BOLT_BIN" ]; }; then
    log "warning: no bolt-$llvm_major (Debian's package; root installs it): PGO only"
    BOLT=0
fi

build_hello
make_prefix
PROFILES=$OUT/profiles
mkdir -p "$PROFILES" "$OUT"
cache_dir=$(mktemp -d /dev/shm/shoal-pgo-cache.XXXXXX)
cleanup() {
    for p in "${STARTED_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK" "$cache_dir"
}
trap cleanup EXIT

static_port=$BASE_PORT proxy_port=$((BASE_PORT + 1)) hit_port=$((BASE_PORT + 2))
h2c_port=$((BASE_PORT + 3)) tls_port=$((BASE_PORT + 4)) grpc_port=$((BASE_PORT + 5))
fcgi_port=$((BASE_PORT + 6))
up_grpc_port=$((BASE_PORT + 7)) fpm_port=$((BASE_PORT + 8)) hello_port=$((BASE_PORT + 9))
for p in $(seq "$BASE_PORT" $((BASE_PORT + 9))); do port_free "$p" || die "port $p is in use"; done

wait_port() {
    local i
    for i in $(seq 100); do
        ss -Hltn "sport = :$1" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

(cd "$WORK" && exec "$HELLO" "$hello_port" 1) >"$WORK/logs/hello.out" 2>&1 &
STARTED_PIDS+=($!)

head -c 1048576 /dev/urandom >"$WORK/html/1m.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$WORK/conf/key.pem" -out "$WORK/conf/cert.pem" 2>/dev/null

# gRPC: bench/grpc.sh's upstream and call.
GRPC=0
if "$PYTHON" -c 'import grpc' 2>/dev/null; then
    "$PYTHON" "$REPO/tests/e2e/grpc_support/server.py" "$up_grpc_port" >"$WORK/logs/grpc-server.out" 2>&1 &
    STARTED_PIDS+=($!)
    wait_port "$up_grpc_port" || die "the gRPC server did not start ($WORK/logs/grpc-server.out)"
    GRPC=1
    printf '\0\0\0\0\5hello' >"$WORK/call.bin"
else
    log "warning: python3-grpcio is missing (apt-get install python3-grpcio): no gRPC in the training"
fi

# FastCGI: bench/fastcgi.sh's PHP-FPM and script.
FCGI=0
FPM=$(ls /usr/sbin/php-fpm* 2>/dev/null | sort | tail -1)
if [ -n "$FPM" ]; then
    mkdir -p "$WORK/php" "$WORK/fcgi-cache"
    printf '<?php echo "Hello, world!\\n";\n' >"$WORK/php/hello.php"
    cat >"$WORK/conf/php-fpm.conf" <<CONF
[global]
pid = $WORK/logs/php-fpm.pid
error_log = $WORK/logs/php-fpm.log
daemonize = no
[train]
listen = 127.0.0.1:$fpm_port
pm = static
pm.max_children = 12
pm.max_requests = 0
$([ "$(id -u)" = 0 ] && printf 'user = nobody\ngroup = nogroup\n')
CONF
    chmod -R a+rX "$WORK"
    "$FPM" --nodaemonize --fpm-config "$WORK/conf/php-fpm.conf" $([ "$(id -u)" = 0 ] && echo -R) \
        >"$WORK/logs/php-fpm.out" 2>&1 &
    STARTED_PIDS+=($!)
    wait_port "$fpm_port" || die "php-fpm did not start ($WORK/logs/php-fpm.log)"
    FCGI=1
else
    log "warning: php-fpm is missing (apt-get install php-fpm): no FastCGI in the training"
fi
chmod -R a+rX "$WORK"

grpc_server=""
[ "$GRPC" = 1 ] && grpc_server="
    upstream grpc_backend { server 127.0.0.1:$up_grpc_port; keepalive 32; }
    server {
        listen 127.0.0.1:$grpc_port http2;
        location / { grpc_pass grpc://grpc_backend; }
    }"
fcgi_server=""
[ "$FCGI" = 1 ] && fcgi_server="
    fastcgi_cache_path $cache_dir/fcgi keys_zone=fcgi:10m;
    upstream php { server 127.0.0.1:$fpm_port; keepalive 8; }
    server {
        listen 127.0.0.1:$fcgi_port;
        fastcgi_param SCRIPT_FILENAME $WORK/php/hello.php;
        fastcgi_param REQUEST_METHOD \$request_method;
        fastcgi_param QUERY_STRING \$query_string;
        fastcgi_keep_conn on;
        location / { fastcgi_pass php; }
        location /cached {
            fastcgi_pass php;
            fastcgi_cache fcgi;
            fastcgi_cache_key \$uri;
            fastcgi_cache_valid 200 1h;
        }
    }"

cat >"$WORK/conf/train.conf" <<CONF
# bench/pgo.sh's training: the paths the benchmarks measure, in one worker.
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
    keepalive_requests 1000000;
    open_file_cache max=100 inactive=20s;
    client_body_temp_path tmp;
    proxy_cache_path $cache_dir/proxy levels=1:2 keys_zone=zone:10m inactive=1d;
    upstream hello { server 127.0.0.1:$hello_port; keepalive 32; }
    server {
        listen 127.0.0.1:$static_port;
        server_name localhost;
        location / { root html; index index.html index.htm; }
    }
    server {
        listen 127.0.0.1:$h2c_port http2;
        listen 127.0.0.1:$tls_port ssl http2;
        ssl_certificate $WORK/conf/cert.pem;
        ssl_certificate_key $WORK/conf/key.pem;
        location / { root html; index index.html; }
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
    }$grpc_server$fcgi_server
}
CONF
mkdir -p "$WORK/tmp"

# usage: load NAME COMMAND...: one training load, bounded in time; a failure is fatal (a
# profile without a path would make that path slower, not fail).
load() {
    local name=$1; shift
    timeout -k 5 300 "$@" >"$WORK/logs/load.$name.out" 2>&1 ||
        die "training load $name failed: $* ($WORK/logs/load.$name.out)"
}

# usage: h2ok NAME COMMAND...: an h2load load of which 99 % must have succeeded.
h2ok() {
    local name=$1
    load "$@"
    awk '/^requests:/ { done = $6; ok = $8 } END { exit !(ok > 0 && ok >= done * 0.99) }' \
        "$WORK/logs/load.$name.out" ||
        die "training load $name: requests failed ($(grep '^requests:' "$WORK/logs/load.$name.out"))"
}

# usage: train BIN: runs the training load against BIN and stops it gracefully.
train() {
    local bin=$1 pid c
    rm -rf "${cache_dir:?}"/*
    (cd "$WORK" && exec "$bin" "${SHOAL_ARGS[@]}" -p "$WORK/" -c conf/train.conf) >"$WORK/logs/train.out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$static_port/" && break; sleep 0.1; done
    curl -sf -o /dev/null "http://127.0.0.1:$static_port/" || die "the training server did not start ($WORK/logs/train.out)"
    local N=$TRAIN_REQUESTS grpc=(-H 'content-type: application/grpc' -H 'te: trailers')
    [ "$GRPC" = 1 ] && grpc+=(-d "$WORK/call.bin")
    for c in 10 100; do
        for port in $static_port $proxy_port $hit_port; do
            h2ok "h1-$port-$c" h2load --h1 -n "$N" -c$c "http://127.0.0.1:$port/"
        done
        h2ok "h1tls-$c" h2load --h1 -n "$N" -c$c "https://127.0.0.1:$tls_port/"
        h2ok "h2c-$c" h2load -n "$N" -c$c -m10 "http://127.0.0.1:$h2c_port/"
        h2ok "h2tls-$c" h2load -n "$N" -c$c -m10 "https://127.0.0.1:$tls_port/"
    done
    if [ "$GRPC" = 1 ]; then
        h2ok grpc-8 h2load -n "$N" -c8 -m1 "${grpc[@]}" "http://127.0.0.1:$grpc_port/test.Echo/Echo"
        h2ok grpc-4x4 h2load -n "$N" -c4 -m4 "${grpc[@]}" "http://127.0.0.1:$grpc_port/test.Echo/Echo"
        # A trailers-only answer (INVALID_ARGUMENT): HTTP 200, counted as a success by h2load.
        h2ok grpc-fail h2load -n 200 -c2 "${grpc[@]}" "http://127.0.0.1:$grpc_port/test.Echo/Fail"
    fi
    if [ "$FCGI" = 1 ]; then
        h2ok fcgi h2load --h1 -n "$N" -c8 "http://127.0.0.1:$fcgi_port/"
        h2ok fcgi-cache h2load --h1 -n "$N" -c8 "http://127.0.0.1:$fcgi_port/cached"
    fi
    # A little of the rest: a large file, errors and conditional answers, over each protocol.
    h2ok 1m-http1 h2load --h1 -n 200 -c4 "http://127.0.0.1:$static_port/1m.bin"
    h2ok 1m-h2c h2load -n 200 -c1 -m1 "http://127.0.0.1:$h2c_port/1m.bin"
    h2ok 1m-h2tls h2load -n 200 -c1 -m1 "https://127.0.0.1:$tls_port/1m.bin"
    load h2-404 h2load -n 500 -c2 -m10 "http://127.0.0.1:$h2c_port/missing"
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$static_port/missing"
        curl -s -o /dev/null -I "http://127.0.0.1:$static_port/index.html"
        curl -s -o /dev/null -H 'Range: bytes=0-99' "http://127.0.0.1:$static_port/index.html"
        curl -s -o /dev/null -H 'If-Modified-Since: Tue, 01 Jan 2030 00:00:00 GMT' "http://127.0.0.1:$static_port/index.html"
    done
    for _ in $(seq 20); do
        curl -s -o /dev/null --http2-prior-knowledge -I "http://127.0.0.1:$h2c_port/index.html"
        curl -sk -o /dev/null --http2 -H 'Range: bytes=0-99' "https://127.0.0.1:$tls_port/index.html"
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
"$PROFDATA" merge -o "$WORK/shoal.profdata" "$PROFILES"/*.profraw
rm -f "$PROFILES"/*.profraw
profile=$OUT/shoal-$(sha256sum "$WORK/shoal.profdata" | cut -c1-12).profdata
cp "$WORK/shoal.profdata" "$profile"
cargo_build "$CARGO_TARGET_DIR/pgo-use" "-Cprofile-use=$profile -Clink-arg=-Wl,--emit-relocs"
cp "$CARGO_TARGET_DIR/pgo-use/release/shoal" "$OUT/shoal-pgo"

if [ "$BOLT" = 1 ]; then
    log "BOLT: instrumenting, training, rewriting"
    # Each process (the master and its worker) writes its own counts at exit: merged after.
    rm -f "$WORK"/bolt.fdata*
    "$BOLT_BIN" "$OUT/shoal-pgo" -instrument -instrumentation-file="$WORK/bolt.fdata" \
        -instrumentation-file-append-pid -o "$WORK/shoal.inst" >"$WORK/logs/bolt-instrument.log" 2>&1 || die "llvm-bolt -instrument failed ($WORK/logs/bolt-instrument.log)"
    train "$WORK/shoal.inst"
    "$(dirname "$BOLT_BIN")/merge-fdata" "$WORK"/bolt.fdata.* >"$WORK/bolt.fdata" 2>"$WORK/logs/merge-fdata.log" ||
        die "merge-fdata failed ($WORK/logs/merge-fdata.log)"
    "$BOLT_BIN" "$OUT/shoal-pgo" -o "$OUT/shoal" -data="$WORK/bolt.fdata" \
        -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
        -split-eh -icf=1 -use-gnu-stack >"$OUT/bolt.log" 2>&1 || die "llvm-bolt failed ($OUT/bolt.log)"
    echo "PGO and BOLT" >"$OUT/shoal.desc"
else
    cp "$OUT/shoal-pgo" "$OUT/shoal"
    echo "PGO (no BOLT)" >"$OUT/shoal.desc"
fi
log "optimized shoal: $OUT/shoal ($(cat "$OUT/shoal.desc"))"

if [ "$CHECK" = 1 ]; then
    log "the whole test suite against $OUT/shoal"
    (cd "$REPO" && CARGO_TARGET_DIR=${TEST_TARGET_DIR:-$REPO/target} SHOAL_TEST_BIN=$OUT/shoal \
        cargo test --workspace --no-fail-fast) >&2 || die "tests failed against $OUT/shoal"
fi
echo "$OUT/shoal"
