#!/usr/bin/env bash
# apt-install.sh WHO PKG...: installs Debian packages for the project's scripts (as root,
# or with password-less sudo), updating the package lists once if the first attempt fails
# (a fresh machine has none). WHO names the calling script in messages. Exits non-zero
# with the reason (and apt-get's log) when it cannot.
set -euo pipefail
who=$1
shift
if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: apt-get is not available on this machine; install $* by hand" >&2
    exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "$who: not root and no password-less sudo; run as root: apt-get install $*" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# Several builds may share the machine: wait for the dpkg lock instead of failing on it.
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends "$@" >"$log" 2>&1; then
    "${SUDO[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >>"$log" 2>&1 || true
    if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends "$@" >>"$log" 2>&1; then
        echo "$who: apt-get could not install $*; its log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
fi
