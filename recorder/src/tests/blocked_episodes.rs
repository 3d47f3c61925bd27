//! The replay log's blocked flips as episodes (format 19, `replay_log` stream 3).

use rusqlite::Connection;

use crate::replay_log::{decode_episodes, ReplayLogEncoder, VarintReader};

fn memory() -> Connection {
    let mut c = Connection::open_in_memory().unwrap();
    crate::migrations::migrate(&mut c).unwrap();
    c.execute_batch("BEGIN").unwrap();
    c
}

/// Rank 0's stream 3 as written so far.
fn stream(c: &Connection) -> Vec<u8> {
    let mut st = c
        .prepare("SELECT data FROM replay_log WHERE stream = 3 AND rank = 0 ORDER BY chunk")
        .unwrap();
    let chunks = st.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
    chunks.flat_map(|c| c.unwrap()).collect()
}

fn decoded(bytes: &[u8]) -> Vec<u64> {
    decode_episodes(&mut VarintReader::new(bytes)).unwrap()
}

#[test]
fn one_slice_episodes_cost_one_byte_and_long_ones_carry_their_length() {
    let c = memory();
    let mut enc = ReplayLogEncoder::default();
    for f in [3, 4, 10, 11, 20, 27] {
        enc.flip_at(0, f);
    }
    enc.flush(&c).unwrap();
    let bytes = stream(&c);
    // (3 << 1 | 1), (6 << 1 | 1), (9 << 1), 7.
    assert_eq!(bytes, vec![7, 13, 18, 7]);
    assert_eq!(decoded(&bytes), vec![3, 4, 10, 11, 20, 27]);
    // No stream 2 any more.
    let old: i64 = c
        .query_row(
            "SELECT count(*) FROM replay_log WHERE stream = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(old, 0);
}

/// The same flips, committed at different slices, give the same bytes (a regenerated
/// recording's commits fall elsewhere than the original's).
fn bytes_with_commits_after(flips: &[u64], commits: &[u64], end: u64) -> Vec<u8> {
    let c = memory();
    let mut enc = ReplayLogEncoder::default();
    for s in 1..=end {
        if flips.contains(&s) {
            enc.flip_at(0, s);
        }
        if commits.contains(&s) {
            enc.flush(&c).unwrap();
        }
    }
    enc.end_episodes();
    enc.flush(&c).unwrap();
    stream(&c)
}

#[test]
fn the_bytes_do_not_depend_on_when_commits_fell() {
    let flips = [2, 3, 5, 9, 12];
    let want = bytes_with_commits_after(&flips, &[], 14);
    // The last episode is open at the end: its start in the long form, no length.
    assert_eq!(want, vec![5, 4, 4, 6]);
    assert_eq!(decoded(&want), flips.to_vec());
    for commits in [
        &[2][..],
        &[3],
        &[5],
        &[6],
        &[2, 5, 9, 12],
        &[1, 4, 7, 10, 13],
    ] {
        assert_eq!(
            bytes_with_commits_after(&flips, commits, 14),
            want,
            "commits after {commits:?}"
        );
    }
}

#[test]
fn an_episode_open_at_a_commit_is_in_the_file_unless_it_began_in_its_last_slice() {
    let c = memory();
    let mut enc = ReplayLogEncoder::default();
    enc.flip_at(0, 5);
    enc.flush(&c).unwrap();
    // Began in the commit's last slice: not known to be long yet, written later.
    assert!(stream(&c).is_empty());
    // A later commit (slice 7) finds it still open: a crash after it leaves "differs from
    // slice 5 on".
    enc.flip_at(1, 7);
    enc.flush(&c).unwrap();
    assert_eq!(decoded(&stream(&c)), vec![5]);
    enc.flip_at(0, 9);
    enc.flush(&c).unwrap();
    assert_eq!(decoded(&stream(&c)), vec![5, 9]);
    assert_eq!(stream(&c), vec![10, 4]);
}

#[test]
fn damaged_episodes_are_reported() {
    let bad = |b: &[u8]| decode_episodes(&mut VarintReader::new(b)).is_err();
    // An episode starting where the previous ended (delta 0).
    assert!(bad(&[3, 1]));
    // An episode of no slices.
    assert!(bad(&[4, 0]));
    // A truncated varint.
    assert!(bad(&[0x80]));
    // Overflow.
    assert!(bad(&[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x01
    ]));
}
