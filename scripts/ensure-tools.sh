#!/usr/bin/env bash
# Installs the Debian packages the README tour and the test suite use, when missing:
#   sqlite3  the tour queries recordings with it (docs/recording.md)
#   tmux     the terminal UI's end-to-end tests drive the real binary in it
#   gcc      `strobe mpicc` compiles C programs with cc
# MPICH has its own script (scripts/ensure-mpich.sh): only the tests and the benchmarks
# compare against it. Prints what it could not do and exits non-zero.
set -euo pipefail

need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
[ ${#need[@]} -eq 0 ] && exit 0

echo "ensure-tools: installing ${need[*]}" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-tools: apt-get is not available; install ${need[*]} by hand" >&2
    exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "ensure-tools: not root and no password-less sudo; run as root:" \
            "apt-get install ${need[*]}" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
log=$(mktemp)
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends "${need[@]}" >"$log" 2>&1; then
    # The package lists may be missing or stale (fresh machine): update once and retry.
    "${SUDO[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >>"$log" 2>&1 || true
    if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends "${need[@]}" >>"$log" 2>&1; then
        echo "ensure-tools: apt-get could not install ${need[*]}; its log:" >&2
        tail -n 30 "$log" >&2
        rm -f "$log"
        exit 1
    fi
fi
rm -f "$log"
