//! Slices on demand (docs/architecture.md): a rank blocked in an eager-sized `MPI_Send` or
//! an `MPI_PROC_NULL` call does not wait for the slice timer (here 10 s) nor for a
//! computing neighbour (here 1.5 s), and `MPI_PROC_NULL` calls complete when posted: their
//! recorded completions are flagged `inline` (scheduler version 4).

use strobe_tests::run_fixture;

#[test]
fn an_edge_rank_does_not_wait_for_its_computing_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dec.log");
    let log_s = log.display().to_string();
    let r = run_fixture(
        &["-n", "2", "--slice", "10s", "--decision-log", &log_s],
        "wavefront_edge",
        &["1500"],
    );
    r.assert_ok("wavefront_edge");
    let ms: u64 = r
        .stdout
        .split("send_ms=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no send_ms in {:?}", r.stdout));
    // Before: the send waited until rank 1 blocked (1,500 ms), the MPI_PROC_NULL calls each
    // for another slice. A loaded machine delays an early slice by milliseconds, not 1 s.
    assert!(
        ms < 1000,
        "rank 0 waited {ms} ms for its computing neighbour"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let local: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("complete 0#1 ") || l.contains("complete 0#2 "))
        .collect();
    assert_eq!(local.len(), 2, "{text}");
    assert!(local.iter().all(|l| l.ends_with(", inline")), "{local:?}");
}
