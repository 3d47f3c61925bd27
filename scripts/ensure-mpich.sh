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

"$(dirname "$0")/apt-install.sh" ensure-mpich mpich libmpich-dev

if ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.mpich >/dev/null 2>&1; then
    echo "ensure-mpich: the packages installed but mpicc.mpich/mpiexec.mpich are still missing" >&2
    exit 1
fi
echo "ensure-mpich: installed $(mpichversion 2>/dev/null | head -n 1 || echo MPICH)" >&2
