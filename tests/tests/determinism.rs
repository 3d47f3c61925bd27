//! The scheduler's decisions for a program with a fixed communication pattern are the same
//! in every run, slice by slice, once slices are counted logically (slices in which nothing
//! was decided are dropped; random timing noise only changes how many of those there are).
//!
//! Send completions are left out of the comparison (strobe-perf, the eager protocol): a
//! small standard-mode send completes eagerly in the slice it is exchanged in when its
//! receive is not posted yet, and at its match otherwise, so *when* a send completes
//! depends on timing (it is recorded and replayed like every decision). Everything else,
//! matches, data movement, receive completions and collectives, must be identical.

use strobe_tests::run_fixture_env;

/// The sends of a decision log: `rank#seq` of every matched send.
fn sends(log: &str) -> std::collections::BTreeSet<String> {
    log.lines()
        .filter_map(|l| l.trim().strip_prefix("match send "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Whether a decision line completes a send (see the module documentation).
fn completes_a_send(line: &str, sends: &std::collections::BTreeSet<String>) -> bool {
    line.strip_prefix("complete ")
        .and_then(|rest| rest.split_whitespace().next())
        .is_some_and(|d| sends.contains(d))
}

/// The non-empty slices of a decision log, without slice numbers or timings.
fn logical_slices(log: &str) -> Vec<Vec<String>> {
    let sends = sends(log);
    let mut slices = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for line in log.lines() {
        if line.starts_with("slice ") {
            if let Some(c) = cur.take() {
                if !c.is_empty() {
                    slices.push(c);
                }
            }
            cur = Some(Vec::new());
        } else if let Some(c) = cur.as_mut() {
            let l = line.trim();
            if !l.starts_with("post ") && !completes_a_send(l, &sends) {
                c.push(l.to_string());
            }
        }
    }
    if let Some(c) = cur {
        if !c.is_empty() {
            slices.push(c);
        }
    }
    slices
}

#[test]
fn token_ring_decisions_are_identical_under_timing_noise() {
    let dir = std::env::temp_dir().join(format!("strobe-determinism-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut reference: Option<Vec<Vec<String>>> = None;
    let mut physical = Vec::new();
    // The node count changes nothing in the decisions either: every node runs a replica
    // of the scheduler over the same global input.
    for (i, (noise, policy, slice, nodes)) in [
        ("0", "adaptive", "500us", "1"),
        ("300", "adaptive", "500us", "1"),
        ("1000", "adaptive", "100us", "1"),
        ("300", "fixed", "200us", "1"),
        ("2000", "adaptive", "1ms", "1"),
        ("700", "fixed", "50us", "1"),
        ("500", "adaptive", "500us", "2"),
        ("1500", "fixed", "100us", "3"),
        ("100", "adaptive", "50us", "4"),
        ("3000", "adaptive", "2ms", "2"),
    ]
    .into_iter()
    .enumerate()
    {
        let log = dir.join(format!("run{i}.log"));
        let r = run_fixture_env(
            &[
                "-n",
                "4",
                "--strobe",
                policy,
                "--slice",
                slice,
                "--decision-log",
                log.to_str().unwrap(),
            ],
            "token_ring",
            &[],
            &[("STROBE_FIXTURE_NOISE_US", noise)],
        );
        r.assert_ok("token_ring");
        let text = std::fs::read_to_string(&log).unwrap();
        physical.push(text.lines().filter(|l| l.starts_with("slice ")).count());
        let slices = logical_slices(&text);
        assert!(
            slices.len() > 50,
            "too few logical slices: {}",
            slices.len()
        );
        match &reference {
            None => reference = Some(slices),
            Some(want) => {
                let first_diff = want.iter().zip(&slices).position(|(a, b)| a != b);
                assert!(
                    first_diff.is_none() && want.len() == slices.len(),
                    "run {i} (noise {noise} us, {policy} {slice}, {nodes} nodes) differs at logical slice {first_diff:?}: {:?} vs {:?}",
                    first_diff.map(|d| &want[d]),
                    first_diff.map(|d| &slices[d])
                );
            }
        }
    }
    // The noise did change the physical schedule: the runs are not trivially equal.
    physical.sort();
    physical.dedup();
    assert!(
        physical.len() > 1,
        "every run had the same number of slices: {physical:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
