//! The Rust API's nonblocking collectives (`Comm::iallreduce`, ...): the `icollectives`
//! fixture checks each against the blocking call bit for bit, polls them with `test_any`
//! under timing noise, and must replay verified with the same output, every rank's count
//! of unsuccessful polls included.

use strobe_tests::replay::{per_rank, record, replay};

#[test]
fn rust_nonblocking_collectives_replay_verified_with_the_same_polls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("icoll.db");
    let env = [("STROBE_FIXTURE_NOISE_US", "300")];
    let rec = record(&db, &["-n", "4"], "icollectives", &["3"], &env);
    assert_eq!(rec.code, 0, "record: {}", rec.stderr);
    assert!(
        rec.stdout.contains("icollectives ok ranks=4 reps=3"),
        "{}",
        rec.stdout
    );
    let rep = replay(&db, &[], &env);
    assert_eq!(rep.code, 0, "replay: {}", rep.stderr);
    assert!(
        rep.stderr.contains("strobe: replay matched the recording"),
        "{}",
        rep.stderr
    );
    assert_eq!(per_rank(&rec.stdout), per_rank(&rep.stdout));
}
