#!/usr/bin/env bash
# Creates the Python virtualenv that runs seed 004's API (app.py under gunicorn) and installs
# bench/seed004/requirements.txt (flask, gunicorn, pinned) into it. Idempotent: a venv whose
# stamp matches the requirements is left alone. Prints the venv's path on stdout, last.
#
#   bench/seed004/setup.sh                    # venv at ~/.cache/shoal/seed004-venv
#   SHOAL_VENV=/some/dir bench/seed004/setup.sh
#
# The default lives under the user's cache directory, outside the checkout, so every worktree
# and a fresh CI clone share one venv per machine and `git clean` does not remove it.
# Needs python3 with the venv module (Debian: python3-venv; installed here with apt-get when
# missing and running as root) and PyPI through pip. PYTHON picks the interpreter (python3).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
venv=${SHOAL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal/seed004-venv}
python=${PYTHON:-python3}
req=$here/requirements.txt
stamp=$venv/.shoal-requirements

say() { printf 'seed004/setup.sh: %s\n' "$*" >&2; }

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp" \
    && "$venv/bin/python" -c 'import flask, gunicorn' 2>/dev/null; then
    say "up to date: $venv"
    echo "$venv"
    exit 0
fi

command -v "$python" >/dev/null 2>&1 || { say "no $python found"; exit 1; }
# `python3 -m venv` without ensurepip (Debian without python3-venv) fails half-way; check first.
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing python3-venv"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
    else
        say "$python has no venv/ensurepip module: install python3-venv (as root: bench/install.sh)"
        exit 1
    fi
fi

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $("$python" --version 2>&1)"
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
fi
say "installing $(grep -c '==' "$req") pinned packages"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
"$venv/bin/python" -c 'import flask, gunicorn' 
cp "$req" "$stamp"
say "ready: $venv (gunicorn $("$venv/bin/gunicorn" --version 2>&1 | awk '{print $NF}' | tr -d '()'))"
echo "$venv"
