//! Payload capture (`--capture-payloads`): what the writer stores, what the reader gives
//! back, and damage refused on open.

use super::*;
use strobe_runtime::engine::Payload;

fn payload(slice: u64, rank: u32, seq: u64, data: &[u8]) -> Payload {
    Payload {
        slice,
        desc: desc(rank, seq, DescKind::Recv, 0),
        completion: Completion {
            request: seq + 1,
            source: 0,
            tag: 7,
            bytes: data.len() as u64,
            value: u64::MAX,
            ..Completion::default()
        },
        matched_send: Some(DescRef { rank: 0, seq }),
        data: data.to_vec(),
    }
}

/// Three slices with rank 1 captured: one payload per slice.
fn captured(path: &std::path::Path) {
    let rec = Recorder::create(path, &job(), RecordOptions::default()).unwrap();
    assert!(rec.capture_payloads(&[5], 2).is_err(), "rank 5 of 2");
    rec.capture_payloads(&[1], 2).unwrap();
    assert!(rec.captures(1) && !rec.captures(0));
    for i in 1..=3 {
        rec.slice(&record(i));
        rec.payload(&payload(i, 1, i, &[i as u8; 8]));
    }
    rec.finish(&report(JobOutcome::Success, 3)).unwrap();
}

#[test]
fn payloads_round_trip_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cap.db");
    captured(&p);
    let r = crate::Recording::open(&p).unwrap();
    assert_eq!(r.captured_ranks().unwrap(), [1]);
    let got = r.payloads(1).unwrap();
    let want: Vec<Payload> = (1..=3)
        .map(|i| {
            let mut p = payload(i, 1, i, &[i as u8; 8]);
            // Addresses and the request id are not stored (they differ between runs).
            p.desc = Descriptor {
                flags: 0,
                request: 0,
                ..p.desc
            };
            p.completion.request = 0;
            p
        })
        .collect();
    assert_eq!(got, want);
    assert!(r.payloads(0).unwrap().is_empty());
    assert_eq!(r.payloads_sent_by(0).unwrap().len(), 3);
}

#[test]
fn a_recording_without_capture_has_no_captured_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.db");
    record_n(&p, 2, RecordOptions::default());
    let r = crate::Recording::open(&p).unwrap();
    assert!(r.captured_ranks().unwrap().is_empty());
    assert!(r.payloads(1).unwrap().is_empty());
}

#[test]
fn damaged_payload_rows_are_refused_on_open() {
    let damage = [
        "UPDATE payload SET kind = 99",
        "UPDATE payload SET rank = 7",
        "UPDATE payload SET error = 42",
        "UPDATE payload SET data = 'text'",
        "UPDATE payload SET data = zeroblob(64)",
        "UPDATE payload SET send_seq = NULL",
        "UPDATE job SET captured_ranks = '[9]'",
        "UPDATE job SET captured_ranks = 'not json'",
    ];
    for sql in damage {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cap.db");
        captured(&p);
        Connection::open(&p).unwrap().execute_batch(sql).unwrap();
        let res = crate::Recording::open(&p).and_then(|r| {
            r.captured_ranks()?;
            r.payloads(1)
        });
        assert!(
            matches!(res, Err(RecordError::Corrupt(_))),
            "{sql}: {:?}",
            res.map(|v| v.len())
        );
    }
}
