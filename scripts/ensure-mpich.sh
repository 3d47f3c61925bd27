#!/usr/bin/env bash
# Makes sure Debian's MPICH (mpicc.mpich, mpiexec.mpich) is installed: the C fixtures are
# standard MPI programs, and the proof of that is that they build and give the same verdict
# under another implementation. Installs the `mpich` and `libmpich-dev` packages with
# apt-get when `mpicc.mpich` is missing; prints what it could not do and exits non-zero.
#
# We always call MPICH by its Debian alternative-free names (mpicc.mpich, mpiexec.mpich):
# plain `mpicc`/`mpiexec` may be strobe's own wrapper on a machine where strobe is installed.
set -euo pipefail

if command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1; then
    exit 0
fi

echo "ensure-mpich: mpicc.mpich not found; installing Debian's mpich and libmpich-dev" >&2

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-mpich: apt-get is not available on this machine; install MPICH by hand" \
        "(it must provide mpicc.mpich and mpiexec.mpich)" >&2
    exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "ensure-mpich: not root and no password-less sudo; run as root:" \
            "apt-get install mpich libmpich-dev" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Several builds may share the machine: wait for the dpkg lock instead of failing on it.
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends mpich libmpich-dev \
    >/tmp/ensure-mpich.$$.log 2>&1; then
    # The package lists may be missing or stale (fresh machine): update once and retry.
    "${SUDO[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >>/tmp/ensure-mpich.$$.log 2>&1 || true
    if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends mpich libmpich-dev \
        >>/tmp/ensure-mpich.$$.log 2>&1; then
        echo "ensure-mpich: apt-get could not install mpich libmpich-dev; its log:" >&2
        tail -n 30 /tmp/ensure-mpich.$$.log >&2
        rm -f /tmp/ensure-mpich.$$.log
        exit 1
    fi
fi
rm -f /tmp/ensure-mpich.$$.log

if ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.mpich >/dev/null 2>&1; then
    echo "ensure-mpich: the packages installed but mpicc.mpich/mpiexec.mpich are still missing" >&2
    exit 1
fi
echo "ensure-mpich: installed $(mpichversion 2>/dev/null | head -n 1 || echo MPICH)" >&2
