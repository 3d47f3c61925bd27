//! The slice machine driven without threads: K machines against each other through an
//! in-memory fabric (the global variables and event counters of the shared-memory
//! transport) and a virtual clock, like quinn-proto's endpoint pairs.

use super::*;

const SLICE_NS: u64 = 1_000;
/// The strobe value that tells every node to leave (the runtime's `STOP`).
const STOP: u64 = u64::MAX;

/// What the runtime's transport and job segment would hold.
struct Fabric {
    strobe: Vec<u64>,
    done: Vec<u64>,
    go: Vec<u64>,
    /// `EV_DONE` signals waiting on node 0.
    ev_done: u32,
    /// The DEM mailboxes: the digest each node's batch carried.
    mail: Vec<Option<ReplicaDigest>>,
    /// The slice of each node's last batch (the runtime counts `EV_MAIL` signals).
    mail_slice: Vec<u64>,
}

struct Node {
    m: SliceMachine,
    /// A queued command that could not run yet (a held node's work).
    pending: Option<Command>,
    /// Do not finish work commands (a late node).
    hold: bool,
    /// Added to the digest this replica computes (a diverging replica).
    skew: u64,
    log: Vec<Command>,
}

struct Job {
    now: u64,
    computing: bool,
    all_done: bool,
    stop: bool,
    gate: bool,
    reductions: bool,
    /// What the data phases move between nodes (reported with `Scheduled`).
    cross_node: CrossNode,
    /// Slices are quiet (nothing posted, decided or in flight): node 0 reports it.
    quiet: bool,
    /// A rank rang the doorbell (it posted while the timer was stretched).
    doorbell: bool,
    fabric: Fabric,
    nodes: Vec<Node>,
}

impl Job {
    fn new(nodes: u32, policy: StrobePolicy, logical: bool) -> Job {
        let k = nodes as usize;
        Job {
            now: 0,
            computing: true,
            all_done: false,
            stop: false,
            gate: false,
            reductions: false,
            cross_node: CrossNode::ALL,
            quiet: false,
            doorbell: false,
            fabric: Fabric {
                strobe: vec![0; k],
                done: vec![0; k],
                go: vec![0; k],
                ev_done: 0,
                mail: vec![None; k],
                mail_slice: vec![0; k],
            },
            nodes: (0..nodes)
                .map(|node| Node {
                    m: SliceMachine::new(
                        MachineConfig {
                            node,
                            nodes,
                            policy,
                            slice_ns: SLICE_NS,
                            logical,
                        },
                        0,
                    ),
                    pending: None,
                    hold: false,
                    skew: 0,
                    log: Vec::new(),
                })
                .collect(),
        }
    }

    /// Run every node until none can move; returns whether anything happened.
    fn run(&mut self) -> bool {
        let mut any = false;
        loop {
            let mut moved = false;
            for k in 0..self.nodes.len() {
                moved |= self.step(k);
            }
            if !moved {
                return any;
            }
            any = true;
        }
    }

    /// One command of node `k`, if it can run.
    fn step(&mut self, k: usize) -> bool {
        let n = &mut self.nodes[k];
        let Some(cmd) = n.pending.take().or_else(|| n.m.poll()) else {
            return false;
        };
        let is_work = matches!(
            cmd,
            Command::MergeAndSchedule { .. }
                | Command::RunP2p
                | Command::RunBbm
                | Command::ReduceRead
                | Command::WriteAndDeliver
                | Command::BeginSlice { .. }
                | Command::SendBatch { .. }
        );
        if n.hold && is_work {
            n.pending = Some(cmd);
            return false;
        }
        let ran = self.exec(k, &cmd);
        let n = &mut self.nodes[k];
        if ran {
            n.log.push(cmd);
        } else if !is_wait(&cmd) {
            n.pending = Some(cmd);
        }
        ran
    }

    fn exec(&mut self, k: usize, cmd: &Command) -> bool {
        let now = self.now;
        let f = &mut self.fabric;
        let n = &mut self.nodes[k];
        match *cmd {
            Command::AwaitStart { .. } => {
                if self.stop {
                    n.m.handle(Event::Stop);
                } else if self.all_done {
                    n.m.handle(Event::AllRanksDone);
                } else {
                    if !self.computing {
                        n.m.handle(Event::NoRankComputing { now });
                        // After an early start the ranks compute again (or the job would
                        // run idle slices back to back for ever).
                        if !n.m.awaiting_start() {
                            self.computing = true;
                        }
                    }
                    if self.gate {
                        self.gate = false;
                        n.m.handle(Event::GateOpen { now });
                    }
                    if self.doorbell && n.m.awaiting_start() {
                        self.doorbell = false;
                        n.m.handle(Event::Doorbell { now });
                    }
                    n.m.handle(Event::TimeAdvanced { now });
                }
                return !n.m.awaiting_start();
            }
            Command::SendStrobe { slice } => f.strobe.iter_mut().for_each(|s| *s = slice),
            Command::AwaitStrobe { last } => match f.strobe[k] {
                s if s == last => return false,
                STOP => n.m.handle(Event::Stop),
                slice => n.m.handle(Event::StrobeReceived { slice }),
            },
            Command::BeginSlice { .. } => {}
            Command::SendBatch { replica, slice } => {
                f.mail[k] = replica;
                f.mail_slice[k] = slice;
                n.m.handle(Event::PhaseWorkDone(Phase::Dem));
            }
            // Several nodes: MSM starts once every node's batch of the slice arrived.
            Command::MergeAndSchedule { slice } if f.mail_slice.iter().any(|&s| s != slice) => {
                return false
            }
            Command::MergeAndSchedule { slice } => {
                let replicas: Vec<ReplicaDigest> = f.mail.iter().flatten().copied().collect();
                n.m.handle(Event::Scheduled {
                    digest: slice * 1000 + n.skew,
                    reductions: self.reductions,
                    cross_node: self.cross_node,
                    replicas: &replicas,
                });
            }
            Command::RunP2p => n.m.handle(Event::PhaseWorkDone(Phase::P2p)),
            Command::RunBbm => n.m.handle(Event::PhaseWorkDone(Phase::Bbm)),
            Command::ReduceRead => n.m.handle(Event::PhaseWorkDone(Phase::RmRead)),
            Command::WriteAndDeliver => n.m.handle(Event::PhaseWorkDone(Phase::Rm)),
            Command::SignalPhaseDone { code } => {
                f.done[k] = code;
                if k != 0 {
                    f.ev_done += 1;
                }
            }
            Command::AttemptMicrostrobe { code } => {
                let opened = f.done.iter().all(|&d| d >= code);
                if opened {
                    f.go.iter_mut().for_each(|g| *g = code);
                }
                n.m.handle(Event::MicrostrobeAttempt { opened });
            }
            Command::AwaitPhaseDoneSignal => {
                if f.ev_done == 0 {
                    return false;
                }
                f.ev_done -= 1;
                n.m.handle(Event::PhaseDoneSignal);
            }
            Command::OpenMicrostrobe { drain_signals, .. } => {
                if f.ev_done < drain_signals {
                    return false;
                }
                f.ev_done -= drain_signals;
            }
            Command::AwaitMicrostrobe { code } => {
                if f.go[k] < code {
                    return false;
                }
                n.m.handle(Event::MicrostrobeOpened);
            }
            Command::EndSlice { .. } => {
                if k == 0 && self.quiet {
                    n.m.handle(Event::QuietSlice);
                }
            }
            Command::Fail(_) => {}
            Command::Finished(_) => {
                if k == 0 {
                    // The runtime's node 0 sends the stop strobe whenever it leaves.
                    f.strobe.iter_mut().for_each(|s| *s = STOP);
                }
            }
        }
        true
    }

    fn log(&self, k: usize) -> &[Command] {
        &self.nodes[k].log
    }
}

fn is_wait(c: &Command) -> bool {
    matches!(
        c,
        Command::AwaitStart { .. }
            | Command::AwaitStrobe { .. }
            | Command::AwaitPhaseDoneSignal
            | Command::AwaitMicrostrobe { .. }
    )
}

/// The work commands of a log, by name, in order.
fn work(log: &[Command]) -> Vec<&'static str> {
    log.iter()
        .filter_map(|c| {
            Some(match c {
                Command::BeginSlice { .. } => "begin",
                Command::SendBatch { .. } => "DEM",
                Command::MergeAndSchedule { .. } => "MSM",
                Command::RunP2p => "P2P",
                Command::RunBbm => "BBM",
                Command::ReduceRead => "RM-read",
                Command::WriteAndDeliver => "RM",
                Command::EndSlice { .. } => "end",
                _ => return None,
            })
        })
        .collect()
}

/// The phases each `SignalPhaseDone` of a log closed.
fn phases_done(log: &[Command]) -> Vec<u64> {
    log.iter()
        .filter_map(|c| match c {
            Command::SignalPhaseDone { code } => Some(code % 8),
            _ => None,
        })
        .collect()
}

fn ends(log: &[Command]) -> Vec<(u64, Usr)> {
    log.iter()
        .filter_map(|c| match c {
            Command::EndSlice { slice, usr } => Some((*slice, *usr)),
            _ => None,
        })
        .collect()
}

fn starts(log: &[Command]) -> Vec<(u64, StartReason, u64)> {
    log.iter()
        .filter_map(|c| match c {
            Command::BeginSlice {
                slice,
                reason,
                getts_ns,
            } => Some((*slice, *reason, *getts_ns)),
            _ => None,
        })
        .collect()
}

const SLICE_WORK: [&str; 8] = ["begin", "DEM", "MSM", "P2P", "BBM", "RM-read", "RM", "end"];

#[test]
fn one_node_runs_the_microphases_in_order() {
    let mut job = Job::new(1, StrobePolicy::Fixed, false);
    job.reductions = true;
    job.run();
    assert_eq!(work(job.log(0)), SLICE_WORK);
    // One node: no RmRead microstrobe even with a reduction.
    let p = |p: Phase| p as u64;
    assert_eq!(
        phases_done(job.log(0)),
        [
            p(Phase::Dem),
            p(Phase::Msm),
            p(Phase::P2p),
            p(Phase::Bbm),
            p(Phase::Rm)
        ]
    );
    assert_eq!(ends(job.log(0)), [(1, Usr::default())]);
    assert!(matches!(
        job.nodes[0].m.poll(),
        Some(Command::AwaitStart { .. })
    ));
}

#[test]
fn several_nodes_run_the_microphases_in_lockstep() {
    let mut job = Job::new(3, StrobePolicy::Fixed, false);
    job.reductions = true;
    job.run();
    job.now = SLICE_NS;
    job.run();
    // No microstrobe closes DEM with several nodes (MSM counts the batches instead).
    let all = [Phase::Msm, Phase::P2p, Phase::Bbm, Phase::RmRead, Phase::Rm];
    let codes: Vec<u64> = all.iter().map(|&p| p as u64).collect();
    for k in 0..3 {
        let mut two = SLICE_WORK.to_vec();
        two.extend(SLICE_WORK);
        assert_eq!(work(job.log(k)), two, "node {k}");
        let mut both = codes.clone();
        both.extend(&codes);
        assert_eq!(phases_done(job.log(k)), both, "node {k}");
    }
    // Node 0 opened every microstrobe, in order, each after every node signalled; RM's
    // ends the slice on node 0 and nobody else waits for it.
    let opened: Vec<(u64, bool)> = job
        .log(0)
        .iter()
        .filter_map(|c| match c {
            Command::OpenMicrostrobe {
                code, wake_others, ..
            } => Some((*code, *wake_others)),
            _ => None,
        })
        .collect();
    let woke: Vec<(u64, bool)> = [1u64, 2]
        .iter()
        .flat_map(|&s| all.iter().map(move |&p| (code(s, p), p != Phase::Rm)))
        .collect();
    assert_eq!(opened, woke);
    let expect: Vec<u64> = woke.iter().filter(|w| w.1).map(|w| w.0).collect();
    for k in 1..3 {
        let awaited: Vec<u64> = job
            .log(k)
            .iter()
            .filter_map(|c| match c {
                Command::AwaitMicrostrobe { code } => Some(*code),
                _ => None,
            })
            .collect();
        assert_eq!(awaited, expect, "node {k}");
    }
    assert!(job.log(1).iter().all(|c| !matches!(
        c,
        Command::AttemptMicrostrobe { .. } | Command::SendStrobe { .. }
    )));
}

#[test]
fn several_nodes_skip_the_microstrobes_of_phases_with_nothing_between_nodes() {
    // Only BBM moves bytes between nodes: the microstrobe before P2P (after MSM) and the
    // one before RM (after BBM) are skipped; P2P's (BBM follows) and RM's run (DEM has
    // none with several nodes).
    let mut job = Job::new(3, StrobePolicy::Fixed, false);
    job.cross_node = CrossNode {
        p2p: false,
        bbm: true,
        rm: false,
    };
    job.run();
    let codes: Vec<u64> = [Phase::P2p, Phase::Rm].iter().map(|&p| p as u64).collect();
    for k in 0..3 {
        assert_eq!(
            work(job.log(k)),
            SLICE_WORK,
            "node {k}: all the work, in order"
        );
        assert_eq!(phases_done(job.log(k)), codes, "node {k}");
    }
    // Nothing crosses at all: only RM's done signals.
    let mut quiet = Job::new(2, StrobePolicy::Fixed, false);
    quiet.cross_node = CrossNode {
        p2p: false,
        bbm: false,
        rm: false,
    };
    quiet.run();
    for k in 0..2 {
        assert_eq!(phases_done(quiet.log(k)), [Phase::Rm as u64], "node {k}");
    }
    // One node never skips (its microstrobes are local): the same as without the report.
    let mut one = Job::new(1, StrobePolicy::Fixed, false);
    one.cross_node = quiet.cross_node;
    one.run();
    assert_eq!(phases_done(one.log(0)).len(), 5);
}

#[test]
fn a_late_node_holds_the_slice_and_counts_retries() {
    let mut job = Job::new(2, StrobePolicy::Fixed, false);
    job.nodes[1].hold = true;
    job.run();
    // Node 0 finished DEM and cannot schedule without node 1's batch.
    let n0 = job.log(0);
    assert_eq!(work(n0), ["begin", "DEM"], "{n0:?}");
    assert!(job.nodes[0].pending.is_some(), "MSM waits for the batch");
    // Node 1 sends its batch, then is late again, in its MSM.
    job.nodes[1].hold = false;
    while !job
        .log(1)
        .iter()
        .any(|c| matches!(c, Command::SendBatch { .. }))
    {
        job.step(1);
    }
    job.nodes[1].hold = true;
    job.run();
    let n0 = job.log(0);
    assert_eq!(work(n0), ["begin", "DEM", "MSM"], "{n0:?}");
    let attempts = n0
        .iter()
        .filter(|c| matches!(c, Command::AttemptMicrostrobe { .. }))
        .count();
    assert_eq!(attempts, 1, "{n0:?}");
    assert_eq!(job.nodes[0].m.poll(), Some(Command::AwaitPhaseDoneSignal));
    // Time passing changes nothing: a late node is waited for, never skipped.
    job.now = 10 * SLICE_NS;
    assert!(!job.run());
    assert!(!work(job.log(0)).contains(&"P2P"));
    // Node 1 catches up: everything completes; the retry is counted for MSM (no DEM
    // microstrobe with several nodes, so no DEM retry).
    job.nodes[1].hold = false;
    job.stop = true; // after this slice
    job.run();
    let e = ends(job.log(0));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].1.dem, 0, "{:?}", e[0].1);
    assert!(e[0].1.msm >= 1, "{:?}", e[0].1);
    assert!(e[0].1.sts >= e[0].1.dem + e[0].1.msm);
    let failed = job
        .log(0)
        .iter()
        .filter(|c| matches!(c, Command::AttemptMicrostrobe { .. }))
        .count() as u32
        - 4; // one successful attempt per microstrobe: MSM, P2P, BBM, RM
    assert_eq!(e[0].1.sts, failed);
    assert_eq!(work(job.log(1)), SLICE_WORK);
    assert_eq!(ends(job.log(1)), [(1, Usr::default())]);
}

#[test]
fn the_first_slice_starts_at_once_then_the_timer() {
    for policy in [StrobePolicy::Fixed, StrobePolicy::Adaptive] {
        let mut job = Job::new(1, policy, false);
        job.now = 10;
        job.run();
        assert_eq!(starts(job.log(0)), [(1, StartReason::First, 0)]);
        // Ranks compute: nothing until the timer (due at 0 + SLICE_NS).
        job.now = SLICE_NS - 1;
        job.run();
        assert_eq!(starts(job.log(0)).len(), 1, "{policy:?}");
        assert_eq!(
            job.nodes[0].m.poll(),
            Some(Command::AwaitStart {
                early: policy == StrobePolicy::Adaptive,
                stretched: false
            })
        );
        assert_eq!(job.nodes[0].m.timeout(), Some(SLICE_NS));
        job.now = SLICE_NS + 7;
        job.run();
        assert_eq!(starts(job.log(0))[1], (2, StartReason::Timer, SLICE_NS + 7));
    }
}

#[test]
fn adaptive_starts_early_when_no_rank_computes_and_fixed_never_does() {
    let mut job = Job::new(2, StrobePolicy::Adaptive, false);
    job.run();
    job.computing = false;
    job.now = 100;
    job.run();
    let s = starts(job.log(0));
    assert_eq!(s[1], (2, StartReason::Early, 100));
    // Node 1 followed the strobe.
    assert_eq!(
        ends(job.log(1)).last().map(|e| e.0),
        Some(s.last().unwrap().0)
    );

    let mut job = Job::new(2, StrobePolicy::Fixed, false);
    job.run();
    job.computing = false;
    job.now = 100;
    job.run();
    assert_eq!(starts(job.log(0)).len(), 1, "fixed never starts early");
    job.now = SLICE_NS;
    job.run();
    assert_eq!(starts(job.log(0))[1], (2, StartReason::Timer, SLICE_NS));
}

#[test]
fn timer_slices_do_not_drift_and_do_not_burst_after_an_overrun() {
    let mut job = Job::new(1, StrobePolicy::Fixed, false);
    job.run();
    // Woken late (1300 instead of 1000): the next one is still due at 2000.
    job.now = 1_300;
    job.run();
    assert_eq!(job.nodes[0].m.timeout(), Some(2 * SLICE_NS));
    // That slice overran by more than a slice: no burst of catch-up slices.
    job.now = 2_000;
    job.nodes[0].hold = true;
    job.run();
    job.now = 5_000;
    job.nodes[0].hold = false;
    job.run();
    // Slice 3 ended at 5000 (started at 2000): its successor was due at
    // max(3000, 5000 - 1000, 2000 + 500) = 4000, so slice 4 starts at once; but then at
    // least half a slice separates two timer starts: no burst of catch-up slices.
    let s = starts(job.log(0));
    assert_eq!(s.len(), 4);
    assert_eq!(s[3], (4, StartReason::Timer, 3_000));
    assert_eq!(job.nodes[0].m.timeout(), Some(5_500));
}

#[test]
fn logical_slices_start_only_at_the_gate() {
    let mut job = Job::new(2, StrobePolicy::Adaptive, true);
    job.computing = false;
    job.now = 50 * SLICE_NS;
    job.run();
    assert!(starts(job.log(0)).is_empty(), "no timer, no early start");
    assert_eq!(
        job.nodes[0].m.poll(),
        Some(Command::AwaitStart {
            early: false,
            stretched: false
        })
    );
    assert_eq!(
        job.nodes[0].m.timeout(),
        None,
        "logical slices have no timer"
    );
    job.gate = true;
    job.run();
    job.now += 30;
    job.gate = true;
    job.run();
    assert_eq!(
        starts(job.log(0)),
        [(1, StartReason::First, 0), (2, StartReason::Logical, 30)]
    );
    assert_eq!(ends(job.log(1)).len(), 2);
}

#[test]
fn stop_ends_every_node_at_a_slice_boundary() {
    let mut job = Job::new(3, StrobePolicy::Fixed, false);
    job.run();
    job.stop = true;
    job.run();
    for k in 0..3 {
        assert_eq!(
            job.log(k).last(),
            Some(&Command::Finished(Stopped::Requested)),
            "node {k}"
        );
        assert_eq!(job.nodes[k].m.poll(), None);
    }
    let mut job = Job::new(1, StrobePolicy::Adaptive, false);
    job.run();
    job.all_done = true;
    job.run();
    assert_eq!(
        job.log(0).last(),
        Some(&Command::Finished(Stopped::AllRanksDone))
    );
}

#[test]
fn diverging_replicas_fail_on_every_node_in_the_next_slice() {
    let mut job = Job::new(2, StrobePolicy::Fixed, false);
    job.run();
    // Slice 1 agreed. Node 1's replica computes a different digest for slice 2.
    job.nodes[1].skew = 1;
    job.now = SLICE_NS;
    job.run();
    assert_eq!(
        ends(job.log(0)).len(),
        2,
        "the divergence shows in the next DEM batch"
    );
    job.now = 2 * SLICE_NS;
    job.run();
    let fail = |k: usize| {
        job.log(k)
            .iter()
            .find_map(|c| match c {
                Command::Fail(e) => Some(e.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("node {k} did not fail"))
    };
    assert_eq!(
        fail(0),
        SliceError::ReplicaDivergence {
            slice: 2,
            node: 0,
            digest: 2000,
            other: 1,
            other_digest: 2001
        }
    );
    assert!(matches!(
        fail(1),
        SliceError::ReplicaDivergence {
            slice: 2,
            node: 1,
            other: 0,
            ..
        }
    ));
    assert!(fail(0).to_string().contains("slice 2"));
    // Neither node went on to schedule slice 3.
    for k in 0..2 {
        assert_eq!(work(job.log(k)).iter().filter(|w| **w == "MSM").count(), 3);
        assert_eq!(job.nodes[k].m.poll(), None);
    }
}

#[test]
fn quiet_slices_stretch_the_adaptive_timer_until_the_doorbell_rings() {
    let mut job = Job::new(2, StrobePolicy::Adaptive, false);
    job.quiet = true;
    job.run();
    assert_eq!(starts(job.log(0)), [(1, StartReason::First, 0)]);
    // A computing rank posts nothing: no timer slice, however long it computes.
    for t in [SLICE_NS, 10 * SLICE_NS, 1_000_000 * SLICE_NS] {
        job.now = t;
        job.run();
        assert_eq!(starts(job.log(0)).len(), 1, "at {t}");
    }
    assert_eq!(job.nodes[0].m.timeout(), None);
    assert_eq!(
        job.nodes[0].m.poll(),
        Some(Command::AwaitStart {
            early: true,
            stretched: true
        })
    );
    // A post rings the doorbell: the timer restarts from it, and its slice starts one
    // period later on every node (the third field is GETTS, the time since the previous
    // start).
    job.quiet = false;
    job.doorbell = true;
    let t = 1_000_000 * SLICE_NS + 7;
    job.now = t;
    job.run();
    assert_eq!(starts(job.log(0)).len(), 1, "a burst of posts is not cut");
    assert_eq!(job.nodes[0].m.timeout(), Some(t + SLICE_NS));
    job.now = t + SLICE_NS;
    job.run();
    assert_eq!(starts(job.log(0))[1], (2, StartReason::Timer, t + SLICE_NS));
    assert_eq!(work(job.log(1)).len(), 2 * SLICE_WORK.len());
    // That slice was not quiet: the timer keeps running.
    job.now = t + 2 * SLICE_NS;
    job.run();
    assert_eq!(starts(job.log(0))[2], (3, StartReason::Timer, SLICE_NS));
}

#[test]
fn a_stretched_strobe_still_starts_early_and_the_fixed_one_never_stretches() {
    let mut job = Job::new(1, StrobePolicy::Adaptive, false);
    job.quiet = true;
    job.run();
    job.now = 50 * SLICE_NS;
    job.computing = false;
    job.run();
    assert_eq!(
        starts(job.log(0))[1],
        (2, StartReason::Early, 50 * SLICE_NS)
    );
    // The papers' fixed strobe ignores quiet slices: a slice per period.
    let mut job = Job::new(1, StrobePolicy::Fixed, false);
    job.quiet = true;
    job.run();
    job.now = SLICE_NS;
    job.run();
    assert_eq!(starts(job.log(0))[1], (2, StartReason::Timer, SLICE_NS));
    // A doorbell means nothing to a timer that is not stretched.
    job.doorbell = true;
    job.now = SLICE_NS + 1;
    job.run();
    assert_eq!(starts(job.log(0)).len(), 2);
}
