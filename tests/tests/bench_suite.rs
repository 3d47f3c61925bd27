//! `strobe bench --quick` as a smoke test: the whole suite runs end to end (building the C
//! fixtures with `strobe mpicc` and `mpicc.mpich`, every section, the Markdown and the
//! PNGs). Its figures are not asserted: this machine is noisy and CI shares it.

use std::process::Command;

use strobe_tests::strobe;

#[test]
fn the_quick_suite_runs_every_section_and_writes_its_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench.md");
    let run = Command::new(strobe())
        .args([
            "bench", "--quick", "--rounds", "1", "--ranks", "2,4", "--out",
        ])
        .arg(&out)
        .output()
        .expect("run strobe bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "strobe bench --quick failed:\n{stderr}"
    );
    let md = std::fs::read_to_string(&out).expect("the report was written");
    for heading in [
        "## Targets",
        "## Latency and bandwidth",
        "## Parameterized LogP",
        "## Collectives",
        "## The papers' experiments",
        "### SWEEP3D-like wavefront",
        "### CoMet kernels",
        "## Recording and replay",
        "## Scaling on one host",
        "## Debugging tools",
        "## Scale: token_ring recorded with everything on",
        "## Polling under load",
        "## Across hosts (2 test hosts)",
        "## RDMA (verbs)",
        "## Commands",
    ] {
        assert!(md.contains(heading), "no {heading:?} in the report:\n{md}");
    }
    // No RDMA device in CI: the verbs section says so instead of measuring.
    if std::fs::read_dir("/sys/class/infiniband").map_or(true, |mut d| d.next().is_none()) {
        assert!(
            md.contains("## RDMA (verbs)\n\nskipped: no RDMA device\n"),
            "{md}"
        );
    }
    // Every configuration ran: a failure would be listed under Notes.
    assert!(!md.contains(" failed: "), "a configuration failed:\n{md}");
    // Figures were measured, not left empty, for the targets that need both sides.
    let targets = md
        .split("## Targets")
        .nth(1)
        .expect("targets")
        .split("\n## ")
        .next()
        .unwrap();
    assert!(
        targets.matches("| met |").count() + targets.matches("| **missed** |").count() >= 10,
        "{targets}"
    );
    for png in [
        "bench-quick-latency.png",
        "bench-quick-bw_uni.png",
        "bench-quick-slowdown.png",
    ] {
        let p = dir.path().join(png);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(&bytes[1..4], b"PNG", "{png} is not a PNG");
    }
}
