//! The replay's two plugs into the runtime: [`ReplaySource`] (a `SliceSource`: logical
//! slices, quotas, post limits, recorded blocked sets) and [`Verifier`] (a `SliceSink`:
//! compares every slice's digest with the recording, fires call breakpoints, and passes the
//! slices on to a regeneration recorder).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strobe_recorder::replay_log::{blocking_of, completions_of, BlockedPredictor, ReplayLog};
use strobe_runtime::descriptor::Descriptor;
use strobe_runtime::engine::{Gate, LocalMetrics, SliceRecord, SliceSink, SliceSource};
use strobe_runtime::outcome::OutcomeRec;
use strobe_runtime::sched::Decision;
use strobe_runtime::segment::{JobSegment, RankState};

use crate::control::Controller;

/// How long a rank may sit blocked while the recording says it still had descriptors to
/// post before the next slice (it cannot: nothing reaches a blocked rank between slices).
const STUCK_GRACE: Duration = Duration::from_secs(1);
/// How long the Strobe Sender waits for a rank the recording has blocked at the next
/// slice's start to enter its blocking call, before starting the slice anyway. The set
/// itself comes from the log whatever happens; what a late rank costs is the call (and
/// site) the slice record names for it, read from its slot: a slice started before the
/// rank got there names its previous call, and a regenerated recording's `blocked` rows
/// differ from the original's. Under CI load (2 cores, 8 processes) a rank took more than
/// the 20 ms this once was between its post and its block. The wait ends as soon as the
/// rank blocks, and the expectation is exact but for a rank whose blocking call completes
/// without a slice (none does: completions come from slices), so the long grace costs a
/// replay nothing unless the prediction is wrong.
const BLOCK_GRACE: Duration = Duration::from_secs(1);
/// How long every live rank may be blocked or held past the end of the recording before
/// the replay is declared diverged (the recorded failure did not happen).
const END_GRACE: Duration = Duration::from_secs(2);

/// Why the replay stopped early, found on the replay's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    pub slice: u64,
    pub rank: Option<u32>,
    /// What the recording holds there (a call, a decision, or the digest).
    pub recorded: String,
    /// What the replay did instead.
    pub replayed: String,
    /// The replayed slice's calls (rank, text) and decisions, when a digest differed.
    pub calls: Vec<(u32, String)>,
    pub decisions: Vec<Decision>,
    /// Where in the program replayed ranks were when the divergence was found (rank,
    /// `ring.h:31 (in ring_step)`): the diverging rank's own, or the blocked ranks' of the
    /// slice whose digest differed; the report shows the one of the rank it names.
    pub sites: Vec<(u32, String)>,
}

/// State shared by the source, the verifier and the report.
pub struct Shared {
    pub ctl: Arc<Controller>,
    pub divergence: Mutex<Option<Divergence>>,
    /// The last calls of each rank: (slice handled, descriptor), put in words only by a
    /// report ([`descriptor_text`]): formatting each one as it was handled cost the slice
    /// path a `String` per descriptor (320,000 in a message-heavy replay).
    pub last_calls: Mutex<Vec<VecDeque<(u64, Descriptor)>>>,
    /// The recording reached its end and the job had not ended: stop as matched.
    pub end_of_recording: Mutex<Option<u64>>,
    /// The blocked-set prediction, advanced by the source (handled descriptors) and the
    /// verifier (completions), with the last slice's answer for the other nodes.
    blocked: Mutex<BlockedState>,
}

#[derive(Default)]
struct BlockedState {
    predictor: BlockedPredictor,
    slice: u64,
    answer: Vec<u32>,
    /// Per rank: its descriptors the slices so far completed (the gate's test of a
    /// recorded block the rank had already left, [`ReplaySource::gate`]).
    completed: Vec<u64>,
}

impl BlockedState {
    fn completed(&self, rank: u32) -> u64 {
        self.completed.get(rank as usize).copied().unwrap_or(0)
    }
}

impl Shared {
    pub fn new(ctl: Arc<Controller>, ranks: u32) -> Self {
        Shared {
            ctl,
            divergence: Mutex::new(None),
            last_calls: Mutex::new(vec![VecDeque::new(); ranks as usize]),
            end_of_recording: Mutex::new(None),
            blocked: Mutex::new(BlockedState::default()),
        }
    }

    /// Advance the blocked-set prediction with a slice's completions (whoever sees the
    /// slice records: the verifier, or node 0's tap in a daemon, `remote.rs`).
    pub fn decided(&self, completed: &[(u32, u64)]) {
        let mut b = self.blocked.lock().expect("blocked lock");
        b.predictor.decided(completed);
        for &(rank, _) in completed {
            let r = rank as usize;
            if r >= b.completed.len() {
                b.completed.resize(r + 1, 0);
            }
            b.completed[r] += 1;
        }
    }

    /// Record the first divergence and stop the replay.
    pub fn diverged(&self, d: Divergence) {
        let mut g = self.divergence.lock().expect("divergence lock");
        if g.is_none() {
            let why = format!("replay diverged from the recording in slice {}", d.slice);
            *g = Some(d);
            drop(g);
            self.ctl.stop(why);
        }
    }
}

pub fn descriptor_text(d: &Descriptor) -> String {
    let kind = d
        .kind()
        .map_or_else(|| format!("?{}", d.kind), |k| k.mpi_name().to_string());
    format!(
        "rank {} seq {}: {} peer={} tag={} comm={} bytes={}",
        d.rank, d.seq, kind, d.peer, d.tag, d.comm, d.bytes as i64
    )
}

#[derive(Default)]
struct GateWatch {
    next: u64,
    data_ready_at: Option<Instant>,
    stuck_since: Vec<Option<Instant>>,
    end_since: Option<Instant>,
}

/// Logical slices from the replay log.
pub struct ReplaySource {
    /// Per rank: (slice, descriptors handled up to and including it), slices ascending.
    cum: Vec<Vec<(u64, u64)>>,
    flips: Vec<Vec<u64>>,
    last_slice: u64,
    /// The recording ended on its own (success, a failed rank, a deadlock), so the replay
    /// must too; otherwise (cut short, interrupted, timeout) the end of the log is the end.
    ends_by_itself: bool,
    /// The recorded run was cut (a rank failed and the others were stopped, an interrupt,
    /// a timeout): a rank may reach a timing-dependent call its recorded process was
    /// stopped before, so a rank that runs out of recorded outcomes waits there (held)
    /// instead of being a divergence. If the recorded end then does not come, the end-of-
    /// recording check reports it.
    cut_short: bool,
    shared: Arc<Shared>,
    watch: Mutex<GateWatch>,
}

impl ReplaySource {
    pub fn new(log: &ReplayLog, recorded_outcome: Option<&str>, shared: Arc<Shared>) -> Self {
        Self::with_last_slice(log, log.last_slice(), recorded_outcome, shared)
    }

    /// [`ReplaySource::new`] for a log without digests (a daemon's replay package,
    /// `remote.rs`: the digests stay with the verifier), ending at `last_slice`.
    pub fn with_last_slice(
        log: &ReplayLog,
        last_slice: u64,
        recorded_outcome: Option<&str>,
        shared: Arc<Shared>,
    ) -> Self {
        let cum = log
            .ranks
            .iter()
            .map(|r| {
                let mut total = 0u64;
                r.posting
                    .iter()
                    .map(|&(s, n)| {
                        total += n as u64;
                        (s, total)
                    })
                    .collect()
            })
            .collect();
        ReplaySource {
            cum,
            flips: log.ranks.iter().map(|r| r.blocked_flips.clone()).collect(),
            last_slice,
            ends_by_itself: matches!(
                recorded_outcome,
                Some("success" | "rank_failed" | "deadlock")
            ),
            cut_short: !matches!(recorded_outcome, Some("success" | "deadlock")),
            watch: Mutex::new(GateWatch {
                stuck_since: vec![None; log.ranks.len()],
                ..Default::default()
            }),
            shared,
        }
    }

    /// Descriptors of `rank` handled in slices up to and including `slice`.
    pub fn cum(&self, rank: u32, slice: u64) -> u64 {
        let v = &self.cum[rank as usize];
        match v.partition_point(|&(s, _)| s <= slice) {
            0 => 0,
            i => v[i - 1].1,
        }
    }

    /// Whether the rank's blocked state at `slice` differs from the prediction.
    fn differs_at(&self, rank: u32, slice: u64) -> bool {
        self.flips[rank as usize].partition_point(|&f| f <= slice) % 2 == 1
    }

    fn ranks(&self) -> u32 {
        self.cum.len() as u32
    }

    fn diverge(
        &self,
        slice: u64,
        rank: u32,
        recorded: String,
        replayed: String,
        seg: &JobSegment,
    ) -> Gate {
        // The rank waits to be stopped: its call site can still be resolved.
        let slot = seg.slot(rank);
        let site = strobe_runtime::symbolize::Symbolizer::default()
            .resolve(slot.pid.load(Ordering::Acquire) as i32, slot.site())
            .map(|s| (rank, s.short()));
        self.shared.diverged(Divergence {
            slice,
            rank: Some(rank),
            recorded,
            replayed,
            calls: Vec::new(),
            decisions: Vec::new(),
            sites: site.into_iter().collect(),
        });
        Gate::Stop(
            self.shared
                .ctl
                .stop_reason()
                .unwrap_or_else(|| "replay diverged".into()),
        )
    }

    fn gate_inner(&self, next: u64, seg: &JobSegment) -> Gate {
        if let Some(why) = self.shared.ctl.run_ends() {
            return Gate::Stop(why);
        }
        let now = Instant::now();
        let mut w = self.watch.lock().expect("gate lock");
        if w.next != next {
            *w = GateWatch {
                next,
                stuck_since: vec![None; self.ranks() as usize],
                ..Default::default()
            };
        }
        // A replaying rank that found its program off the recorded path.
        for r in 0..self.ranks() {
            if let Some(why) = seg.slot(r).diverged() {
                if why == strobe_runtime::segment::Divergence::LogExhausted && self.cut_short {
                    continue;
                }
                let what = why.reason();
                let posted = seg.slot(r).posted.load(Ordering::Acquire);
                return self.diverge(
                    next - 1,
                    r,
                    "the recorded timing-dependent outcome (see the rank's message above)".into(),
                    format!("rank {r} {what}, after posting {posted} descriptors"),
                    seg,
                );
            }
        }
        if next > self.last_slice {
            if !self.ends_by_itself {
                *self.shared.end_of_recording.lock().expect("end lock") = Some(self.last_slice);
                return Gate::Stop(format!(
                    "reached the end of the recording (slice {})",
                    self.last_slice
                ));
            }
            // The job must now end as recorded (finalize, a crash); ranks that block or
            // wait for more slices forever mean it does not.
            let all_waiting =
                (0..self.ranks()).all(|r| seg.slot(r).state() != RankState::Computing);
            if !all_waiting {
                w.end_since = None;
            } else if now - *w.end_since.get_or_insert(now) > END_GRACE {
                let r = (0..self.ranks())
                    .find(|&r| seg.slot(r).state() == RankState::Held)
                    .unwrap_or(0);
                return self.diverge(
                    self.last_slice,
                    r,
                    format!("the job ended after slice {}", self.last_slice),
                    "the replayed job goes on (ranks wait for more slices)".into(),
                    seg,
                );
            }
            return Gate::Wait;
        }
        // (a) Every rank posted exactly what the recording has it post before `next`.
        let mut ready = true;
        for r in 0..self.ranks() {
            let need = self.cum(r, next);
            let slot = seg.slot(r);
            let posted = slot.posted.load(Ordering::Acquire);
            if posted >= need {
                w.stuck_since[r as usize] = None;
                continue;
            }
            ready = false;
            let state = slot.state();
            let stuck = match state {
                RankState::Exited | RankState::Finalized => true,
                RankState::Blocked => {
                    now - *w.stuck_since[r as usize].get_or_insert(now) > STUCK_GRACE
                }
                _ => {
                    w.stuck_since[r as usize] = None;
                    false
                }
            };
            if stuck {
                let how = match state {
                    RankState::Blocked => format!("is blocked in {}", slot.blocked_call().name()),
                    RankState::Finalized => "finalized".into(),
                    _ => "exited".into(),
                };
                return self.diverge(
                    next - 1,
                    r,
                    format!(
                        "rank {r} posts {need} descriptors by the end of slice {}",
                        next - 1
                    ),
                    format!("rank {r} posted {posted} and {how}"),
                    seg,
                );
            }
        }
        if !ready {
            return Gate::Wait;
        }
        // (b) Ranks the recording has blocked at the start of `next` are in their call.
        // (The prediction needs the batch of `next`, not drained yet: the ranks still
        // blocked from the previous slice, or that posted a blocking call for `next`, are
        // the candidates; exceptions are taken as recorded.)
        //
        // Not a rank the recording has blocked against the prediction while every
        // descriptor it had posted, those `next` handles too, was complete: its call had
        // completed in an earlier slice and the rank had not run yet when this one started
        // (an early or timer slice right after a delivery). Replayed, it has already left
        // that call; waiting would wait for its next block, a computation away, and name
        // that later call. Its slot still names the call it left, as the recording's did.
        // Counted through `next`'s own batch: an `MPI_Waitall` blocks on requests the
        // slice it blocks before has yet to handle.
        let since = *w.data_ready_at.get_or_insert(now);
        if now - since < BLOCK_GRACE {
            // Per rank: (predicted blocked, everything it posted complete).
            let known: Vec<(bool, bool)> = {
                let b = self.shared.blocked.lock().expect("blocked lock");
                (0..self.ranks())
                    .map(|r| {
                        (
                            b.predictor.predicted(r),
                            b.completed(r) >= self.cum(r, next),
                        )
                    })
                    .collect()
            };
            let late = (0..self.ranks()).any(|r| {
                // Its last descriptor (the last one `next` handles) is a blocking call.
                let posts = self.cum(r, next) > self.cum(r, next - 1)
                    && seg.slot(r).last_post_blocking.load(Ordering::Relaxed) != 0;
                let (predicted, settled) = known[r as usize];
                let predicted = predicted || posts;
                let expected = predicted != self.differs_at(r, next);
                let left_already = !predicted && settled;
                expected && !left_already && seg.slot(r).state() == RankState::Computing
            });
            if late {
                return Gate::Wait;
            }
        }
        drop(w);
        self.shared.ctl.before_slice(next, seg)
    }
}

impl SliceSource for ReplaySource {
    fn quota(&self, slice: u64, rank: u32) -> Option<u64> {
        Some(self.cum(rank, slice) - self.cum(rank, slice.saturating_sub(1)))
    }
    fn post_limit(&self, slice: u64, rank: u32) -> Option<u64> {
        Some(self.cum(rank, slice + 1))
    }
    fn gate(&self, next: u64, seg: &JobSegment) -> Gate {
        self.gate_inner(next, seg)
    }
    fn blocked(&self, slice: u64, handled: &[Descriptor]) -> Option<Vec<u32>> {
        let mut b = self.shared.blocked.lock().expect("blocked lock");
        if b.slice != slice {
            b.predictor.handled(&blocking_of(handled));
            b.answer = (0..self.ranks())
                .filter(|&r| b.predictor.predicted(r) != self.differs_at(r, slice))
                .collect();
            b.slice = slice;
        }
        Some(b.answer.clone())
    }
}

/// Compares each replayed slice with the recording and feeds the optional inner sink (a
/// regeneration recorder).
pub struct Verifier {
    digests: Vec<u64>,
    shared: Arc<Shared>,
    inner: Option<Arc<dyn SliceSink>>,
    /// Node of each rank (for reports).
    pub node_of_rank: Vec<u32>,
}

/// Calls kept per rank for reports.
const LAST_CALLS: usize = 8;

impl Verifier {
    pub fn new(
        log: &ReplayLog,
        shared: Arc<Shared>,
        inner: Option<Arc<dyn SliceSink>>,
        node_of_rank: Vec<u32>,
    ) -> Self {
        Verifier {
            digests: log.digests.clone(),
            shared,
            inner,
            node_of_rank,
        }
    }
}

impl SliceSink for Verifier {
    fn slice(&self, rec: &SliceRecord) {
        {
            let mut lc = self.shared.last_calls.lock().expect("last calls lock");
            for d in &rec.descriptors {
                if let Some(q) = lc.get_mut(d.rank as usize) {
                    if q.len() == LAST_CALLS {
                        q.pop_front();
                    }
                    q.push_back((rec.slice, *d));
                }
            }
        }
        let breaks = self.shared.ctl.call_breaks();
        for d in rec.descriptors.iter().filter(|_| !breaks.is_empty()) {
            let name = d.kind().map_or("?", |k| k.mpi_name());
            for (rank, call) in &breaks {
                {
                    if *rank == d.rank && call.eq_ignore_ascii_case(name) {
                        self.shared.ctl.pause_before(
                            rec.slice + 1,
                            format!(
                                "breakpoint rank={rank},call={call}: rank {rank}'s {name} (seq {}) was handled in slice {}",
                                d.seq, rec.slice
                            ),
                        );
                    }
                }
            }
        }
        self.shared
            .decided(&completions_of(&rec.decisions.decisions));
        let recorded = self.digests.get(rec.slice as usize - 1).copied();
        if recorded != Some(rec.digest) {
            let first = rec.decisions.decisions.first();
            self.shared.diverged(Divergence {
                slice: rec.slice,
                rank: first.map(Decision::rank),
                recorded: match recorded {
                    Some(d) => format!("digest {d:016x}"),
                    None => "no such slice".into(),
                },
                replayed: format!("digest {:016x}", rec.digest),
                calls: rec
                    .descriptors
                    .iter()
                    .map(|d| (d.rank, descriptor_text(d)))
                    .collect(),
                decisions: rec.decisions.decisions.clone(),
                sites: rec.sites.iter().map(|(r, s)| (*r, s.short())).collect(),
            });
        }
        if let Some(s) = &self.inner {
            s.slice(rec);
        }
    }

    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        if let Some(s) = &self.inner {
            s.node_metrics(slice, m);
        }
    }

    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        if let Some(s) = &self.inner {
            s.outcomes(rank, recs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_recorder::replay_log::RankLog;

    fn log() -> ReplayLog {
        ReplayLog {
            ranks: vec![
                RankLog {
                    posting: vec![(1, 2), (4, 1)],
                    outcomes: Vec::new(),
                    blocked_flips: vec![3, 5],
                },
                RankLog::default(),
            ],
            digests: vec![0; 6],
        }
    }

    #[test]
    fn quotas_limits_and_recorded_blocked_sets() {
        let shared = Arc::new(Shared::new(Arc::new(Controller::new()), 2));
        let src = ReplaySource::new(&log(), Some("success"), shared);
        assert_eq!(
            (1..=5).map(|s| src.quota(s, 0)).collect::<Vec<_>>(),
            [Some(2), Some(0), Some(0), Some(1), Some(0)]
        );
        assert_eq!(src.quota(1, 1), Some(0));
        // While slice s runs, a rank may post what slices up to s + 1 handle.
        assert_eq!(src.post_limit(0, 0), Some(2));
        assert_eq!(src.post_limit(2, 0), Some(2));
        assert_eq!(src.post_limit(3, 0), Some(3));
        assert_eq!(src.post_limit(9, 0), Some(3));
        // No blocking descriptors, so the prediction is "not blocked" and the flips are
        // the recorded blocked set: rank 0 in slices 3 and 4.
        let none: &[Descriptor] = &[];
        let got: Vec<Vec<u32>> = (1..=5).map(|s| src.blocked(s, none).unwrap()).collect();
        assert_eq!(got, [vec![], vec![], vec![0], vec![0], vec![]]);
    }

    /// Rank 0 posts what `posting` says ((slice, descriptors handled in it)) and is
    /// computing; the recording has it blocked at the start of slice 2 against the
    /// prediction (no blocking descriptor pending).
    fn blocked_at_two(posting: Vec<(u64, u32)>) -> (ReplaySource, Arc<Shared>, JobSegment) {
        let posted: u64 = posting.iter().map(|&(_, n)| u64::from(n)).sum();
        let log = ReplayLog {
            ranks: vec![RankLog {
                posting,
                outcomes: Vec::new(),
                blocked_flips: vec![2, 3],
            }],
            digests: vec![0; 4],
        };
        let shared = Arc::new(Shared::new(Arc::new(Controller::new()), 1));
        let src = ReplaySource::new(&log, Some("success"), shared.clone());
        let seg = JobSegment::create(1, 1, 16, 16).unwrap();
        seg.slot(0).posted.store(posted, Ordering::Release);
        seg.slot(0).set_state(RankState::Computing);
        (src, shared, seg)
    }

    /// Its descriptor completed in slice 1: the recorded block is one the rank had already
    /// left when slice 2 started (it had not run yet). Replayed, the computing rank is not
    /// waited for: its next block is a later call, a computation away.
    #[test]
    fn a_recorded_block_the_rank_had_left_is_not_waited_for() {
        let (src, shared, seg) = blocked_at_two(vec![(1, 1)]);
        shared.decided(&[(0, 0)]);
        assert!(matches!(src.gate(2, &seg), Gate::Open));
    }

    /// Its descriptor is still pending (an `MPI_Irecv` it will wait for): the rank is on
    /// its way into that wait, and the slice waits for it to block.
    #[test]
    fn a_recorded_block_with_a_pending_descriptor_is_waited_for() {
        let (src, _shared, seg) = blocked_at_two(vec![(1, 1)]);
        assert!(matches!(src.gate(2, &seg), Gate::Wait));
        seg.slot(0).set_state(RankState::Blocked);
        assert!(matches!(src.gate(2, &seg), Gate::Open));
    }

    /// Everything slice 1 handled is complete, but the rank's last `MPI_Isend` is handled
    /// by slice 2 itself, the one it blocks before in `MPI_Waitall` (`p2p`'s non-blocking
    /// exchange): it is waited for too. (Counting only up to slice 1 named the rank's
    /// previous call, `MPI_Barrier`, in a regenerated recording.)
    #[test]
    fn a_recorded_block_on_a_request_the_slice_handles_is_waited_for() {
        let (src, shared, seg) = blocked_at_two(vec![(1, 1), (2, 1)]);
        shared.decided(&[(0, 0)]);
        assert!(matches!(src.gate(2, &seg), Gate::Wait));
        seg.slot(0).set_state(RankState::Blocked);
        assert!(matches!(src.gate(2, &seg), Gate::Open));
    }
}
