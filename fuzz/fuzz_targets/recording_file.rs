//! Any bytes given as a recording: `Recording::open` and every reader query answer with
//! a value or an error (never a panic), and a value is never impossible (the validation
//! of `recorder/src/recording/validate.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_recorder::recording::validate;
use strobe_recorder::Recording;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fuzz.db");
    std::fs::write(&p, data).unwrap();
    let Ok(rec) = Recording::open(&p) else { return };
    let j = rec.job();
    assert!(j.ranks >= 1 && j.ranks <= validate::MAX_RANKS);
    assert!(j.nodes >= 1 && j.nodes <= j.ranks);
    let _ = rec.stats(None);
    let last = rec.last_slice().min(1000);
    if let Ok(rows) = rec.slices(1..=last) {
        for r in rows {
            assert!(r.n_descriptors >= 0);
            let _ = rec.decisions(r.slice);
        }
    }
    let _ = rec.replay_log();
});
