#!/usr/bin/env bash
# MPICH's own test suite (test/mpi of Debian's `mpich` source package) against strobe.
#
#   scripts/mpich-testsuite.sh [--list L]... [--test NAME]... [--jobs J] [--timeout S]
#                              [--out FILE] [--no-replay]
#
# For every entry of the testlists pt2pt coll comm group datatype attr init errhan topo and of
# the Fortran ones f77 and f90 (their subdirectories; or the --list ones, e.g. `--list f77`
# or `--list f90/datatype`): build the test with `strobe mpicc` (Fortran: `strobe mpifort`,
# as MPICH's Makefile.am builds it), run it with `strobe run -n N` (N from
# the testlist line), judge it as MPICH's runtests does (every output line is "No Errors"
# or "Test Passed", at least one "No Errors", exit status 0; `resultTest=TestStatus` and
# `TestErrFatal` entries must instead exit non-zero), and for every passing entry
# `strobe record` it and `strobe replay` the recording: the replay must verify every slice
# and print exactly what the recorded run printed, with the same exit status.
#
# Skipped entries (listed as such, never counted as passing): more than 8 ranks,
# `@largetest@` entries (need > 4 GB per process), and MPICH tuning variants (`env=MPIR_*`
# lines: the same test with an MPICH-internal setting).
#
# MPICH's code is third-party and never enters the repository: `apt-get source
# --download-only mpich` fetches it at run time into $STROBE_MPICH_SRC (default
# ~/.cache/strobe/mpich-src; a `deb-src` line is added under /etc/apt/sources.list.d when
# missing and we are root) and only test/mpi is unpacked (Debian's patches do not touch
# it). Tests are compiled directly (no autoconf: its MPI feature probes take minutes and
# the per-program flags are few), with a generated `mpitestconf.h` describing this libc.
#
# Output: a table (list, test, ranks, args, build, run, replay, cause) in --out (default
# $STROBE_MPICH_BUILD/results.md) and one summary line per list plus a total on stdout.
# Exit status: 0 when it ran (whatever the pass count), 2 on a setup failure, 3 when
# MPICH's source cannot be fetched (no apt, no network: tests skip on it).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=${STROBE_MPICH_SRC:-$HOME/.cache/strobe/mpich-src}
BUILD=${STROBE_MPICH_BUILD:-$HOME/.cache/strobe/mpich-build}
STROBE=${STROBE:-$here/target/release/strobe}
# Absolute: the entries run from their own directories.
STROBE=$(realpath "$STROBE")
# The eight C lists of issue 13, topo (topologies and neighbour collectives, reported on
# its own line), then the Fortran lists.
LISTS_DEFAULT="pt2pt coll comm group datatype attr init errhan topo f77 f90"
MAX_RANKS=8

die() { echo "mpich-testsuite: $*" >&2; exit 2; }
unreachable() { echo "mpich-testsuite: $*" >&2; exit 3; }

# ---------------------------------------------------------------- one entry (a worker)
# Judge an output file as MPICH's runtests does. $1 output, $2 exit status, $3 resultTest.
judge() {
    local out=$1 rc=$2 kind=$3
    case $kind in
        TestStatus | TestErrFatal)
            [ "$rc" != 0 ] && return 0
            echo "exit 0 but $kind expects a non-zero exit"
            return 1
            ;;
    esac
    local bad
    # strobe's own correctness-check lines ("strobe: check: ...", docs/debugging.md) are
    # strobe's diagnostics about the program, not the program's output, as mpiexec's own
    # messages would not be under MPICH: they do not fail an entry (the table lists them).
    bad=$(grep -Ev '^\s*(No [Ee]rrors|Test Passed)\s*$|^\s*$|^strobe: (check: |[0-9]+ correctness check finding)' "$out" | head -1 | cut -c1-160)
    if [ -n "$bad" ]; then
        echo "exit $rc: $bad"
        return 1
    fi
    if ! grep -Eq '^\s*No [Ee]rrors\s*$' "$out"; then
        echo "exit $rc: no 'No Errors' line"
        return 1
    fi
    if [ "$rc" != 0 ]; then
        echo "exit $rc"
        return 1
    fi
    return 0
}

# Why a compilation failed: the MPI names it lacks, else its first error line.
build_cause() {
    local log=$1 missing
    missing=$(grep -oE "(undefined reference to|undeclared|implicit declaration of function) [‘'\`]?P?MPIX?_[A-Za-z0-9_]+" "$log" \
        | grep -oE 'P?MPIX?_[A-Za-z0-9_]+' | sed 's/^PMPI_/MPI_/' | sort -u | tr '\n' ' ')
    missing=${missing%% }
    if [ -z "$missing" ]; then
        missing=$(grep -oE "[‘'][P]?MPIX?_[A-Za-z0-9_]+[’'] undeclared" "$log" \
            | grep -oE 'MPIX?_[A-Za-z0-9_]+' | sort -u | tr '\n' ' ')
        missing=${missing%% }
    fi
    if [ -z "$missing" ] && grep -qE 'undefined reference to .DTPI?_' "$log"; then
        missing="(MPICH's dtpools library: $(ls "$BUILD"/obj/dtpools*.log 2>/dev/null | xargs -r grep -ohE "[‘']MPIX?_[A-Za-z0-9_]+[’'] undeclared" | grep -oE 'MPIX?_[A-Za-z0-9_]+' | sort -u | tr '\n' ' '))"
    fi
    if [ -z "$missing" ]; then
        # gfortran: an unknown routine is a link error on `mpi_x_`, an unknown constant a
        # symbol without an IMPLICIT type (the tests use IMPLICIT NONE).
        missing=$(grep -oE "(undefined reference to [\`']p?mpi_[a-z0-9_]+_'|Symbol ['‘]mpi_[a-z0-9_]+['’] at \(1\) has no IMPLICIT type)" "$log" \
            | grep -oE "mpi_[a-z0-9_]+['’]" | sed -E "s/_?['’]$//" | tr a-z A-Z | sort -u | tr '\n' ' ')
        missing=${missing%% }
    fi
    if [ -n "$missing" ]; then
        echo "build: missing $missing"
    else
        echo "build: $(grep -m1 -E 'error|Error' "$log" | cut -c1-160)"
    fi
}

# Compile Fortran test $2 of list $1 (f77/X or f90/X) as MPICH's Makefile.am does: the
# sources of `NAME_SOURCES` (else NAME.f / NAME.f90), C ones with `strobe mpicc`, Fortran
# ones with `strobe mpifort -I.` (the directory's configured `*.h` headers), linked with
# MPICH's Fortran test utilities (util/mtest_f77.f or mtest_f90.f90) and, for
# `NAME_LDADD = $(mtest_c_objects)`, its C ones.
build_fortran_test() {
    local list=$1 name=$2 dir=$SRC_T/$1 bin=$BUILD/$1/$2 log=$BUILD/$1/$2.build.log
    local am=$dir/Makefile.am srcs ext=f lang=${1%%/*} objs=() s o
    [ "$lang" = f90 ] && ext=f90
    srcs=$(sed -n "s/^${name}_SOURCES *= *//p" "$am" | head -1)
    [ -n "$srcs" ] || srcs=$name.$ext
    local extra=("$BUILD/libmtest_$lang.a")
    # `NAME_LDADD = $(mtest_c_objects)`, or a directory of C tests (f90/f90types includes
    # Makefile_single.mtest): MPICH's C test utilities.
    if sed -n "s/^${name}_LDADD *= *//p" "$am" | grep -q mtest_c_objects || grep -q 'Makefile_single.mtest' "$am"; then
        extra+=("$BUILD/libmtest.a")
    fi
    : >"$log"
    for s in $srcs; do
        o=$BUILD/$list/$name.${s%.*}.o
        case $s in
            # A copy in $BUILD/LANG/DIR, so that its "../../include/mpitestconf.h" is ours.
            *.c) cp "$dir/$s" "$BUILD/$list/$s" &&
                "$STROBE" mpicc -w -O1 -c -I"$BUILD/include" -I"$SRC_T/include" "$BUILD/$list/$s" -o "$o" >>"$log" 2>&1 ;;
            *) (cd "$BUILD/$list" && "$STROBE" mpifort -w -O1 -c -I"$BUILD/$list" -I"$dir" "$dir/$s" -o "$o") >>"$log" 2>&1 ;;
        esac || { rm -f "$bin"; return 1; }
        objs+=("$o")
    done
    if ! "$STROBE" mpifort -w "${objs[@]}" "${extra[@]}" -lm -o "$bin" >>"$log" 2>&1; then
        rm -f "$bin"
        return 1
    fi
}

# Compile test $2 of list $1 (its Makefile.am gives extra sources and -D flags).
build_test() {
    local list=$1 name=$2 dir=$SRC_T/$1 bin=$BUILD/$1/$2
    local am=$dir/Makefile.am srcs flags libs log=$BUILD/$1/$2.build.log
    # Entries of one test with other rank counts build the same binary: one at a time.
    exec {lock}>"$bin.lock"
    flock "$lock"
    [ -x "$bin" ] && [ "$bin" -nt "$STROBE_LIB" ] && return 0
    case $list in f77/* | f90/*) build_fortran_test "$list" "$name"; return ;; esac
    srcs=$(sed -n "s/^${name}_SOURCES *= *//p" "$am" | head -1)
    [ -n "$srcs" ] || srcs=$name.c
    flags=$(sed -n "s/^${name}_CPPFLAGS *= *//p" "$am" | head -1 | grep -oE -- '-D[A-Za-z0-9_=]+' | tr '\n' ' ')
    libs=$(sed -n "s/^${name}_LDADD *= *//p" "$am" | head -1 | grep -oE -- '-l[a-z]+' | tr '\n' ' ')
    local paths=() s
    for s in $srcs; do paths+=("$dir/$s"); done
    # shellcheck disable=SC2086
    if ! "$STROBE" mpicc -w -O1 -ffunction-sections -Wl,--gc-sections -I"$BUILD/include" -I"$BUILD/include/dtp" -I"$SRC_T/include" -I"$SRC_T/dtpools/include" \
        $flags "${paths[@]}" "$BUILD/libmtest.a" $libs -lm -o "$bin" >"$log" 2>&1; then
        rm -f "$bin"
        return 1
    fi
}

# The result line of one entry: list, name, ranks, args, build, run, replay, cause.
worker() {
    local line=$1
    local list name ranks rest kind=default limit=$TIMEOUT args=() kv
    read -r list name ranks rest <<<"$line"
    for kv in $rest; do
        case $kv in
            arg=*) args+=("${kv#arg=}") ;;
            resultTest=*) kind=${kv#resultTest=} ;;
            # MPICH's runtests uses it as the job's time limit (init/timeout relies on it).
            timeLimit=*) limit=${kv#timeLimit=} ;;
        esac
    done
    local shown="${args[*]:-}" tag tmp
    tag=$(echo "$list.$name.$ranks.$shown" | tr -c 'A-Za-z0-9._\n-' '_')
    tmp=$BUILD/runs/$tag
    mkdir -p "$tmp"
    local row="$list	$name	$ranks	$shown"
    if ! build_test "$list" "$name"; then
        echo "$row	no	-	-	$(build_cause "$BUILD/$list/$name.build.log")"
        return
    fi
    local bin=$BUILD/$list/$name rc cause
    (cd "$BUILD/$list" && "$STROBE" run -n "$ranks" --timeout "${limit}s" "$bin" "${args[@]}" \
        >"$tmp/run.out" 2>&1)
    rc=$?
    if ! cause=$(judge "$tmp/run.out" "$rc" "$kind"); then
        grep -q 'timed out\|timeout' "$tmp/run.out" && cause="timeout ($limit s): $cause"
        grep -qi 'deadlock' "$tmp/run.out" && cause="deadlock: $(grep -m1 -i deadlock "$tmp/run.out" | cut -c1-140)"
        echo "$row	yes	FAIL	-	$cause"
        return
    fi
    if [ "$REPLAY" = 0 ]; then
        echo "$row	yes	pass	-	"
        return
    fi
    rm -f "$tmp/rec.db"
    (cd "$BUILD/$list" && "$STROBE" record -o "$tmp/rec.db" -n "$ranks" --timeout "${limit}s" \
        "$bin" "${args[@]}" 2>&1 | grep -v '^strobe: recorded ' >"$tmp/rec.out")
    local rrc=${PIPESTATUS[0]}
    if ! cause=$(judge "$tmp/rec.out" "$rrc" "$kind"); then
        echo "$row	yes	pass	FAIL	record: $cause"
        return
    fi
    (cd "$BUILD/$list" && "$STROBE" replay --yes --timeout "${limit}s" "$tmp/rec.db" >"$tmp/replay.out" 2>&1)
    local prc=$?
    # `strobe replay` exits 0 when the replay matched the recording, whatever the job's
    # own end (an MPI_Abort replays as an MPI_Abort). The ranks write to the terminal
    # directly, so lines of different ranks interleave as the OS schedules them: the
    # program's outputs (strobe's own lines aside) are compared as multisets of lines.
    if [ "$prc" != 0 ] || ! grep -q '^strobe: replay matched the recording' "$tmp/replay.out"; then
        echo "$row	yes	pass	FAIL	replay exit $prc: $(grep -m1 '^strobe' "$tmp/replay.out" | cut -c1-140)"
    elif ! cmp -s <(grep -v '^strobe: ' "$tmp/rec.out" | sort) <(grep -v '^strobe: ' "$tmp/replay.out" | sort); then
        echo "$row	yes	pass	FAIL	replay output differs from the recorded run's"
    else
        echo "$row	yes	pass	verified	"
        rm -rf "$tmp"
    fi
}

if [ "${1:-}" = "--worker" ]; then
    worker "$2"
    exit 0
fi

# ---------------------------------------------------------------- options
LISTS=()
TESTS=()
JOBS=1
TIMEOUT=${STROBE_MPICH_TIMEOUT:-120}
REPLAY=1
OUT=
while [ $# -gt 0 ]; do
    case $1 in
        --list) LISTS+=("$2"); shift ;;
        --test) TESTS+=("$2"); shift ;;
        --jobs) JOBS=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --out) OUT=$2; shift ;;
        --no-replay) REPLAY=0 ;;
        -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
[ ${#LISTS[@]} -gt 0 ] || read -r -a LISTS <<<"$LISTS_DEFAULT"
GROUPS_RUN=("${LISTS[@]}")
OUT=${OUT:-$BUILD/results.md}

# ---------------------------------------------------------------- fetch
fetch() {
    local t
    t=$(find "$SRC" -maxdepth 4 -path '*/test/mpi/runtests.in' 2>/dev/null | head -1)
    if [ -n "$t" ]; then
        dirname "$t"
        return
    fi
    command -v apt-get >/dev/null || unreachable "apt-get not found: cannot fetch MPICH's source"
    if ! grep -rqs '^\(deb-src\|Types:.*deb-src\)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        [ "$(id -u)" = 0 ] || die "no deb-src line in /etc/apt: add one (as root) or set STROBE_MPICH_SRC"
        cat >/etc/apt/sources.list.d/strobe-deb-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt-get update -qq >&2 || unreachable "apt-get update failed"
    fi
    mkdir -p "$SRC"
    (cd "$SRC" && apt-get source --download-only mpich >&2) || unreachable "apt-get source mpich failed (is the network or the archive reachable?)"
    local orig
    orig=$(ls "$SRC"/mpich_*.orig.tar.* | head -1)
    [ -n "$orig" ] || die "no mpich orig tarball in $SRC"
    (cd "$SRC" && tar xf "$orig" --wildcards '*/test/mpi') || die "could not unpack test/mpi from $orig"
    t=$(find "$SRC" -maxdepth 4 -path '*/test/mpi/runtests.in' | head -1)
    [ -n "$t" ] || die "test/mpi not found after unpacking"
    dirname "$t"
}
SRC_T=$(fetch) || exit $?

# `f77` and `f90` stand for the directories their testlist names; the `@xdir@` ones
# (spawn, io, rma: configure-optional, and outside the C lists measured here too) and
# `@ALLOCMEMF@`-style entries (configure-chosen programs) are left out.
expanded=()
for list in "${LISTS[@]}"; do
    case $list in
        f77 | f90)
            for sub in $(grep -vE '^\s*(#|@|$)' "$SRC_T/$list/testlist.in"); do expanded+=("$list/$sub"); done
            ;;
        *) expanded+=("$list") ;;
    esac
done
LISTS=("${expanded[@]}")

# ---------------------------------------------------------------- strobe
if [ ! -x "$STROBE" ]; then
    echo "mpich-testsuite: building strobe (release)" >&2
    (cd "$here" && cargo build --release -p strobe -p strobe-mpi >&2) || die "cargo build failed"
fi
STROBE_LIB=$(dirname "$STROBE")/libmpi.so
[ -f "$STROBE_LIB" ] || die "no libmpi.so next to $STROBE (build strobe-mpi)"

# ---------------------------------------------------------------- the test library
mkdir -p "$BUILD/include/dtp" "$BUILD/obj" "$BUILD/runs"
# What MPICH's configure finds on a glibc/gcc x86_64 system (only libc and compiler facts).
cat >"$BUILD/include/mpitestconf.h" <<'EOF'
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define F77_NAME_LOWER_USCORE 1
#define HAVE_DLFCN_H 1
#define HAVE_DOUBLE__COMPLEX 1
#define HAVE_FLOAT__COMPLEX 1
#define HAVE_GETRUSAGE 1
#define HAVE_INTTYPES_H 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_DOUBLE__COMPLEX 1
#define HAVE_LONG_LONG 1
#define HAVE_MEMORY_H 1
#define HAVE_PTHREAD_H 1
#define HAVE_STDARG_H 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRDUP 1
#define HAVE_STRINGS_H 1
#define HAVE_STRING_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_UNISTD_H 1
#define HAVE_USLEEP 1
#define HAVE__BOOL 1
#define POINTERINT_t long
#define SIZEOF_INT 4
#define SIZEOF_LONG 8
#define SIZEOF_LONG_LONG 8
#define SIZEOF_SHORT 2
#define SIZEOF_VOID_P 8
#define STDC_HEADERS 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
#define USE_LONG_DOUBLE_COMPLEX 1
#define VERSION "4.0.2"
#endif
EOF
# The one MPI feature probe of MPICH's configure the tests read: whether mpi.h has
# MPI_INTEGER16 (an optional type; strobe declares it MPI_DATATYPE_NULL).
probe=$BUILD/obj/probe_integer16
mkdir -p "$BUILD/obj"
printf '#include <mpi.h>\nint main(void) { MPI_Datatype t = MPI_INTEGER16; return t == 1; }\n' >"$probe.c"
if "$STROBE" mpicc -c "$probe.c" -o "$probe.o" >/dev/null 2>&1; then
    sed -i 's/^#define HAVE_LONG_DOUBLE 1$/#define HAVE_LONG_DOUBLE 1\n#define HAVE_MPI_INTEGER16 1/' "$BUILD/include/mpitestconf.h"
fi
cat >"$BUILD/include/dtpoolsconf.h" <<'EOF'
#define HAVE_INTTYPES_H 1
#define HAVE_LIMITS_H 1
#define HAVE_MEMSET 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRDUP 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define STDC_HEADERS 1
EOF
# util/ and dtpools/ into one archive; a file strobe cannot compile yet is left out (the
# tests that need it then fail to link, and their cause names what is missing).
if [ ! -f "$BUILD/libmtest.a" ] || [ "$STROBE_LIB" -nt "$BUILD/libmtest.a" ]; then
    rm -f "$BUILD/libmtest.a" "$BUILD"/obj/*.o
    for f in "$SRC_T"/util/{mtest.c,mtest_common.c,mtest_single.c,dtypes.c} "$SRC_T"/dtpools/src/*.c; do
        o=$BUILD/obj/$(basename "$f" .c).o
        "$STROBE" mpicc -w -O1 -ffunction-sections -c -I"$BUILD/include" -I"$BUILD/include/dtp" -I"$SRC_T/include" -I"$SRC_T/dtpools/include" \
            "$f" -o "$o" >"$o.log" 2>&1 || echo "mpich-testsuite: $(basename "$f") does not compile yet ($(build_cause "$o.log"))" >&2
    done
    ar rcs "$BUILD/libmtest.a" "$BUILD"/obj/*.o
fi

# ---------------------------------------------------------------- entries
entries=$BUILD/entries.txt
skipped=$BUILD/skipped.txt
: >"$entries"
: >"$skipped"
for list in "${LISTS[@]}"; do
    tl=$SRC_T/$list/testlist
    [ -f "$tl" ] || tl=$tl.in
    [ -f "$tl" ] || die "no testlist for $list"
    mkdir -p "$BUILD/$list"
    grep -vE '^\s*(#|$)' "$tl" | awk '!seen[$0]++' | while read -r name ranks rest; do
        if [ ${#TESTS[@]} -gt 0 ] && [[ " ${TESTS[*]} " != *" $name "* ]]; then continue; fi
        # A whole-line `@NAME@` is a program configure may add (f77/ext's allocmemf).
        if [[ $name =~ ^@[A-Z0-9_]+@$ ]]; then continue; fi
        if [[ $name == @* ]]; then
            echo "$list	${name#@*@}	$ranks	MPICH large test (> 4 GB per process)" >>"$skipped"
        elif [ "$ranks" -gt $MAX_RANKS ]; then
            echo "$list	$name	$ranks	more than $MAX_RANKS ranks" >>"$skipped"
        elif [[ " $rest" == *" env="* ]]; then
            echo "$list	$name	$ranks	MPICH tuning variant ($(echo "$rest" | grep -oE 'env=[^ ]+' | head -1))" >>"$skipped"
        else
            echo "$list $name $ranks $(echo "$rest" | grep -oE '[A-Za-z]+=[^ ]+' | tr '\n' ' ')" >>"$entries"
        fi
    done
done

# Fortran: MPICH's Fortran test utilities, and each directory's configured headers (what
# configure substitutes: the Fortran kinds of MPI_Aint and MPI_Offset on x86_64).
for lang in f77 f90; do
    grep -q "^$lang/" "$entries" || continue
    lib=$BUILD/libmtest_$lang.a src=$SRC_T/util/mtest_$lang.f
    [ "$lang" = f90 ] && src=$src"90"
    if [ ! -f "$lib" ] || [ "$STROBE_LIB" -nt "$lib" ]; then
        mkdir -p "$BUILD/obj/$lang"
        # Without a Fortran compiler the Fortran tests fail to build (their cause says so).
        rm -f "$lib"
        if (cd "$BUILD/obj/$lang" && "$STROBE" mpifort -w -O1 -c "$src" -o mtest_$lang.o >build.log 2>&1); then
            ar rcs "$lib" "$BUILD/obj/$lang/mtest_$lang.o"
        else
            echo "mpich-testsuite: $src does not compile: $(tail -1 "$BUILD/obj/$lang/build.log")" >&2
        fi
    fi
done
for list in "${LISTS[@]}"; do
    case $list in f77/* | f90/*) ;; *) continue ;; esac
    mkdir -p "$BUILD/$list"
    for h in "$SRC_T/$list"/*.h.in "$SRC_T/f77/${list#*/}"/*.h.in; do
        [ -f "$h" ] || continue
        sed -e 's/@F77_MPI_ADDRESS@/integer*8/g' -e 's/@F77_MPI_OFFSET@/integer*8/g' "$h" \
            >"$BUILD/$list/$(basename "$h" .in)"
    done
done

# ---------------------------------------------------------------- run
export SRC_T BUILD STROBE STROBE_LIB TIMEOUT REPLAY
results=$BUILD/results.tsv
tr '\n' '\0' <"$entries" | xargs -0 -P "$JOBS" -I{} bash "$0" --worker {} >"$results.tmp"
# Keep the testlists' order.
awk -F'\t' 'NR==FNR { split($0, a, " "); key = a[1] "\t" a[2] "\t" a[3]; order[key] = order[key] ? order[key] : NR; next }
    { print order[$1 "\t" $2 "\t" $3] "\t" $0 }' "$entries" "$results.tmp" | sort -n -s -k1,1 | cut -f2- >"$results"
rm -f "$results.tmp"

# ---------------------------------------------------------------- report
{
    echo "| list | test | ranks | args | builds | run | replay | cause |"
    echo "|---|---|---|---|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$results"
    echo
    echo "Skipped:"
    echo
    awk -F'\t' '{ printf "- %s/%s (%s ranks): %s\n", $1, $2, $3, $4 }' "$skipped"
} >"$OUT"
summary() {
    awk -F'\t' -v list="$1" '
        list == "" || $1 == list || index($1, list "/") == 1 { n++; if ($5 == "yes") b++; if ($6 == "pass") p++; if ($7 == "verified") v++ }
        END { printf "%d entries, %d build, %d pass (%.1f%%), %d of them replay verified", n, b, p, n ? 100 * p / n : 0, v }' "$results"
}
for list in "${LISTS[@]}"; do
    printf '%-13s %s, %d skipped\n' "$list" "$(summary "$list")" "$(awk -F'\t' -v l="$list" '$1 == l' "$skipped" | wc -l)"
done
for group in "${GROUPS_RUN[@]}"; do
    case $group in f77 | f90) printf '%-13s %s\n' "$group (all)" "$(summary "$group")" ;; esac
done
echo "total         $(summary "")"
echo "table: $OUT"
