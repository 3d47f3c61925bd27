//! Replay across hosts, daemon side (docs/multi-host.md, "Recording across hosts"): what a
//! `strobe node` daemon needs to replay its share of a recording without the file.
//!
//! The Machine Manager (MM) opens the recording, makes a [`ReplayPackage`] of its replay
//! tables and ships each daemon [`ReplayPackage::encode_for_node`] (a packed Cap'n Proto
//! `ReplayPackage` over the control connection): every rank's posting counts and blocked-
//! set flips (node 0's gate looks at every rank; the post limits and quotas of other nodes
//! need only their own, but the tables are a few bytes per descriptor, so all travel), and
//! the recorded timing-dependent outcomes of **that node's ranks only** (the bulk of the
//! log; each rank reads its own at `MPI_Init`). The daemon decodes it
//! ([`ReplayPackage::decode`]) and builds its engine's `SliceSource` with
//! [`ReplayPackage::node_replay`].
//!
//! Verification stays at the MM: node 0's daemon ships its slice records through the
//! `WireSink`, and the MM applies them to the [`Verifier`] built as for a local replay
//! ([`mm_verifier`]); a divergence stops the MM's controller, which daemC's control plane
//! relays to the daemons (their [`NodeReplay::controller`]; the gate then answers
//! `Gate::Stop`). A rank found off its recorded path is seen by node 0's gate, which
//! records the divergence in its [`NodeReplay::shared`] for the daemon to report.
//!
//! Blocked sets: the recorded "blocked when the slice started" is stored relative to a
//! prediction that needs each slice's completions. Node 0's daemon sees them (it makes the
//! slice records): its sink must go through [`NodeReplay::tap`]. Other nodes never see a
//! slice record, so their source answers `blocked` with `None` (observed): on those nodes
//! the answer only feeds the `bpts` metric, never a decision, a digest or deadlock
//! detection (node 0's).

use std::sync::Arc;

use strobe_recorder::replay_log::{completions_of, put_varint, RankLog, ReplayLog, VarintReader};
use strobe_runtime::daemon::wire_sink::{apply_sink_frame, WireSink};
use strobe_runtime::descriptor::Descriptor;
use strobe_runtime::engine::{Gate, LocalMetrics, Payload, SliceRecord, SliceSink, SliceSource};
use strobe_runtime::mmds::RankMmds;
use strobe_runtime::outcome::OutcomeRec;
use strobe_runtime::segment::JobSegment;
use strobe_schema::sink::{
    decode_replay_package, encode_replay_package, WireOutcome, WireRankTables, WireReplayPackage,
};

use crate::control::Controller;
use crate::source::{ReplaySource, Shared, Verifier};
use crate::Recording;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("malformed replay package: {0}")]
    Schema(#[from] strobe_schema::SchemaError),
    #[error("malformed replay package: {0}")]
    Invalid(String),
}

/// A recording's replay tables, as the MM ships them and a daemon replays from them.
#[derive(Clone, Debug)]
pub struct ReplayPackage {
    log: ReplayLog,
    /// The recording's last slice (a decoded package's log has no digests).
    last_slice: u64,
    ends_by_itself: bool,
    recorded_nodes: u32,
    /// The node a decoded package was made for (`None`: made from a recording, all ranks'
    /// outcomes present).
    node: Option<u32>,
}

/// Outcomes under which the recorded job ended by itself, so the replay must too
/// (`ReplaySource`'s rule).
fn ends_by_itself(outcome: Option<&str>) -> bool {
    matches!(outcome, Some("success" | "rank_failed" | "deadlock"))
}

impl ReplayPackage {
    /// The package of an open recording (MM side).
    pub fn from_recording(rec: &Recording) -> ReplayPackage {
        Self::from_log(rec.log.clone(), rec.job.outcome.as_deref(), rec.job.nodes)
    }

    /// The package of a replay log, the recorded job outcome and node count.
    pub fn from_log(log: ReplayLog, outcome: Option<&str>, recorded_nodes: u32) -> ReplayPackage {
        ReplayPackage {
            last_slice: log.last_slice(),
            log,
            ends_by_itself: ends_by_itself(outcome),
            recorded_nodes,
            node: None,
        }
    }

    /// The node a received package was made for (`None`: made from a recording here).
    pub fn node(&self) -> Option<u32> {
        self.node
    }

    pub fn ranks(&self) -> u32 {
        self.log.ranks.len() as u32
    }

    pub fn last_slice(&self) -> u64 {
        self.last_slice
    }

    /// The bytes for node `node`'s daemon, whose ranks are those `is_local` says: every
    /// rank's posting and blocked tables, the outcomes of its own ranks.
    pub fn encode_for_node(&self, node: u32, is_local: impl Fn(u32) -> bool) -> Vec<u8> {
        let ranks = self
            .log
            .ranks
            .iter()
            .enumerate()
            .map(|(r, l)| WireRankTables {
                posting: encode_posting(&l.posting),
                blocked_flips: encode_flips(&l.blocked_flips),
                outcomes: if is_local(r as u32) {
                    l.outcomes
                        .iter()
                        .map(|o| WireOutcome {
                            kind: o.kind,
                            n: o.n,
                            value: o.value,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        encode_replay_package(&WireReplayPackage {
            last_slice: self.last_slice,
            ends_by_itself: self.ends_by_itself,
            node,
            recorded_nodes: self.recorded_nodes,
            ranks,
        })
    }

    /// Read a package a daemon received. Damage is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<ReplayPackage, RemoteError> {
        let w = decode_replay_package(bytes)?;
        if w.ranks.is_empty() {
            return Err(RemoteError::Invalid("no ranks".into()));
        }
        let ranks = w
            .ranks
            .iter()
            .enumerate()
            .map(|(r, t)| {
                let at =
                    |what: &str, e: String| RemoteError::Invalid(format!("rank {r}'s {what}: {e}"));
                Ok(RankLog {
                    posting: decode_posting(&t.posting, w.last_slice)
                        .map_err(|e| at("posting table", e))?,
                    blocked_flips: decode_flips(&t.blocked_flips, w.last_slice)
                        .map_err(|e| at("blocked table", e))?,
                    outcomes: t
                        .outcomes
                        .iter()
                        .map(|o| OutcomeRec {
                            kind: o.kind,
                            n: o.n,
                            value: o.value,
                        })
                        .collect(),
                })
            })
            .collect::<Result<Vec<_>, RemoteError>>()?;
        if w.last_slice > strobe_recorder::recording::validate::MAX_SLICES {
            return Err(RemoteError::Invalid(format!("{} slices", w.last_slice)));
        }
        // Digests stay at the MM: the package knows only the number of slices.
        Ok(ReplayPackage {
            log: ReplayLog {
                ranks,
                digests: Vec::new(),
            },
            last_slice: w.last_slice,
            ends_by_itself: w.ends_by_itself,
            recorded_nodes: w.recorded_nodes,
            node: Some(w.node),
        })
    }

    /// The recorded outcomes of each rank, for the ranks' outcome file
    /// (`strobe_runtime::outcome::encode_file`); empty for ranks of other nodes.
    pub fn outcomes(&self) -> Vec<Vec<OutcomeRec>> {
        self.log.ranks.iter().map(|r| r.outcomes.clone()).collect()
    }

    /// Node `node`'s replay: its engine's source, and the state a daemon drives.
    pub fn node_replay(&self, node: u32) -> NodeReplay {
        let ctl = Arc::new(Controller::new());
        let shared = Arc::new(Shared::new(ctl.clone(), self.ranks()));
        let outcome = self.ends_by_itself.then_some("success");
        let source = Arc::new(ReplaySource::with_last_slice(
            &self.log,
            self.last_slice,
            outcome,
            shared.clone(),
        ));
        NodeReplay {
            node,
            source,
            shared,
            ctl,
        }
    }
}

/// One daemon's replay: give the engine [`NodeReplay::source`] (node 0: and wrap its sink
/// with [`NodeReplay::tap`]).
pub struct NodeReplay {
    node: u32,
    source: Arc<ReplaySource>,
    shared: Arc<Shared>,
    ctl: Arc<Controller>,
}

impl NodeReplay {
    /// The engine's `SliceSource` for this node.
    pub fn source(&self) -> Arc<dyn SliceSource> {
        Arc::new(NodeSource {
            node: self.node,
            inner: self.source.clone(),
        })
    }

    /// Node 0: the sink its engine writes to, `inner` (the `WireSink`) behind a tap that
    /// advances the blocked-set prediction with each slice's completions.
    pub fn tap(&self, inner: Arc<dyn SliceSink>) -> Arc<dyn SliceSink> {
        Arc::new(Tap {
            shared: self.shared.clone(),
            inner,
        })
    }

    /// The controller the gate obeys: `stop(why)` when the MM says the replay ends.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.ctl
    }

    /// Divergence found on this node (a rank off its recorded path), for the daemon's
    /// report to the MM.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

struct NodeSource {
    node: u32,
    inner: Arc<ReplaySource>,
}

impl SliceSource for NodeSource {
    fn quota(&self, slice: u64, rank: u32) -> Option<u64> {
        self.inner.quota(slice, rank)
    }
    fn post_limit(&self, slice: u64, rank: u32) -> Option<u64> {
        self.inner.post_limit(slice, rank)
    }
    fn gate(&self, next: u64, seg: &JobSegment) -> Gate {
        self.inner.gate(next, seg)
    }
    fn blocked(&self, slice: u64, handled: &[Descriptor]) -> Option<Vec<u32>> {
        (self.node == 0)
            .then(|| self.inner.blocked(slice, handled))
            .flatten()
    }
}

struct Tap {
    shared: Arc<Shared>,
    inner: Arc<dyn SliceSink>,
}

impl SliceSink for Tap {
    fn slice(&self, rec: &SliceRecord) {
        self.shared
            .decided(&completions_of(&rec.decisions.decisions));
        self.inner.slice(rec);
    }
    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        self.inner.node_metrics(slice, m);
    }
    fn mmds(&self, ranks: &[RankMmds]) {
        self.inner.mmds(ranks);
    }
    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        self.inner.outcomes(rank, recs);
    }
    fn captures(&self, rank: u32) -> bool {
        self.inner.captures(rank)
    }
    fn payload(&self, p: &Payload) {
        self.inner.payload(p);
    }
}

/// The MM's verifier for a replay across hosts: the slice records node 0's daemon ships
/// are applied to it (`apply_sink_frame`); `inner` gets every call after it (the checks, a
/// regeneration recorder). Built exactly as a local replay builds its own.
pub fn mm_verifier(
    rec: &Recording,
    ctl: Arc<Controller>,
    inner: Option<Arc<dyn SliceSink>>,
    node_of_rank: Vec<u32>,
) -> (Arc<Verifier>, Arc<Shared>) {
    let shared = Arc::new(Shared::new(ctl, rec.job.ranks));
    let v = Arc::new(Verifier::new(&rec.log, shared.clone(), inner, node_of_rank));
    (v, shared)
}

/// Test hook, not a user option: `STROBE_REMOTE_LOOPBACK=1 strobe replay FILE` replays the
/// way a daemon and the Machine Manager will, in one process: the engine's source is built
/// from a replay package that went through [`ReplayPackage::encode_for_node`] and
/// [`ReplayPackage::decode`], and every slice record reaches the verifier as a sink frame
/// (`WireSink` -> `apply_sink_frame`). tests/tests/wire_sink.rs replays with it.
pub const ENV_REMOTE_LOOPBACK: &str = "STROBE_REMOTE_LOOPBACK";

/// Whether [`ENV_REMOTE_LOOPBACK`] is set.
pub fn remote_loopback() -> bool {
    std::env::var_os(ENV_REMOTE_LOOPBACK).is_some_and(|v| !v.is_empty() && v != "0")
}

/// [`ENV_REMOTE_LOOPBACK`]: the engine's source (from the package, sharing `shared` with the
/// verifier, which advances the blocked-set prediction itself) and its sink (a `WireSink`
/// whose frames are applied to `verifier`; `finish()` it after the job).
pub(crate) fn loopback(
    rec: &Recording,
    shared: Arc<Shared>,
    verifier: Arc<dyn SliceSink>,
) -> Result<(Arc<dyn SliceSource>, Arc<WireSink>), RemoteError> {
    let bytes = ReplayPackage::from_recording(rec).encode_for_node(0, |_| true);
    eprintln!(
        "strobe: remote loopback: replay package of {} bytes ({} ranks, {} slices)",
        bytes.len(),
        rec.job.ranks,
        rec.log.last_slice()
    );
    let p = ReplayPackage::decode(&bytes)?;
    let outcome = p.ends_by_itself.then_some("success");
    let source = Arc::new(NodeSource {
        node: 0,
        inner: Arc::new(ReplaySource::with_last_slice(
            &p.log,
            p.last_slice,
            outcome,
            shared.clone(),
        )),
    });
    let send = Box::new(move |frame: Vec<u8>| {
        if let Err(e) = apply_sink_frame(&frame, &*verifier) {
            shared
                .ctl
                .stop(format!("remote loopback: a sink frame was refused: {e}"));
        }
    });
    let wire = WireSink::new(0, Vec::new(), send)
        .map_err(|e| RemoteError::Invalid(format!("starting the wire sink: {e}")))?;
    Ok((source, Arc::new(wire)))
}

// ---- the tables' encodings: the replay log's streams 0 and 2 (docs/recording.md) ---------

fn encode_posting(posting: &[(u64, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut last = 0u64;
    for &(slice, count) in posting {
        put_varint(&mut out, (slice - last) << 1 | (count == 1) as u64);
        if count != 1 {
            put_varint(&mut out, count as u64);
        }
        last = slice;
    }
    out
}

fn decode_posting(bytes: &[u8], last_slice: u64) -> Result<Vec<(u64, u32)>, String> {
    let mut rd = VarintReader::new(bytes);
    let mut out = Vec::new();
    let mut slice = 0u64;
    while !rd.at_end() {
        let v = rd.read()?;
        slice = slice
            .checked_add(v >> 1)
            .filter(|&s| s > 0 && s <= last_slice && (out.is_empty() || v >> 1 > 0))
            .ok_or_else(|| format!("slice out of order or past slice {last_slice}"))?;
        let count = if v & 1 == 1 {
            1
        } else {
            u32::try_from(rd.read()?).map_err(|_| "count too large".to_string())?
        };
        out.push((slice, count));
    }
    Ok(out)
}

fn encode_flips(flips: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut last = 0u64;
    for &f in flips {
        put_varint(&mut out, f - last);
        last = f;
    }
    out
}

fn decode_flips(bytes: &[u8], last_slice: u64) -> Result<Vec<u64>, String> {
    let mut rd = VarintReader::new(bytes);
    let mut out = Vec::new();
    let mut at = 0u64;
    while !rd.at_end() {
        let d = rd.read()?;
        at = at
            .checked_add(d)
            .filter(|&s| d > 0 && s <= last_slice + 1)
            .ok_or_else(|| format!("flip out of order or past slice {last_slice}"))?;
        out.push(at);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
