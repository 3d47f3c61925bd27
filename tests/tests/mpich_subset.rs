//! A representative subset of MPICH's own test suite (`test/mpi` of Debian's `mpich`
//! source package), run by `scripts/mpich-testsuite.sh` exactly as the full measurement
//! runs it: each test is built with `strobe mpicc`, run with `strobe run`, judged as
//! MPICH's runtests judges it, then recorded and replayed, and the replay must verify
//! with the same output. The subset covers what issue 13 added (persistent, generalized
//! and matched-probe requests, cancelled sends, Info, attributes, error handlers,
//! datatypes, Comm_idup, persistent collectives, topologies, sessions), some Fortran tests
//! of the `f77/` and `f90/` testlists (built with `strobe mpifort`) and some of what worked
//! before.
//!
//! The MPICH source is fetched at run time (`apt-get source`, never committed); when the
//! archive cannot be reached the test says so and skips. The full suite runs by hand:
//! `scripts/mpich-testsuite.sh` (docs/mpi-support.md has its last table).

use std::path::Path;
use std::process::Command;

use strobe_tests::{strobe, target_dir};

/// Tests of the subset (names of MPICH's testlists; every entry of each name is run).
const SUBSET: &[&str] = &[
    // pt2pt
    "sendrecv2",
    "anyall",
    "bsend3",
    "bsend4",
    "isendrecv",
    "isendrecv_replace",
    "rqstatus",
    "rqfreeb",
    "greq1",
    // Not scancel/pscancel: they require MPI_Cancel of a small MPI_Isend to succeed, and a
    // send the eager protocol completed at an earlier slice boundary can no longer be
    // cancelled (MPI allows a cancel to fail; docs/mpi-support.md). Synchronous sends are
    // never eager: their cancel is checked here.
    "issendselfcancel",
    "inactivereq",
    "mprobe",
    // datatype
    "structpack2",
    "lbub",
    "subarray_pack",
    // attr, errhan, init
    "keyval_double_free",
    "attrorder",
    "adderr",
    "commcall",
    "attrend2",
    "attrself",
    // mpi13b: datatype contents, external32, darray, freed keyvals (C) and the Fortran
    // testlists (f77/, f90/: keyvals with Fortran callbacks, generalized requests,
    // MPI_TYPE_GET_CONTENTS, MPI_SIZEOF).
    "contents",
    "simple_pack_external",
    "darray_pack",
    "fkeyval",
    "typeattrf",
    "greqf90",
    "typecntsf",
    "sizeof",
    // issue 13, second half: Comm_idup overlapping on pairs of communicators, persistent
    // collectives started in different orders, a neighbour collective on a periodic ring
    // of 1 and 2 ranks, a session's mpi://SELF communicator (no MPI_Init).
    "comm_idup_overlap",
    "p_order",
    "ring_neighbor_alltoall",
    "session_self",
];

#[test]
fn mpich_subset_passes_and_replays_verified() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mpich-testsuite.sh");
    let build = target_dir().join("mpich-subset");
    let out = build.join("results.md");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .args(["--jobs", "2", "--timeout", "120", "--out"])
        .arg(&out)
        .env("STROBE", strobe())
        .env("STROBE_MPICH_BUILD", &build);
    for t in SUBSET {
        cmd.args(["--test", t]);
    }
    let run = cmd.output().expect("run scripts/mpich-testsuite.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if run.status.code() == Some(3) {
        eprintln!("SKIPPED: MPICH's source is unreachable (apt-get source mpich): {stderr}");
        return;
    }
    assert!(
        run.status.success(),
        "the script failed ({:?}):\n{stdout}\n{stderr}",
        run.status
    );
    let results = std::fs::read_to_string(build.join("results.tsv")).expect("results.tsv");
    let mut seen = Vec::new();
    let mut failed = Vec::new();
    for line in results.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert!(f.len() >= 7, "malformed result line {line:?}");
        seen.push(f[1].to_string());
        if f[5] != "pass" || f[6] != "verified" {
            failed.push(line.to_string());
        }
    }
    for t in SUBSET {
        assert!(seen.iter().any(|s| s == t), "{t} was not run:\n{stdout}");
    }
    assert!(
        failed.is_empty(),
        "entries that did not pass and replay verified:\n{}",
        failed.join("\n")
    );
}
