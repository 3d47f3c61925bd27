//! The slice sink over the wire (recording across hosts, docs/multi-host.md "Recording
//! across hosts"): a node daemon's engine writes into a [`WireSink`], which turns every
//! `SliceSink` call into a self-describing *sink frame* (schema `SinkFrame`, a packed Cap'n
//! Proto message) and hands it to the control connection; the Machine Manager feeds each
//! frame to its real sinks (the recorder, the correctness checks, a replay's verifier) with
//! [`apply_sink_frame`].
//!
//! The slice path only copies: a call becomes a plain value on a bounded queue, and one
//! encoder thread per sink encodes and sends, in queue order. So the frames of one daemon
//! leave in the order its calls were made, and a rank's outcomes (only ever reported by its
//! own node) stay in the rank's order. Nothing more is needed at the Machine Manager: the
//! recorder accepts a slice's node metrics, outcomes and payloads before or after its slice
//! row (they are independent rows, and the replay log's streams are per rank), exactly as
//! with `--nodes K` threads in one process today. It must only apply every frame of every
//! daemon before it finishes the recording (a daemon calls [`WireSink::flush`] before it
//! reports its exit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strobe_schema::sink::{
    WireBucket, WireCallSite, WireGlobalMetrics, WireLocalMetrics, WireOutcome, WirePayload,
    WirePrimitiveStats, WireRankMmds, WireSlice,
};
use strobe_schema::{decode_sink_frame, encode_sink_frame, SchemaError, SinkCall, SinkFrame};

use crate::calls::Primitive;
use crate::engine::{GlobalMetrics, LocalMetrics, Payload, SliceRecord, SliceSink};
use crate::mmds::{Bucket, PrimitiveStats, RankMmds};
use crate::outcome::OutcomeRec;
use crate::segment::BlockedCall;
use crate::symbolize::CallSite;

/// Where a [`WireSink`] hands its frames (the daemon's control connection).
pub type FrameSender = Box<dyn Fn(Vec<u8>) + Send + Sync>;

/// Calls queued between the slice path and the encoder thread before the slice path waits
/// (back pressure, like the recorder's queue).
const QUEUE: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("malformed sink frame: {0}")]
    Schema(#[from] SchemaError),
    #[error("malformed sink frame: {0}")]
    Invalid(String),
}

/// What a [`WireSink`] shipped so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    pub frames: u64,
    pub bytes: u64,
    /// `slice` frames and their bytes.
    pub slice_frames: u64,
    pub slice_bytes: u64,
    /// Nanoseconds the encoder thread spent encoding (CPU, not on the slice path).
    pub encode_ns: u64,
}

#[derive(Default)]
struct Counters {
    frames: AtomicU64,
    bytes: AtomicU64,
    slice_frames: AtomicU64,
    slice_bytes: AtomicU64,
    encode_ns: AtomicU64,
}

enum Job {
    Call(SinkCall),
    /// Answered once every call queued before it was handed to the sender.
    Flush(SyncSender<()>),
}

/// A `SliceSink` that ships every call as a sink frame.
pub struct WireSink {
    node: u32,
    captures: Vec<bool>,
    tx: Mutex<Option<SyncSender<Job>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
}

impl WireSink {
    /// A sink for node `node`'s engine. `captures[r]`: whether rank `r`'s deliveries are
    /// captured (`strobe record --capture-payloads`, decided by the Machine Manager).
    pub fn new(node: u32, captures: Vec<bool>, send: FrameSender) -> std::io::Result<WireSink> {
        let (tx, rx) = sync_channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let worker = std::thread::Builder::new()
            .name(format!("strobe-wire{node}"))
            .spawn(move || encoder(node, rx, send, &c))?;
        Ok(WireSink {
            node,
            captures,
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(worker)),
            counters,
        })
    }

    fn queue(&self, job: Job) {
        let tx = self.tx.lock().expect("wire sink queue").clone();
        // After `finish` (the job is over) a late call has nowhere to go: dropped.
        if let Some(tx) = tx {
            let _ = tx.send(job);
        }
    }

    /// Wait until every call made so far was encoded and handed to the sender.
    pub fn flush(&self) {
        let (done_tx, done_rx) = sync_channel(1);
        self.queue(Job::Flush(done_tx));
        let _ = done_rx.recv();
    }

    /// Flush and stop the encoder thread; later calls are dropped.
    pub fn finish(&self) {
        drop(self.tx.lock().expect("wire sink queue").take());
        if let Some(w) = self.worker.lock().expect("wire sink worker").take() {
            let _ = w.join();
        }
    }

    pub fn stats(&self) -> WireStats {
        let c = &self.counters;
        WireStats {
            frames: c.frames.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            slice_frames: c.slice_frames.load(Ordering::Relaxed),
            slice_bytes: c.slice_bytes.load(Ordering::Relaxed),
            encode_ns: c.encode_ns.load(Ordering::Relaxed),
        }
    }

    pub fn node(&self) -> u32 {
        self.node
    }
}

impl Drop for WireSink {
    fn drop(&mut self) {
        self.finish();
    }
}

fn encoder(node: u32, rx: Receiver<Job>, send: FrameSender, c: &Counters) {
    for job in rx {
        match job {
            Job::Call(call) => {
                let t = Instant::now();
                let is_slice = matches!(call, SinkCall::Slice(_));
                let frame = encode_sink_frame(&SinkFrame { node, call });
                c.encode_ns
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                c.frames.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
                if is_slice {
                    c.slice_frames.fetch_add(1, Ordering::Relaxed);
                    c.slice_bytes
                        .fetch_add(frame.len() as u64, Ordering::Relaxed);
                }
                send(frame);
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl SliceSink for WireSink {
    fn slice(&self, rec: &SliceRecord) {
        self.queue(Job::Call(SinkCall::Slice(Box::new(slice_to_wire(rec)))));
    }

    fn node_metrics(&self, slice: u64, m: &LocalMetrics) {
        self.queue(Job::Call(SinkCall::NodeMetrics {
            slice,
            metrics: local_to_wire(m),
        }));
    }

    fn mmds(&self, ranks: &[RankMmds]) {
        self.queue(Job::Call(SinkCall::Mmds(
            ranks.iter().map(mmds_to_wire).collect(),
        )));
    }

    fn outcomes(&self, rank: u32, recs: &[OutcomeRec]) {
        self.queue(Job::Call(SinkCall::Outcomes {
            rank,
            recs: recs
                .iter()
                .map(|o| WireOutcome {
                    kind: o.kind,
                    n: o.n,
                    value: o.value,
                })
                .collect(),
        }));
    }

    fn captures(&self, rank: u32) -> bool {
        self.captures.get(rank as usize).copied().unwrap_or(false)
    }

    fn payload(&self, p: &Payload) {
        self.queue(Job::Call(SinkCall::Payload(Box::new(WirePayload {
            slice: p.slice,
            desc: p.desc,
            completion: p.completion,
            matched_send: p.matched_send,
            data: p.data.clone(),
        }))));
    }
}

/// Decode one sink frame and make the call it carries on `sink` (the Machine Manager's
/// recorder, checks, verifier). Returns the node that sent it. A malformed frame is an
/// error and calls nothing.
pub fn apply_sink_frame(frame: &[u8], sink: &dyn SliceSink) -> Result<u32, WireError> {
    apply_decoded(decode_sink_frame(frame)?, sink)
}

fn apply_decoded(f: SinkFrame, sink: &dyn SliceSink) -> Result<u32, WireError> {
    match f.call {
        SinkCall::Slice(s) => sink.slice(&slice_from_wire(*s)),
        SinkCall::NodeMetrics { slice, metrics } => {
            sink.node_metrics(slice, &local_from_wire(&metrics))
        }
        SinkCall::Mmds(ranks) => {
            let ranks = ranks
                .iter()
                .map(mmds_from_wire)
                .collect::<Result<Vec<_>, _>>()?;
            sink.mmds(&ranks)
        }
        SinkCall::Outcomes { rank, recs } => {
            let recs: Vec<OutcomeRec> = recs
                .iter()
                .map(|o| OutcomeRec {
                    kind: o.kind,
                    n: o.n,
                    value: o.value,
                })
                .collect();
            sink.outcomes(rank, &recs)
        }
        SinkCall::Payload(p) => sink.payload(&Payload {
            slice: p.slice,
            desc: p.desc,
            completion: p.completion,
            matched_send: p.matched_send,
            data: p.data,
        }),
    }
    Ok(f.node)
}

/// [`apply_sink_frame`] for a frame that arrived on node `node`'s control connection (the
/// Machine Manager's use): refused, calling nothing, if it claims another node, if a node
/// other than 0 sends a slice record (only the Strobe Sender's node makes them), or if its
/// node metrics are another node's. A daemon cannot write in another node's name.
pub fn apply_node_frame(frame: &[u8], node: u32, sink: &dyn SliceSink) -> Result<(), WireError> {
    let f = decode_sink_frame(frame)?;
    let wrong = match &f.call {
        _ if f.node != node => Some(format!(
            "node {node}'s connection sent a frame of node {}",
            f.node
        )),
        SinkCall::Slice(s) if node != 0 => Some(format!(
            "node {node} sent slice {}'s record (only node 0 makes slice records)",
            s.slice
        )),
        SinkCall::NodeMetrics { metrics, .. } if metrics.node != node => {
            Some(format!("node {node} sent node {}'s metrics", metrics.node))
        }
        _ => None,
    };
    if let Some(why) = wrong {
        return Err(WireError::Invalid(why));
    }
    apply_decoded(f, sink).map(drop)
}

/// The Machine Manager's receiving end: every sink frame of every daemon goes through
/// [`FrameApplier::frame`] (daemC's `machine::FrameSink` is this one method: `impl
/// FrameSink for FrameApplier` forwards to it) into the MM's sinks (the recorder, the
/// checks, a replay's verifier). A refused frame is counted and the first reason kept,
/// never a panic; the MM reports it after the job (the recording then lacks what the frame
/// carried, so it must not be called complete).
pub struct FrameApplier {
    sink: Arc<dyn SliceSink>,
    refused: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl FrameApplier {
    pub fn new(sink: Arc<dyn SliceSink>) -> FrameApplier {
        FrameApplier {
            sink,
            refused: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }
    }

    /// One frame from node `node`'s control connection, in that connection's order.
    pub fn frame(&self, node: u32, bytes: &[u8]) {
        if let Err(e) = apply_node_frame(bytes, node, &*self.sink) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(node, "sink frame refused: {e}");
            self.first_error
                .lock()
                .expect("frame applier")
                .get_or_insert_with(|| format!("node {node}: {e}"));
        }
    }

    /// How many frames were refused, and why the first one was.
    pub fn refused(&self) -> (u64, Option<String>) {
        (
            self.refused.load(Ordering::Relaxed),
            self.first_error.lock().expect("frame applier").clone(),
        )
    }
}

// ---- conversions ------------------------------------------------------------------------

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

fn dur(n: u64) -> Duration {
    Duration::from_nanos(n)
}

fn slice_to_wire(rec: &SliceRecord) -> WireSlice {
    let g = &rec.global;
    WireSlice {
        slice: rec.slice,
        reason: rec.reason,
        start_ns: rec.start_ns,
        global: WireGlobalMetrics {
            getts_ns: ns(g.getts),
            gtdem_ns: ns(g.gtdem),
            gtmsm_ns: ns(g.gtmsm),
            gtts_ns: ns(g.gtts),
            usrsts: g.usrsts,
            usrdem: g.usrdem,
            usrmsm: g.usrmsm,
        },
        descriptors: rec.descriptors.clone(),
        decisions: rec.decisions.clone(),
        digest: rec.digest,
        blocked: rec.blocked.iter().map(|&(r, c)| (r, c.to_raw())).collect(),
        sites: rec
            .sites
            .iter()
            .map(|(r, s)| {
                (
                    *r,
                    WireCallSite {
                        object: s.object.clone(),
                        offset: s.offset,
                        function: s.function.clone(),
                        file: s.file.clone(),
                        line: s.line,
                    },
                )
            })
            .collect(),
    }
}

fn slice_from_wire(s: WireSlice) -> SliceRecord {
    let g = &s.global;
    SliceRecord {
        slice: s.slice,
        reason: s.reason,
        start_ns: s.start_ns,
        global: GlobalMetrics {
            getts: dur(g.getts_ns),
            gtdem: dur(g.gtdem_ns),
            gtmsm: dur(g.gtmsm_ns),
            gtts: dur(g.gtts_ns),
            usrsts: g.usrsts,
            usrdem: g.usrdem,
            usrmsm: g.usrmsm,
        },
        descriptors: s.descriptors,
        decisions: s.decisions,
        digest: s.digest,
        blocked: s
            .blocked
            .into_iter()
            .map(|(r, c)| (r, BlockedCall::from_raw(c)))
            .collect(),
        sites: s
            .sites
            .into_iter()
            .map(|(r, w)| {
                let site = CallSite {
                    object: w.object,
                    offset: w.offset,
                    function: w.function,
                    file: w.file,
                    line: w.line,
                };
                (r, Arc::new(site))
            })
            .collect(),
    }
}

fn local_to_wire(m: &LocalMetrics) -> WireLocalMetrics {
    WireLocalMetrics {
        node: m.node,
        letts_ns: ns(m.letts),
        ltdem_ns: ns(m.ltdem),
        ltmsm_ns: ns(m.ltmsm),
        ltts_ns: ns(m.ltts),
        np2pdem: m.np2pdem,
        np2pmsm: m.np2pmsm,
        ncolldem: m.ncolldem,
        ncollmsm: m.ncollmsm,
        bpts: m.bpts,
        t_drain_ns: ns(m.t_drain),
        t_schedule_ns: ns(m.t_schedule),
        t_p2p_ns: ns(m.t_p2p),
        t_bbm_ns: ns(m.t_bbm),
        t_rm_ns: ns(m.t_rm),
        t_deliver_ns: ns(m.t_deliver),
    }
}

fn local_from_wire(m: &WireLocalMetrics) -> LocalMetrics {
    LocalMetrics {
        node: m.node,
        letts: dur(m.letts_ns),
        ltdem: dur(m.ltdem_ns),
        ltmsm: dur(m.ltmsm_ns),
        ltts: dur(m.ltts_ns),
        np2pdem: m.np2pdem,
        np2pmsm: m.np2pmsm,
        ncolldem: m.ncolldem,
        ncollmsm: m.ncollmsm,
        bpts: m.bpts,
        t_drain: dur(m.t_drain_ns),
        t_schedule: dur(m.t_schedule_ns),
        t_p2p: dur(m.t_p2p_ns),
        t_bbm: dur(m.t_bbm_ns),
        t_rm: dur(m.t_rm_ns),
        t_deliver: dur(m.t_deliver_ns),
    }
}

fn buckets_to_wire(b: &[Bucket]) -> Vec<WireBucket> {
    b.iter()
        .map(|b| WireBucket {
            lo: b.lo,
            hi: b.hi,
            count: b.count,
        })
        .collect()
}

fn buckets_from_wire(b: &[WireBucket]) -> Vec<Bucket> {
    b.iter()
        .map(|b| Bucket {
            lo: b.lo,
            hi: b.hi,
            count: b.count,
        })
        .collect()
}

fn mmds_to_wire(m: &RankMmds) -> WireRankMmds {
    WireRankMmds {
        rank: m.rank,
        wall_ns: m.wall_ns,
        compute_ns: m.compute_ns,
        comm_ns: m.comm_ns,
        calls: m.calls,
        finalized: m.finalized,
        granularity_min_max: m.granularity_min_max,
        granularity: buckets_to_wire(&m.granularity),
        overhead: buckets_to_wire(&m.overhead),
        primitives: m
            .primitives
            .iter()
            .map(|p| WirePrimitiveStats {
                slot: p.primitive as u16,
                count: p.count,
                min_ns: p.min_ns,
                max_ns: p.max_ns,
                total_ns: p.total_ns,
                bytes: p.bytes,
                latency: buckets_to_wire(&p.latency),
                size: buckets_to_wire(&p.size),
            })
            .collect(),
    }
}

fn mmds_from_wire(m: &WireRankMmds) -> Result<RankMmds, WireError> {
    let primitives = m
        .primitives
        .iter()
        .map(|p| {
            let primitive = Primitive::from_slot(p.slot as usize).ok_or_else(|| {
                WireError::Invalid(format!(
                    "rank {}: MMDS slot {} names no MPI primitive this strobe knows",
                    m.rank, p.slot
                ))
            })?;
            Ok(PrimitiveStats {
                primitive,
                count: p.count,
                min_ns: p.min_ns,
                max_ns: p.max_ns,
                total_ns: p.total_ns,
                bytes: p.bytes,
                latency: buckets_from_wire(&p.latency),
                size: buckets_from_wire(&p.size),
            })
        })
        .collect::<Result<_, WireError>>()?;
    Ok(RankMmds {
        rank: m.rank,
        wall_ns: m.wall_ns,
        compute_ns: m.compute_ns,
        comm_ns: m.comm_ns,
        calls: m.calls,
        finalized: m.finalized,
        granularity_min_max: m.granularity_min_max,
        granularity: buckets_from_wire(&m.granularity),
        overhead: buckets_from_wire(&m.overhead),
        primitives,
    })
}

#[cfg(test)]
#[path = "wire_sink_tests.rs"]
mod tests;
