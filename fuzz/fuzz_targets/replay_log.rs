//! The replay-log decoder (`recorder/src/replay_log.rs`): the previous release's
//! recording with one posting, outcome or blocked chunk replaced by the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_recorder::Recording;

const TEMPLATE: &[u8] = include_bytes!("../../tests/data/v0.1-token_ring.db");

fuzz_target!(|data: &[u8]| {
    let Some((&which, blob)) = data.split_first() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fuzz.db");
    std::fs::write(&p, TEMPLATE).unwrap();
    {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute(
            "UPDATE replay_log SET data = ?1 WHERE stream = ?2 AND rank = ?3 AND chunk = 0",
            rusqlite::params![blob, (which % 3) as i64, ((which / 3) % 4) as i64],
        )
        .unwrap();
    }
    if let Ok(rec) = Recording::open(&p) {
        let _ = rec.replay_log();
    }
});
