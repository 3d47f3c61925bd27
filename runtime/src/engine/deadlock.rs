//! Deadlock and livelock reports: who is blocked (or polling), in which call, waiting for
//! whom, and the cycle; and the livelock watch that decides one.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::descriptor::{DescKind, Descriptor, COMPLETION_FOUND};
use crate::segment::BlockedCall;
use strobe_core::sched::{Decision, SliceDecisions};

use crate::descriptor::{ANY_SOURCE, COMM_SELF_BASE, COMM_WORLD};
use crate::sched::{PendingOp, Scheduler};
use crate::segment::{JobSegment, RankState};
use crate::symbolize::{CallSite, Symbolizer};
use strobe_core::waitfor::{self, Blocked, Pattern, WaitOp};

#[derive(Clone, Debug)]
pub struct BlockedRank {
    pub rank: u32,
    /// The MPI call the rank is blocked in.
    pub call: &'static str,
    /// Its pending operations, each with the ranks it waits for.
    pub ops: Vec<PendingOp>,
    /// Where in the program it made that call (unknown when the rank is gone or the call
    /// site could not be found).
    pub site: Option<Arc<CallSite>>,
}

#[derive(Clone, Debug)]
pub struct DeadlockReport {
    pub slice: u64,
    pub blocked: Vec<BlockedRank>,
    /// A wait-for cycle, as world ranks, if there is one (`[0, 1]` means 0 waits for 1
    /// and 1 waits for 0).
    pub cycle: Option<Vec<u32>>,
    /// The classic patterns recognised (`strobe_core::waitfor::classify`), each a hint.
    pub patterns: Vec<Pattern>,
    /// A livelock: every live rank polling (or blocked) for this many slices in a row with
    /// nothing matched; `None` for a deadlock.
    pub livelock: Option<u32>,
}

/// What a rank polling with the test calls is shown doing (the engine sees its failed
/// tests, not which of the calls made them).
const POLLING: &str = "MPI_Test/Testall/Testany/Testsome";

/// Exit status of a job stopped as livelocked (a deadlock is 3: `launcher::EXIT_DEADLOCK`).
pub const EXIT_LIVELOCK: i32 = 5;

/// The default of `--livelock-slices` (`strobe run`, `strobe record`).
pub const DEFAULT_LIVELOCK_SLICES: u32 = 4000;

/// Slices without progress before a livelock is declared; 0 (the runtime's default) is
/// off. Process-wide because it is a policy of the strobe command (`--livelock-slices`),
/// not of the engine's configuration: a replay leaves it off and ends where its recording
/// ended, so a replay never decides a livelock of its own (docs/cli.md).
static LIVELOCK_SLICES: AtomicU32 = AtomicU32::new(0);

/// Declare a livelock after `n` slices without progress (0: never).
pub fn set_livelock_slices(n: u32) {
    LIVELOCK_SLICES.store(n, Ordering::Relaxed);
}

/// Issue 12, item 12: a rank spinning in `MPI_Test`/`MPI_Testall`/`MPI_Iprobe` on a request
/// that can never complete (MPICH's `pt2pt/cancelrecv`) ran until the timeout. The Strobe
/// Sender sees it at slice granularity: a slice makes no progress when every live rank is
/// either blocked or polling (its count of failed tests grew in the last few slices, see
/// [`poll_window`], or it sits in `MPI_Iprobe`), at least one polls, nothing but `MPI_Iprobe` was posted, nothing was
/// decided but "not found" answers to those probes, and nothing is in flight. A rank that
/// computes without polling breaks the run (it may still post what the others wait for).
/// After `--livelock-slices` such slices in a row the job is stopped with a report like a
/// deadlock's. Decision: this is a heuristic (a rank could poll for a long while and then
/// send), hence a generous default (4000 slices, 2 s at 500 us) and its own exit status.
#[derive(Default)]
pub struct LivelockWatch {
    /// Each rank's failed-test count at the previous slice boundary.
    fails: Vec<u32>,
    /// The last slice in which each rank's failed-test count grew.
    polled_in: Vec<Option<u64>>,
    quiet: u32,
}

/// How recently a rank must have failed a test to count as polling: a polling rank does
/// not get a core in every slice on a loaded machine (2 cores, 6 jobs: it showed up in one
/// slice of three), so one quiet slice must not read as "computing".
fn poll_window(limit: u32) -> u64 {
    u64::from((limit / 4).clamp(8, 500))
}

impl LivelockWatch {
    /// After slice `slice` (node 0): the report when the job is livelocked.
    pub fn after_slice(
        &mut self,
        slice: u64,
        seg: &JobSegment,
        sched: &Scheduler,
        posted: &[Descriptor],
        dec: &SliceDecisions,
        may_symbolize: &dyn Fn(u32) -> bool,
    ) -> Option<DeadlockReport> {
        let ranks = seg.ranks();
        let limit = LIVELOCK_SLICES.load(Ordering::Relaxed);
        if limit == 0 {
            return None;
        }
        self.fails.resize(ranks as usize, 0);
        self.polled_in.resize(ranks as usize, None);
        let window = poll_window(limit);
        // An MPI_Iprobe loop posts a probe each time round: that is polling too (between
        // its answer and its next probe the rank computes for a moment).
        for d in posted.iter().filter(|d| d.kind == DescKind::Iprobe as u8) {
            if let Some(p) = self.polled_in.get_mut(d.rank as usize) {
                *p = Some(slice);
            }
        }
        let mut pollers = Vec::new();
        let mut someone_computes = false;
        for r in 0..ranks {
            let slot = seg.slot(r);
            let fails = slot.pending_fails.load(Ordering::Acquire);
            if fails > self.fails[r as usize] {
                self.polled_in[r as usize] = Some(slice);
            } else if fails < self.fails[r as usize] && self.polled_in[r as usize] != Some(slice) {
                // A test succeeded (the run of failures was recorded and restarted).
                self.polled_in[r as usize] = None;
            }
            self.fails[r as usize] = fails;
            let grew = self.polled_in[r as usize].is_some_and(|p| slice - p < window);
            let state = slot.state();
            if !state.is_live() {
                continue;
            }
            let iprobing = state == RankState::Blocked
                && slot.blocked_call() == BlockedCall::Posted(DescKind::Iprobe);
            if grew || iprobing {
                pollers.push(r);
            } else if state != RankState::Blocked {
                someone_computes = true;
            }
        }
        let only_probes = posted.iter().all(|d| d.kind == DescKind::Iprobe as u8)
            && dec.decisions.iter().all(|d| {
                matches!(d, Decision::Complete(c) if c.completion.flags & COMPLETION_FOUND == 0)
            });
        let quiet = !pollers.is_empty() && !someone_computes && only_probes && sched.is_quiescent();
        self.quiet = if quiet { self.quiet + 1 } else { 0 };
        if self.quiet < limit {
            return None;
        }
        let mut report = DeadlockReport::build(slice, seg, sched, ranks, may_symbolize);
        let mut sym = Symbolizer::default();
        for &r in &pollers {
            if let Some(b) = report.blocked.iter_mut().find(|b| b.rank == r) {
                b.call = "MPI_Iprobe";
            } else {
                report.blocked.push(BlockedRank {
                    rank: r,
                    call: POLLING,
                    ops: sched.pending_of(r),
                    site: may_symbolize(r)
                        .then(|| site_of(&mut sym, seg, r))
                        .flatten(),
                });
            }
        }
        report.blocked.sort_by_key(|b| b.rank);
        (report.cycle, report.patterns) = analyze(&report.blocked, sched);
        report.livelock = Some(self.quiet);
        tracing::info!(slice, pollers = ?pollers, "livelock detected");
        Some(report)
    }
}

impl DeadlockReport {
    /// The report of a deadlock in `slice`; `may_symbolize(r)`: whether rank `r`'s call
    /// site may be resolved here (not a rank of another host).
    pub fn build(
        slice: u64,
        seg: &JobSegment,
        sched: &Scheduler,
        ranks: u32,
        may_symbolize: &dyn Fn(u32) -> bool,
    ) -> Self {
        let mut sym = Symbolizer::default();
        let blocked: Vec<BlockedRank> = (0..ranks)
            .filter(|&r| seg.slot(r).state() == RankState::Blocked)
            .map(|r| BlockedRank {
                rank: r,
                call: seg.slot(r).blocked_call().name(),
                ops: sched.pending_of(r),
                site: may_symbolize(r)
                    .then(|| site_of(&mut sym, seg, r))
                    .flatten(),
            })
            .collect();
        let (cycle, patterns) = analyze(&blocked, sched);
        if let Some(c) = &cycle {
            tracing::info!(slice, cycle = ?c, "deadlock with a wait-for cycle");
        }
        DeadlockReport {
            slice,
            cycle,
            patterns,
            blocked,
            livelock: None,
        }
    }
}

/// The call site rank `r` published in its slot, resolved while the rank is alive.
fn site_of(sym: &mut Symbolizer, seg: &JobSegment, r: u32) -> Option<Arc<CallSite>> {
    let slot = seg.slot(r);
    let pid = slot.pid.load(Ordering::Acquire) as i32;
    sym.resolve(pid, slot.site())
}

/// The wait-for cycle among `blocked` and the classic patterns (the core's analysis,
/// `strobe_core::waitfor`).
fn analyze(blocked: &[BlockedRank], sched: &Scheduler) -> (Option<Vec<u32>>, Vec<Pattern>) {
    let input: Vec<Blocked> = blocked
        .iter()
        .map(|b| Blocked {
            rank: b.rank,
            ops: b.ops.iter().map(|o| wait_op(sched, b.rank, o)).collect(),
        })
        .collect();
    let wf = waitfor::analyze(&input);
    let patterns = waitfor::classify(&input, &wf);
    (wf.cycle, patterns)
}

/// The wait-for analysis' view of a pending operation: world ranks instead of
/// communicator ranks. At a deadlock nothing pending is matched (the scheduler is
/// quiescent: no transfer in flight).
fn wait_op(sched: &Scheduler, rank: u32, o: &PendingOp) -> WaitOp {
    let members = sched
        .comms()
        .get(o.comm, rank)
        .map(|c| c.members())
        .unwrap_or_default();
    let peer = u32::try_from(o.peer)
        .ok()
        .and_then(|p| members.get(p as usize).copied());
    WaitOp {
        kind: o.kind,
        comm: o.comm,
        peer: if o.peer == ANY_SOURCE { None } else { peer },
        members,
        matched: false,
    }
}

fn comm_name(c: u32) -> String {
    match c {
        COMM_WORLD => "MPI_COMM_WORLD".into(),
        c if c >= COMM_SELF_BASE => "MPI_COMM_SELF".into(),
        c => format!("comm#{c}"),
    }
}

fn describe(o: &PendingOp) -> String {
    let peer = if o.peer == ANY_SOURCE {
        "MPI_ANY_SOURCE".to_string()
    } else {
        o.peer.to_string()
    };
    let tag = if o.tag == -1 {
        "MPI_ANY_TAG".to_string()
    } else {
        o.tag.to_string()
    };
    let what = o.kind.mpi_name();
    let rooted = matches!(
        o.kind,
        DescKind::Bcast
            | DescKind::Reduce
            | DescKind::Scatter
            | DescKind::Scatterv
            | DescKind::Gather
            | DescKind::Gatherv
    );
    if o.kind.is_collective() && rooted {
        format!("{what}(comm={}, root={})", comm_name(o.comm), o.peer)
    } else if o.kind.is_collective() {
        format!("{what}(comm={})", comm_name(o.comm))
    } else if o.kind.is_send() {
        format!(
            "{what}(dest={peer}, tag={tag}, comm={}, {} bytes)",
            comm_name(o.comm),
            o.bytes
        )
    } else {
        format!(
            "{what}(source={peer}, tag={tag}, comm={}, {} bytes)",
            comm_name(o.comm),
            o.bytes
        )
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.livelock {
            None => writeln!(
                f,
                "deadlock in slice {}: every live rank is blocked and nothing can be scheduled",
                self.slice
            )?,
            Some(n) => writeln!(
                f,
                "livelock in slice {}: for {n} slices every live rank polled (MPI_Test*, MPI_Iprobe) or was blocked, and nothing pending could match",
                self.slice
            )?,
        }
        for b in &self.blocked {
            let how = if self.livelock.is_some() && (b.call == POLLING || b.call == "MPI_Iprobe") {
                "polling in"
            } else {
                "blocked in"
            };
            let at = b
                .site
                .as_ref()
                .map(|s| format!(" at {s}"))
                .unwrap_or_default();
            // One operation of the call the rank is in: say it in one line, with its
            // arguments (`rank 1 blocked in MPI_Recv(source=0, tag=7, ...) at x.c:23`).
            if let [o] = &b.ops[..] {
                if o.kind.mpi_name() == b.call && self.livelock.is_none() {
                    writeln!(f, "  rank {} {how} {}{at}", b.rank, describe(o))?;
                    writeln!(f, "    waits for {}", waits_text(&o.waits_for))?;
                    continue;
                }
            }
            writeln!(f, "  rank {} {how} {}{at}", b.rank, b.call)?;
            for o in &b.ops {
                let waits: Vec<String> = o.waits_for.iter().map(|w| w.to_string()).collect();
                writeln!(
                    f,
                    "    pending {} -> waits for rank(s) {}",
                    describe(o),
                    waits.join(", ")
                )?;
            }
        }
        match &self.cycle {
            Some(c) => {
                let mut s: Vec<String> = c.iter().map(|r| format!("rank {r}")).collect();
                s.push(format!("rank {}", c[0]));
                writeln!(f, "  wait-for cycle: {}", s.join(" -> "))?;
            }
            None if self.livelock.is_some() => writeln!(
                f,
                "  no wait-for cycle: the pending operations wait for ranks that never post what they need"
            )?,
            None => writeln!(
                f,
                "  no wait-for cycle: some rank waits for a rank that already finished"
            )?,
        }
        for p in &self.patterns {
            writeln!(f, "  hint: {p}")?;
        }
        Ok(())
    }
}

/// `rank 1`, `rank 0 or rank 2` (a wildcard receive), `nobody` (it can match at once).
fn waits_text(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "nobody (it can complete as soon as it is scheduled)".into();
    }
    let r: Vec<String> = ranks.iter().map(|r| format!("rank {r}")).collect();
    r.join(" or ")
}
