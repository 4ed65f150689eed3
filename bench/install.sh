#!/bin/sh
# Installs what shoal's benchmarks need on a fresh Debian 12 machine: nginx, h2o, wrk, curl,
# ss (iproute2), valgrind (bench/instructions.sh), and python3 with venv for seed 004's API
# (whose virtualenv, flask and gunicorn pinned, bench/seed004/setup.sh creates; run here too
# unless under sudo, where it would land in root's home rather than the user's: the benchmark
# scripts run it themselves anyway).
# apt must not start a system nginx (or h2o) listening on port 80 while installing, so a
# policy-rc.d that refuses every service start is in place for the duration of the install.
# Idempotent: packages already installed are left alone, and an existing policy-rc.d is restored.
# Run as root.
set -eu

need=""
for pkg in nginx wrk h2o curl iproute2 python3 python3-venv valgrind; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        need="$need $pkg"
    fi
done

if [ -z "$need" ]; then
    echo "install.sh: nginx, wrk, h2o, curl, iproute2, python3, python3-venv and valgrind are already installed"
else
    policy=/usr/sbin/policy-rc.d
    saved=""
    if [ -e "$policy" ]; then
        saved=$(mktemp)
        cp -p "$policy" "$saved"
    fi
    restore() {
        if [ -n "$saved" ]; then
            mv -f "$saved" "$policy"
        else
            rm -f "$policy"
        fi
    }
    trap restore EXIT INT TERM
    printf '#!/bin/sh\n# Installed by shoal bench/install.sh: no service starts during install.\nexit 101\n' >"$policy"
    chmod 755 "$policy"

    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086
    apt-get install -y $need
fi

# The benchmarks start their own servers on 127.0.0.1 with their own configurations; a system
# nginx or h2o already running (from an earlier install without the policy) is only reported.
for svc in nginx h2o; do
    if pidof "$svc" >/dev/null 2>&1; then
        echo "install.sh: note: a system $svc is running (pids $(pidof "$svc")); the benchmarks do not use it"
    fi
done

# Rust is needed to build shoal, bench/canned and bench/hello; it is not installed here (rustup).
command -v cargo >/dev/null 2>&1 || echo "install.sh: note: cargo not found; install Rust with rustup to build shoal, bench/canned and bench/hello"

# Seed 004's virtualenv (idempotent; needs PyPI).
if [ -z "${SUDO_USER:-}" ]; then
    "$(dirname "$0")/seed004/setup.sh" >/dev/null
else
    echo "install.sh: note: under sudo; bench/seed004.sh creates its virtualenv for $SUDO_USER when first run"
fi

nginx -v
wrk --version 2>&1 | head -1 || true
h2o --version | head -1
