#!/usr/bin/env bash
# Installs the Debian packages the README tour and the test suite use, when missing:
#   sqlite3  the tour queries recordings with it (docs/recording.md)
#   tmux     the terminal UI's end-to-end tests drive the real binary in it
#   gcc      `strobe mpicc` compiles C programs with cc
#   gfortran `strobe mpifort` compiles Fortran programs (tests/tests/fortran.rs)
#   gdb      `strobe replay --gdb RANK` attaches it to a held rank (tests/tests/replay_gdb.rs)
#   strace   which prctl calls ranks make (tests/tests/neighbours.rs)
#   iproute2, util-linux  network/PID namespaces for test hosts (scripts/hosts.sh)
#   slurm-wlm, slurm-client, munge  a Slurm cluster for the srun launcher's tests
#            (scripts/slurm.sh; tests/tests/launchers.rs)
#   libibverbs1, ibverbs-providers, rdma-core  the verbs transport's provider loads
#            libibverbs.so.1 at run time (no device here: its tests check listing none)
#   libibverbs-dev  <infiniband/verbs.h>: the provider's hand-written declarations are
#            checked against it (runtime/src/transport/verbs/ibverbs_layout_tests.rs)
#   ibverbs-utils  ibv_devinfo, which scripts/verbs-check.sh prints on a host with a device
# MPICH has its own script (scripts/ensure-mpich.sh): only the tests and the benchmarks
# compare against it. Prints what it could not do and exits non-zero.
set -euo pipefail

need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v gfortran >/dev/null 2>&1 || need+=(gfortran)
command -v gdb >/dev/null 2>&1 || need+=(gdb)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v srun >/dev/null 2>&1 || need+=(slurm-client)
command -v munged >/dev/null 2>&1 || need+=(munge)
for pkg in libibverbs1 ibverbs-providers rdma-core libibverbs-dev ibverbs-utils; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0

echo "ensure-tools: installing ${need[*]}" >&2
exec "$(dirname "$0")/apt-install.sh" ensure-tools "${need[@]}"
