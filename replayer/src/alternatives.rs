//! Where a recorded run could have gone another way, and how to make a new run go there
//! (`strobe explore`, docs/debugging.md).
//!
//! A wildcard receive (`MPI_ANY_SOURCE`) takes the earliest-posted eligible send (model.md
//! 4.2), so which sender it matched is timing. An *alternative* for a wildcard receive W
//! of rank r is another sender whose compatible send (same communicator, a tag W accepts)
//! to r was matched, in the recording, by W or a later receive of r: had it arrived first,
//! W would have taken it. To force one, a new live run *holds* the competing senders
//! (every other rank whose first such send W could have taken) before they post that send,
//! until W has been matched (runtime/src/chaos.rs): the only eligible message is then the
//! chosen one. The run is an ordinary recording, so it replays without any of this.
//! Wildcard receives before W are forced to their recorded senders the same way, so the
//! run follows the recording up to W (the depth-first search's prefix).
//!
//! **Test outcomes** ([`test_alternatives`]). Whether an `MPI_Test*` found its request
//! complete is timing too. The legal alternatives (MPI lets a completion become visible
//! late, never before the operation could have completed):
//! - a test that found nothing complete and was the *first* of its polling run (the
//!   rank's previous test-like call did not fail too) could have succeeded, had the
//!   message been faster: it is forced `complete` (the rank waits, still computing, until
//!   the request completes, then the test succeeds). When the completion needs the
//!   testing rank to go on first (the alternative is impossible), explore's idle release
//!   ends the wait and the run counts as "not taken". Later failures of the same run are
//!   not tried: each would only shorten the polling loop by one more round;
//! - a test-like call that succeeded on its first try could have found nothing complete
//!   once: it is forced `pending` (the completion is seen one poll later). The replay log
//!   does not say whether a success came from a test or from a `Waitany`/`Waitsome` over
//!   several requests; on a wait the forcing changes nothing and the run passes as the
//!   recorded one did.
//!
//! - a call over a set (`Waitany`, `Testany`, `Waitsome`, `Testsome`) that reported one
//!   request, `i`, could have reported a lower one, `j < i`, had `j`'s message been
//!   faster (the runtime reports the lowest-indexed complete request, so the lower ones
//!   were not complete yet): it is forced `index=j` (wait until `j` completes, report it
//!   alone). At most [`INDEX_ALTERNATIVES`] per call, lowest first. Higher indices are not
//!   tried: the replay log keeps the index reported, not the size of the set.
//!
//! A test alternative is one run forced at one call, from the recorded run (depth 1):
//! the other calls and the wildcard receives take their chances in that run. Not covered
//! yet: wildcard probes.

use std::collections::BTreeMap;

use strobe_recorder::recording::DescriptorRow;
use strobe_recorder::replay_log::ReplayLog;
use strobe_recorder::RecordError;
use strobe_runtime::chaos::{Hold, TestForce, TestOutcome};
use strobe_runtime::descriptor::{DescRef, ANY_SOURCE, ANY_TAG};
use strobe_runtime::outcome::{MalformedOutcome, Outcome, OutcomeCursor};
use strobe_runtime::sched::Decision;

/// A wildcard receive and the send it matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wildcard {
    pub recv: DescRef,
    /// The slice whose decisions matched it.
    pub slice: u64,
    pub matched: DescRef,
    /// Other sends it could have matched, one per sender rank (the first), lowest rank
    /// first.
    pub alternatives: Vec<DescRef>,
}

/// The point-to-point traffic of a recording: descriptors and matches.
pub struct Traffic {
    descs: BTreeMap<DescRef, DescriptorRow>,
    /// (slice, send, recv), in decision order.
    matches: Vec<(u64, DescRef, DescRef)>,
}

/// The recording's schedule log does not cover every slice: nothing to enumerate from.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error(transparent)]
    Recording(#[from] RecordError),
    #[error(
        "the schedule log does not cover slice {0} (recorded with --schedule-log off or a window)"
    )]
    NotCovered(u64),
}

fn id(d: &DescriptorRow) -> DescRef {
    DescRef {
        rank: d.rank,
        seq: d.seq as u64,
    }
}

fn is_recv(d: &DescriptorRow) -> bool {
    d.kind.eq_ignore_ascii_case("MPI_Recv") || d.kind.eq_ignore_ascii_case("MPI_Irecv")
}

impl Traffic {
    pub fn read(rec: &strobe_recorder::Recording) -> Result<Traffic, TrafficError> {
        let mut descs = BTreeMap::new();
        let mut matches = Vec::new();
        for s in 1..=rec.last_slice() {
            let (Some(ds), Some(decs)) = (rec.descriptors(s)?, rec.decisions(s)?) else {
                return Err(TrafficError::NotCovered(s));
            };
            descs.extend(ds.into_iter().map(|d| (id(&d), d)));
            matches.extend(decs.iter().filter_map(|d| match d {
                Decision::Match(m) => Some((s, m.send, m.recv)),
                _ => None,
            }));
        }
        Ok(Traffic { descs, matches })
    }

    /// Whether the send `send` could match the receive `recv` (communicator and tag).
    fn compatible(&self, send: DescRef, recv: DescRef) -> bool {
        let (Some(s), Some(r)) = (self.descs.get(&send), self.descs.get(&recv)) else {
            return false;
        };
        s.comm == r.comm && (r.tag == i64::from(ANY_TAG) || r.tag == s.tag)
    }

    /// For each sender rank other than `except`, its first send compatible with `recv`
    /// that a receive of `recv`'s rank at or after `recv` took.
    fn competitors(&self, recv: DescRef, except: Option<u32>) -> Vec<DescRef> {
        let mut first: BTreeMap<u32, DescRef> = BTreeMap::new();
        for &(_, send, r) in &self.matches {
            if r.rank == recv.rank
                && r.seq >= recv.seq
                && Some(send.rank) != except
                && self.compatible(send, recv)
            {
                first
                    .entry(send.rank)
                    .and_modify(|f| {
                        if send.seq < f.seq {
                            *f = send
                        }
                    })
                    .or_insert(send);
            }
        }
        first.into_values().collect()
    }

    /// The wildcard receives, in the order they were matched, with their alternatives.
    pub fn wildcards(&self) -> Vec<Wildcard> {
        self.matches
            .iter()
            .filter(|(_, _, recv)| {
                self.descs
                    .get(recv)
                    .is_some_and(|d| is_recv(d) && d.peer == i64::from(ANY_SOURCE))
            })
            .map(|&(slice, send, recv)| Wildcard {
                recv,
                slice,
                matched: send,
                alternatives: self
                    .competitors(recv, Some(send.rank))
                    .into_iter()
                    .filter(|a| a.rank != send.rank)
                    .collect(),
            })
            .collect()
    }

    /// The holds that make `recv` match a send of `sender`: every other competing sender
    /// waits, before its competing send, for the token of `recv` (see [`token`]).
    pub fn holds_for(&self, recv: DescRef, sender: u32) -> Vec<Hold> {
        self.competitors(recv, Some(sender))
            .into_iter()
            .map(|c| Hold {
                rank: c.rank,
                seq: c.seq,
                token: token(recv),
            })
            .collect()
    }

    /// [`Traffic::holds_for`], and the competitors released one at a time, lowest rank
    /// first, each once the previous one's send has been matched (its token is
    /// [`send_token`]): after the forced receive the run takes the competitors in rank
    /// order instead of racing them, so the search below it is the same every time.
    /// Returns the holds and the sends whose match releases the next one.
    pub fn holds_in_order(&self, recv: DescRef, sender: u32) -> (Vec<Hold>, Vec<DescRef>) {
        let comp = self.competitors(recv, Some(sender));
        let mut holds = self.holds_for(recv, sender);
        for pair in comp.windows(2) {
            holds.push(Hold {
                rank: pair[1].rank,
                seq: pair[1].seq,
                token: send_token(pair[0]),
            });
        }
        let released_by = comp[..comp.len().saturating_sub(1)].to_vec();
        (holds, released_by)
    }

    /// A descriptor as recorded.
    pub fn descriptor(&self, d: DescRef) -> Option<&DescriptorRow> {
        self.descs.get(&d)
    }
}

/// A test-like call whose recorded outcome could have been the other one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestAlternative {
    /// The rank, its test-like call number (counted from 0 over the calls that record an
    /// outcome) and the outcome to force instead of the recorded one.
    pub force: TestForce,
    /// For an index forcing: the index the call reported in the recording.
    pub instead_of: Option<usize>,
}

/// Index alternatives tried per call over a set (the lowest indices first).
pub const INDEX_ALTERNATIVES: usize = 4;

impl TestAlternative {
    /// One line for explore's report.
    pub fn describe(&self) -> String {
        let f = self.force;
        match f.outcome {
            TestOutcome::Complete => format!(
                "rank {}'s test-like call #{} finds its request complete instead of nothing (the message is faster)",
                f.rank, f.call
            ),
            TestOutcome::Pending => format!(
                "rank {}'s test-like call #{} finds nothing complete instead of its request (seen one poll later)",
                f.rank, f.call
            ),
            TestOutcome::Index(n) => format!(
                "rank {}'s test-like call #{} reports request {n} of its set instead of request {} (request {n}'s message is faster)",
                f.rank,
                f.call,
                self.instead_of.unwrap_or(0)
            ),
        }
    }
}

/// The test alternatives of a recorded run, by rank, then call (module documentation).
pub fn test_alternatives(log: &ReplayLog) -> Result<Vec<TestAlternative>, MalformedOutcome> {
    let mut out = Vec::new();
    for (rank, r) in log.ranks.iter().enumerate() {
        let mut cursor = OutcomeCursor::new(r.outcomes.clone());
        let (mut call, mut after_fail) = (0u64, false);
        while let Some(o) = cursor.next_outcome()? {
            let mut outcomes = match &o {
                Outcome::Fail if !after_fail => vec![TestOutcome::Complete],
                Outcome::Indices(_) if !after_fail => vec![TestOutcome::Pending],
                Outcome::Fail | Outcome::Indices(_) => vec![],
                Outcome::Wtime(_) | Outcome::Libc(..) => continue,
            };
            // One request of a set reported: a lower one could have completed first.
            let reported = match &o {
                Outcome::Indices(v) if v.len() == 1 => Some(v[0]),
                _ => None,
            };
            let lower = reported.unwrap_or(0).min(INDEX_ALTERNATIVES);
            outcomes.extend((0..lower).map(TestOutcome::Index));
            for outcome in outcomes {
                out.push(TestAlternative {
                    force: TestForce {
                        rank: rank as u32,
                        call,
                        outcome,
                    },
                    instead_of: reported,
                });
            }
            after_fail = matches!(o, Outcome::Fail);
            call += 1;
        }
    }
    Ok(out)
}

/// The release file name of the holds made for receive `recv`.
pub fn token(recv: DescRef) -> String {
    format!("recv-{}-{}", recv.rank, recv.seq)
}

/// The release file name of the holds waiting for send `send` to be matched.
pub fn send_token(send: DescRef) -> String {
    format!("send-{}-{}", send.rank, send.seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(rank: u32, seq: i64, kind: &str, peer: i64, tag: i64, comm: i64) -> DescriptorRow {
        DescriptorRow {
            rank,
            seq,
            kind: kind.into(),
            peer,
            tag,
            comm,
            bytes: 8,
            blocking: true,
        }
    }

    fn r(rank: u32, seq: u64) -> DescRef {
        DescRef { rank, seq }
    }

    /// Rank 0 receives three times from anyone (tag 7), then once from rank 1 with tag 9;
    /// ranks 1..=3 send tag 7, rank 1 then tag 9, rank 4 sends tag 7 on another
    /// communicator to a receive of its own.
    fn traffic() -> Traffic {
        let any = i64::from(ANY_SOURCE);
        let descs = [
            desc(0, 0, "MPI_Recv", any, 7, 0),
            desc(0, 1, "MPI_Irecv", any, 7, 0),
            desc(0, 2, "MPI_Recv", any, 7, 0),
            desc(0, 3, "MPI_Recv", 1, 9, 0),
            desc(0, 4, "MPI_Recv", 4, 7, 5),
            desc(1, 0, "MPI_Send", 0, 7, 0),
            desc(1, 1, "MPI_Send", 0, 9, 0),
            desc(2, 0, "MPI_Send", 0, 7, 0),
            desc(3, 0, "MPI_Send", 0, 7, 0),
            desc(4, 0, "MPI_Send", 0, 7, 5),
        ];
        Traffic {
            descs: descs.into_iter().map(|d| (id(&d), d)).collect(),
            matches: vec![
                (3, r(1, 0), r(0, 0)),
                (5, r(2, 0), r(0, 1)),
                (6, r(3, 0), r(0, 2)),
                (7, r(1, 1), r(0, 3)),
                (8, r(4, 0), r(0, 4)),
            ],
        }
    }

    #[test]
    fn wildcards_and_their_alternatives() {
        let w = traffic().wildcards();
        let got: Vec<(DescRef, u64, u32, Vec<DescRef>)> = w
            .iter()
            .map(|w| (w.recv, w.slice, w.matched.rank, w.alternatives.clone()))
            .collect();
        // The tag-9 send and the other communicator's send are no alternative; the
        // receives from a named source are not wildcards.
        assert_eq!(
            got,
            vec![
                (r(0, 0), 3, 1, vec![r(2, 0), r(3, 0)]),
                (r(0, 1), 5, 2, vec![r(3, 0)]),
                (r(0, 2), 6, 3, vec![]),
            ]
        );
    }

    #[test]
    fn holds_keep_every_other_competitor_back_until_the_receive_matched() {
        let t = traffic();
        let holds = t.holds_for(r(0, 0), 3);
        let got: Vec<(u32, u64, &str)> = holds
            .iter()
            .map(|h| (h.rank, h.seq, h.token.as_str()))
            .collect();
        assert_eq!(got, [(1, 0, "recv-0-0"), (2, 0, "recv-0-0")]);
        // Forcing the recorded sender of the last receive holds nobody who took an
        // earlier one.
        assert!(t.holds_for(r(0, 2), 3).is_empty());
        assert_eq!(t.holds_for(r(0, 1), 3).len(), 1);
    }

    #[test]
    fn first_tries_of_tests_are_the_test_alternatives() {
        use strobe_recorder::replay_log::RankLog;
        use strobe_runtime::outcome::OutcomeRec;
        // Rank 0: Wtime, 3 failed tests, a success (of the same run), a success at first
        // try reporting request 1 of 2 (a Testany); rank 1: nothing.
        let mut recs = vec![OutcomeRec::wtime(5), OutcomeRec::fails(3)];
        recs.extend(OutcomeRec::for_indices(&[0], 1));
        recs.extend(OutcomeRec::for_indices(&[1], 2));
        let log = ReplayLog {
            ranks: vec![
                RankLog {
                    outcomes: recs,
                    ..Default::default()
                },
                RankLog::default(),
            ],
            digests: vec![],
        };
        let got: Vec<(u32, u64, TestOutcome)> = test_alternatives(&log)
            .unwrap()
            .iter()
            .map(|a| (a.force.rank, a.force.call, a.force.outcome))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, TestOutcome::Complete),
                (0, 4, TestOutcome::Pending),
                (0, 4, TestOutcome::Index(0))
            ]
        );
    }

    #[test]
    fn competitors_are_released_in_rank_order() {
        let t = traffic();
        let (holds, released_by) = t.holds_in_order(r(0, 0), 3);
        let got: Vec<(u32, u64, &str)> = holds
            .iter()
            .map(|h| (h.rank, h.seq, h.token.as_str()))
            .collect();
        assert_eq!(
            got,
            [(1, 0, "recv-0-0"), (2, 0, "recv-0-0"), (2, 0, "send-1-0")]
        );
        assert_eq!(released_by, [r(1, 0)]);
        assert_eq!(t.holds_in_order(r(0, 2), 3), (vec![], vec![]));
    }
}
