//! Sink frames (schema `SinkFrame`): a node daemon's `SliceSink` calls as they travel to
//! the Machine Manager's recorder, and the replay package (schema `ReplayPackage`) a daemon
//! replays its ranks from. Plain Rust mirrors of the runtime's types (this crate sits below
//! the runtime): `strobe_runtime::daemon::wire_sink` converts. Durations are nanoseconds.

use capnp::message::Builder;
use strobe_core::descriptor::{Completion, DescRef, Descriptor};
use strobe_core::sched::SliceDecisions;
use strobe_core::slice::StartReason;

use strobe_core::descriptor::DescKind;
use strobe_core::sched::{Decision, DecisionKind, DecisionSource, DecisionVisitor};

use crate::convert::{
    check_version, get_descriptor, reader, reason_from, reason_to, set_descriptor, to_bytes,
    unknown,
};
use crate::generated::strobe_capnp as g;
use crate::{SchemaError, FORMAT_VERSION};

/// The global per-slice metrics (runtime `GlobalMetrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireGlobalMetrics {
    pub getts_ns: u64,
    pub gtdem_ns: u64,
    pub gtmsm_ns: u64,
    pub gtts_ns: u64,
    pub usrsts: u32,
    pub usrdem: u32,
    pub usrmsm: u32,
}

/// One node's local per-slice metrics (runtime `LocalMetrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireLocalMetrics {
    pub node: u32,
    pub letts_ns: u64,
    pub ltdem_ns: u64,
    pub ltmsm_ns: u64,
    pub ltts_ns: u64,
    pub np2pdem: u32,
    pub np2pmsm: u32,
    pub ncolldem: u32,
    pub ncollmsm: u32,
    pub bpts: u32,
    pub t_drain_ns: u64,
    pub t_schedule_ns: u64,
    pub t_p2p_ns: u64,
    pub t_bbm_ns: u64,
    pub t_rm_ns: u64,
    pub t_deliver_ns: u64,
}

/// Where a blocked rank made its call (runtime `CallSite`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireCallSite {
    pub object: String,
    pub offset: u64,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// One slice as node 0 saw it (runtime `SliceRecord`). `decisions.catalog` travels too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireSlice {
    pub slice: u64,
    pub reason: StartReason,
    pub start_ns: u64,
    pub global: WireGlobalMetrics,
    pub descriptors: Vec<Descriptor>,
    pub decisions: SliceDecisions,
    pub digest: u64,
    /// (rank, the job segment's slot encoding of the call it is blocked in).
    pub blocked: Vec<(u32, u32)>,
    pub sites: Vec<(u32, WireCallSite)>,
}

/// One timing-dependent outcome (runtime `OutcomeRec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireOutcome {
    pub kind: u32,
    pub n: u32,
    pub value: u64,
}

/// A histogram bucket (runtime `mmds::Bucket`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireBucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// One primitive's statistics (runtime `PrimitiveStats`); `slot` is its MMDS slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WirePrimitiveStats {
    pub slot: u16,
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub bytes: u64,
    pub latency: Vec<WireBucket>,
    pub size: Vec<WireBucket>,
}

/// A rank's MMDS (runtime `RankMmds`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireRankMmds {
    pub rank: u32,
    pub wall_ns: u64,
    pub compute_ns: u64,
    pub comm_ns: u64,
    pub calls: u64,
    pub finalized: bool,
    pub granularity_min_max: Option<(u64, u64)>,
    pub granularity: Vec<WireBucket>,
    pub overhead: Vec<WireBucket>,
    pub primitives: Vec<WirePrimitiveStats>,
}

/// What a captured rank was handed for one descriptor (runtime `Payload`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WirePayload {
    pub slice: u64,
    pub desc: Descriptor,
    pub completion: Completion,
    pub matched_send: Option<DescRef>,
    pub data: Vec<u8>,
}

/// One `SliceSink` call of a node daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkCall {
    Slice(Box<WireSlice>),
    NodeMetrics {
        slice: u64,
        metrics: WireLocalMetrics,
    },
    Mmds(Vec<WireRankMmds>),
    Outcomes {
        rank: u32,
        recs: Vec<WireOutcome>,
    },
    Payload(Box<WirePayload>),
}

/// A sink frame: the call and the node that sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkFrame {
    pub node: u32,
    pub call: SinkCall,
}

// ---- packed decisions ------------------------------------------------------------------
//
// A slice's decisions travel packed (schema `SinkSlice.decisions`): the core's field
// visitor drives both directions, so no decision field is named here either, and the
// order is the digest's. Measured (docs/multi-host.md): the reflection-driven Cap'n Proto
// codec the recorder's blobs use made a message-heavy slice frame cost ~80 us to encode.

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i32) -> u64 {
    ((v << 1) ^ (v >> 31)) as u32 as u64
}

struct Packer<'a>(&'a mut Vec<u8>);

impl DecisionVisitor for Packer<'_> {
    fn kind(&mut self, kind: DecisionKind) {
        self.0.push(kind as u8);
    }
    fn desc(&mut self, _: &'static str, v: strobe_core::descriptor::DescRef) {
        put_varint(self.0, v.rank as u64);
        put_varint(self.0, v.seq);
    }
    fn u32(&mut self, _: &'static str, v: u32) {
        put_varint(self.0, v as u64);
    }
    fn u64(&mut self, _: &'static str, v: u64) {
        put_varint(self.0, v);
    }
    fn i32(&mut self, _: &'static str, v: i32) {
        put_varint(self.0, zigzag(v));
    }
    fn bool(&mut self, _: &'static str, v: bool) {
        self.0.push(v as u8);
    }
    fn coll_kind(&mut self, _: &'static str, v: DescKind) {
        self.0.push(v as u8);
    }
    fn error(&mut self, _: &'static str, v: u32) {
        put_varint(self.0, v as u64);
    }
    fn desc_list(&mut self, f: &'static str, v: &[strobe_core::descriptor::DescRef]) {
        put_varint(self.0, v.len() as u64);
        for &d in v {
            self.desc(f, d);
        }
    }
    fn u32_list(&mut self, _: &'static str, v: &[u32]) {
        put_varint(self.0, v.len() as u64);
        for &x in v {
            put_varint(self.0, x as u64);
        }
    }
}

fn pack_decisions(sd: &SliceDecisions) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 24 * sd.decisions.len());
    put_varint(&mut out, sd.decisions.len() as u64);
    for d in &sd.decisions {
        d.visit(&mut Packer(&mut out));
    }
    put_varint(&mut out, sd.wake.len() as u64);
    for &r in &sd.wake {
        put_varint(&mut out, r as u64);
    }
    out
}

fn bad_pack(what: &str) -> SchemaError {
    SchemaError::Capnp(capnp::Error::failed(format!(
        "sink frame: packed decisions: {what}"
    )))
}

struct Unpacker<'a> {
    bytes: &'a [u8],
}

impl Unpacker<'_> {
    fn byte(&mut self) -> Result<u8, SchemaError> {
        let (&b, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| bad_pack("truncated"))?;
        self.bytes = rest;
        Ok(b)
    }
    fn varint(&mut self) -> Result<u64, SchemaError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad_pack("a varint longer than 64 bits"))
    }
    fn small<T: TryFrom<u64>>(&mut self) -> Result<T, SchemaError> {
        T::try_from(self.varint()?).map_err(|_| bad_pack("a value out of range"))
    }
    /// A list length: every item takes at least one byte, so a length past what is left
    /// is damage (and nothing is allocated for it).
    fn len(&mut self) -> Result<usize, SchemaError> {
        let n: usize = self.small()?;
        if n > self.bytes.len() {
            return Err(bad_pack("a list longer than the frame"));
        }
        Ok(n)
    }
}

impl DecisionSource for Unpacker<'_> {
    type Error = SchemaError;
    fn desc(&mut self, _: &'static str) -> Result<strobe_core::descriptor::DescRef, SchemaError> {
        Ok(strobe_core::descriptor::DescRef {
            rank: self.small()?,
            seq: self.varint()?,
        })
    }
    fn u32(&mut self, _: &'static str) -> Result<u32, SchemaError> {
        self.small()
    }
    fn u64(&mut self, _: &'static str) -> Result<u64, SchemaError> {
        self.varint()
    }
    fn i32(&mut self, _: &'static str) -> Result<i32, SchemaError> {
        let z: u32 = self.small()?;
        Ok(((z >> 1) as i32) ^ -((z & 1) as i32))
    }
    fn bool(&mut self, _: &'static str) -> Result<bool, SchemaError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad_pack("a bool that is neither 0 nor 1")),
        }
    }
    fn coll_kind(&mut self, _: &'static str) -> Result<DescKind, SchemaError> {
        DescKind::from_u8(self.byte()?).ok_or_else(|| bad_pack("an unknown collective kind"))
    }
    fn error(&mut self, _: &'static str) -> Result<u32, SchemaError> {
        self.small()
    }
    fn desc_list(
        &mut self,
        f: &'static str,
    ) -> Result<Vec<strobe_core::descriptor::DescRef>, SchemaError> {
        let n = self.len()?;
        (0..n).map(|_| self.desc(f)).collect()
    }
    fn u32_list(&mut self, _: &'static str) -> Result<Vec<u32>, SchemaError> {
        let n = self.len()?;
        (0..n).map(|_| self.small()).collect()
    }
}

fn unpack_decisions(slice: u64, bytes: &[u8]) -> Result<SliceDecisions, SchemaError> {
    let mut u = Unpacker { bytes };
    let n = u.len()?;
    let mut decisions = Vec::with_capacity(n);
    for _ in 0..n {
        let k = u.byte()?;
        let kind = DecisionKind::ALL
            .into_iter()
            .find(|&d| d as u8 == k)
            .ok_or_else(|| bad_pack("an unknown decision kind"))?;
        decisions.push(Decision::read(kind, &mut u)?);
    }
    let n = u.len()?;
    let wake = (0..n).map(|_| u.small()).collect::<Result<Vec<u32>, _>>()?;
    if !u.bytes.is_empty() {
        return Err(bad_pack("bytes after the woken ranks"));
    }
    Ok(SliceDecisions {
        slice,
        decisions,
        wake,
        catalog: Vec::new(),
    })
}

// ---- encoding ---------------------------------------------------------------------------

fn set_global(mut b: g::sink_global_metrics::Builder<'_>, m: &WireGlobalMetrics) {
    b.set_getts_ns(m.getts_ns);
    b.set_gtdem_ns(m.gtdem_ns);
    b.set_gtmsm_ns(m.gtmsm_ns);
    b.set_gtts_ns(m.gtts_ns);
    b.set_usrsts(m.usrsts);
    b.set_usrdem(m.usrdem);
    b.set_usrmsm(m.usrmsm);
}

fn get_global(r: g::sink_global_metrics::Reader<'_>) -> WireGlobalMetrics {
    WireGlobalMetrics {
        getts_ns: r.get_getts_ns(),
        gtdem_ns: r.get_gtdem_ns(),
        gtmsm_ns: r.get_gtmsm_ns(),
        gtts_ns: r.get_gtts_ns(),
        usrsts: r.get_usrsts(),
        usrdem: r.get_usrdem(),
        usrmsm: r.get_usrmsm(),
    }
}

fn set_local(mut b: g::sink_local_metrics::Builder<'_>, m: &WireLocalMetrics) {
    b.set_node(m.node);
    b.set_letts_ns(m.letts_ns);
    b.set_ltdem_ns(m.ltdem_ns);
    b.set_ltmsm_ns(m.ltmsm_ns);
    b.set_ltts_ns(m.ltts_ns);
    b.set_np2pdem(m.np2pdem);
    b.set_np2pmsm(m.np2pmsm);
    b.set_ncolldem(m.ncolldem);
    b.set_ncollmsm(m.ncollmsm);
    b.set_bpts(m.bpts);
    b.set_t_drain_ns(m.t_drain_ns);
    b.set_t_schedule_ns(m.t_schedule_ns);
    b.set_t_p2p_ns(m.t_p2p_ns);
    b.set_t_bbm_ns(m.t_bbm_ns);
    b.set_t_rm_ns(m.t_rm_ns);
    b.set_t_deliver_ns(m.t_deliver_ns);
}

fn get_local(r: g::sink_local_metrics::Reader<'_>) -> WireLocalMetrics {
    WireLocalMetrics {
        node: r.get_node(),
        letts_ns: r.get_letts_ns(),
        ltdem_ns: r.get_ltdem_ns(),
        ltmsm_ns: r.get_ltmsm_ns(),
        ltts_ns: r.get_ltts_ns(),
        np2pdem: r.get_np2pdem(),
        np2pmsm: r.get_np2pmsm(),
        ncolldem: r.get_ncolldem(),
        ncollmsm: r.get_ncollmsm(),
        bpts: r.get_bpts(),
        t_drain_ns: r.get_t_drain_ns(),
        t_schedule_ns: r.get_t_schedule_ns(),
        t_p2p_ns: r.get_t_p2p_ns(),
        t_bbm_ns: r.get_t_bbm_ns(),
        t_rm_ns: r.get_t_rm_ns(),
        t_deliver_ns: r.get_t_deliver_ns(),
    }
}

fn set_site(mut b: g::sink_call_site::Builder<'_>, rank: u32, s: &WireCallSite) {
    b.set_rank(rank);
    b.set_object(s.object.as_str());
    b.set_offset(s.offset);
    if let Some(f) = &s.function {
        b.set_has_function(true);
        b.set_function(f.as_str());
    }
    if let Some(f) = &s.file {
        b.set_has_file(true);
        b.set_file(f.as_str());
    }
    if let Some(l) = s.line {
        b.set_has_line(true);
        b.set_line(l);
    }
}

fn text(r: capnp::Result<capnp::text::Reader<'_>>) -> Result<String, SchemaError> {
    r?.to_string()
        .map_err(|e| SchemaError::Capnp(capnp::Error::failed(format!("text: {e}"))))
}

fn get_site(r: g::sink_call_site::Reader<'_>) -> Result<(u32, WireCallSite), SchemaError> {
    let site = WireCallSite {
        object: text(r.get_object())?,
        offset: r.get_offset(),
        function: r
            .get_has_function()
            .then(|| text(r.get_function()))
            .transpose()?,
        file: r.get_has_file().then(|| text(r.get_file())).transpose()?,
        line: r.get_has_line().then(|| r.get_line()),
    };
    Ok((r.get_rank(), site))
}

fn set_descriptors(
    mut l: capnp::struct_list::Builder<'_, g::descriptor::Owned>,
    ds: &[Descriptor],
) {
    for (i, d) in ds.iter().enumerate() {
        set_descriptor(l.reborrow().get(i as u32), d);
    }
}

fn get_descriptors(
    l: capnp::struct_list::Reader<'_, g::descriptor::Owned>,
) -> Result<Vec<Descriptor>, SchemaError> {
    l.iter().map(get_descriptor).collect()
}

fn set_slice(mut b: g::sink_slice::Builder<'_>, s: &WireSlice) {
    b.set_slice(s.slice);
    b.set_reason(reason_to(s.reason));
    b.set_start_ns(s.start_ns);
    set_global(b.reborrow().init_global(), &s.global);
    set_descriptors(
        b.reborrow().init_descriptors(s.descriptors.len() as u32),
        &s.descriptors,
    );
    b.set_decisions(&pack_decisions(&s.decisions));
    b.set_decisions_digest(s.decisions.digest());
    set_descriptors(
        b.reborrow().init_catalog(s.decisions.catalog.len() as u32),
        &s.decisions.catalog,
    );
    b.set_digest(s.digest);
    let mut l = b.reborrow().init_blocked(s.blocked.len() as u32);
    for (i, &(rank, call)) in s.blocked.iter().enumerate() {
        let mut e = l.reborrow().get(i as u32);
        e.set_rank(rank);
        e.set_call(call);
    }
    let mut l = b.init_sites(s.sites.len() as u32);
    for (i, (rank, site)) in s.sites.iter().enumerate() {
        set_site(l.reborrow().get(i as u32), *rank, site);
    }
}

fn get_slice(r: g::sink_slice::Reader<'_>) -> Result<WireSlice, SchemaError> {
    let mut decisions = unpack_decisions(r.get_slice(), r.get_decisions()?)?;
    let computed = decisions.digest();
    if computed != r.get_decisions_digest() {
        return Err(SchemaError::Digest {
            slice: decisions.slice,
            stored: r.get_decisions_digest(),
            computed,
        });
    }
    decisions.catalog = get_descriptors(r.get_catalog()?)?;
    // The catalog is searched by (rank, seq): out of order, lookups would silently fail.
    if !decisions.catalog.windows(2).all(|w| w[0].id() < w[1].id()) {
        return Err(SchemaError::Capnp(capnp::Error::failed(
            "sink frame: the slice's catalog is not sorted by (rank, seq)".into(),
        )));
    }
    Ok(WireSlice {
        slice: r.get_slice(),
        reason: reason_from(r.get_reason().map_err(unknown("start reason"))?),
        start_ns: r.get_start_ns(),
        global: get_global(r.get_global()?),
        descriptors: get_descriptors(r.get_descriptors()?)?,
        decisions,
        digest: r.get_digest(),
        blocked: r
            .get_blocked()?
            .iter()
            .map(|b| (b.get_rank(), b.get_call()))
            .collect(),
        sites: r
            .get_sites()?
            .iter()
            .map(get_site)
            .collect::<Result<_, _>>()?,
    })
}

fn set_buckets(mut l: capnp::struct_list::Builder<'_, g::sink_bucket::Owned>, bs: &[WireBucket]) {
    for (i, b) in bs.iter().enumerate() {
        let mut e = l.reborrow().get(i as u32);
        e.set_lo(b.lo);
        e.set_hi(b.hi);
        e.set_count(b.count);
    }
}

fn get_buckets(l: capnp::struct_list::Reader<'_, g::sink_bucket::Owned>) -> Vec<WireBucket> {
    l.iter()
        .map(|b| WireBucket {
            lo: b.get_lo(),
            hi: b.get_hi(),
            count: b.get_count(),
        })
        .collect()
}

fn set_mmds(mut b: g::sink_rank_mmds::Builder<'_>, m: &WireRankMmds) {
    b.set_rank(m.rank);
    b.set_wall_ns(m.wall_ns);
    b.set_compute_ns(m.compute_ns);
    b.set_comm_ns(m.comm_ns);
    b.set_calls(m.calls);
    b.set_finalized(m.finalized);
    if let Some((lo, hi)) = m.granularity_min_max {
        b.set_has_granularity(true);
        b.set_granularity_min(lo);
        b.set_granularity_max(hi);
    }
    set_buckets(
        b.reborrow().init_granularity(m.granularity.len() as u32),
        &m.granularity,
    );
    set_buckets(
        b.reborrow().init_overhead(m.overhead.len() as u32),
        &m.overhead,
    );
    let mut l = b.init_primitives(m.primitives.len() as u32);
    for (i, p) in m.primitives.iter().enumerate() {
        let mut e = l.reborrow().get(i as u32);
        e.set_slot(p.slot);
        e.set_count(p.count);
        e.set_min_ns(p.min_ns);
        e.set_max_ns(p.max_ns);
        e.set_total_ns(p.total_ns);
        e.set_bytes(p.bytes);
        set_buckets(
            e.reborrow().init_latency(p.latency.len() as u32),
            &p.latency,
        );
        set_buckets(e.init_size(p.size.len() as u32), &p.size);
    }
}

fn get_mmds(r: g::sink_rank_mmds::Reader<'_>) -> Result<WireRankMmds, SchemaError> {
    let primitives = r
        .get_primitives()?
        .iter()
        .map(|p| {
            Ok(WirePrimitiveStats {
                slot: p.get_slot(),
                count: p.get_count(),
                min_ns: p.get_min_ns(),
                max_ns: p.get_max_ns(),
                total_ns: p.get_total_ns(),
                bytes: p.get_bytes(),
                latency: get_buckets(p.get_latency()?),
                size: get_buckets(p.get_size()?),
            })
        })
        .collect::<Result<_, SchemaError>>()?;
    Ok(WireRankMmds {
        rank: r.get_rank(),
        wall_ns: r.get_wall_ns(),
        compute_ns: r.get_compute_ns(),
        comm_ns: r.get_comm_ns(),
        calls: r.get_calls(),
        finalized: r.get_finalized(),
        granularity_min_max: r
            .get_has_granularity()
            .then(|| (r.get_granularity_min(), r.get_granularity_max())),
        granularity: get_buckets(r.get_granularity()?),
        overhead: get_buckets(r.get_overhead()?),
        primitives,
    })
}

fn set_outcomes(
    mut l: capnp::struct_list::Builder<'_, g::sink_outcome::Owned>,
    recs: &[WireOutcome],
) {
    for (i, o) in recs.iter().enumerate() {
        let mut e = l.reborrow().get(i as u32);
        e.set_kind(o.kind);
        e.set_n(o.n);
        e.set_value(o.value);
    }
}

fn get_outcomes(l: capnp::struct_list::Reader<'_, g::sink_outcome::Owned>) -> Vec<WireOutcome> {
    l.iter()
        .map(|o| WireOutcome {
            kind: o.get_kind(),
            n: o.get_n(),
            value: o.get_value(),
        })
        .collect()
}

fn set_payload(mut b: g::sink_payload::Builder<'_>, p: &WirePayload) {
    b.set_slice(p.slice);
    set_descriptor(b.reborrow().init_desc(), &p.desc);
    {
        let c = &p.completion;
        let mut cb = b.reborrow().init_completion();
        cb.set_request(c.request);
        cb.set_source(c.source);
        cb.set_tag(c.tag);
        cb.set_bytes(c.bytes);
        cb.set_error(c.error);
        cb.set_flags(c.flags);
        cb.set_value(c.value);
        cb.set_value2(c.value2);
    }
    if let Some(m) = p.matched_send {
        b.set_has_matched_send(true);
        let mut mb = b.reborrow().init_matched_send();
        mb.set_rank(m.rank);
        mb.set_seq(m.seq);
    }
    b.set_data(&p.data);
}

fn get_payload(r: g::sink_payload::Reader<'_>) -> Result<WirePayload, SchemaError> {
    let c = r.get_completion()?;
    let matched_send = if r.get_has_matched_send() {
        let m = r.get_matched_send()?;
        Some(DescRef {
            rank: m.get_rank(),
            seq: m.get_seq(),
        })
    } else {
        None
    };
    Ok(WirePayload {
        slice: r.get_slice(),
        desc: get_descriptor(r.get_desc()?)?,
        completion: Completion {
            request: c.get_request(),
            source: c.get_source(),
            tag: c.get_tag(),
            bytes: c.get_bytes(),
            error: c.get_error(),
            flags: c.get_flags(),
            value: c.get_value(),
            value2: c.get_value2(),
            ..Completion::default()
        },
        matched_send,
        data: r.get_data()?.to_vec(),
    })
}

/// A sink frame as a packed Cap'n Proto message (schema `SinkFrame`).
pub fn encode_sink_frame(f: &SinkFrame) -> Vec<u8> {
    let mut msg = Builder::new_default();
    let mut root = msg.init_root::<g::sink_frame::Builder>();
    root.set_format_version(FORMAT_VERSION);
    root.set_node(f.node);
    match &f.call {
        SinkCall::Slice(s) => set_slice(root.init_slice(), s),
        SinkCall::NodeMetrics { slice, metrics } => {
            let mut b = root.init_node_metrics();
            b.set_slice(*slice);
            set_local(b.init_metrics(), metrics);
        }
        SinkCall::Mmds(ranks) => {
            let mut l = root.init_mmds(ranks.len() as u32);
            for (i, m) in ranks.iter().enumerate() {
                set_mmds(l.reborrow().get(i as u32), m);
            }
        }
        SinkCall::Outcomes { rank, recs } => {
            let mut b = root.init_outcomes();
            b.set_rank(*rank);
            set_outcomes(b.init_recs(recs.len() as u32), recs);
        }
        SinkCall::Payload(p) => set_payload(root.init_payload(), p),
    }
    to_bytes(&msg)
}

/// Read back [`encode_sink_frame`]'s output. Malformed bytes are an error, never a panic.
pub fn decode_sink_frame(bytes: &[u8]) -> Result<SinkFrame, SchemaError> {
    use g::sink_frame::Which;
    let msg = reader(bytes)?;
    let root: g::sink_frame::Reader = msg.get_root()?;
    check_version(root.get_format_version())?;
    let call = match root.which().map_err(unknown("sink frame"))? {
        Which::Slice(s) => SinkCall::Slice(Box::new(get_slice(s?)?)),
        Which::NodeMetrics(m) => {
            let m = m?;
            SinkCall::NodeMetrics {
                slice: m.get_slice(),
                metrics: get_local(m.get_metrics()?),
            }
        }
        Which::Mmds(l) => SinkCall::Mmds(l?.iter().map(get_mmds).collect::<Result<_, _>>()?),
        Which::Outcomes(o) => {
            let o = o?;
            SinkCall::Outcomes {
                rank: o.get_rank(),
                recs: get_outcomes(o.get_recs()?),
            }
        }
        Which::Payload(p) => SinkCall::Payload(Box::new(get_payload(p?)?)),
    };
    Ok(SinkFrame {
        node: root.get_node(),
        call,
    })
}

// ---- the replay package -----------------------------------------------------------------

/// One rank's replay tables (schema `ReplayRankTables`): `posting` and `blocked_flips` in
/// the replay log's varint stream formats (streams 0 and 2), `outcomes` decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireRankTables {
    pub posting: Vec<u8>,
    pub blocked_flips: Vec<u8>,
    pub outcomes: Vec<WireOutcome>,
}

/// What a node daemon replays its share of a recording from (schema `ReplayPackage`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireReplayPackage {
    pub last_slice: u64,
    pub ends_by_itself: bool,
    pub node: u32,
    pub recorded_nodes: u32,
    pub ranks: Vec<WireRankTables>,
}

/// A replay package as a packed Cap'n Proto message.
pub fn encode_replay_package(p: &WireReplayPackage) -> Vec<u8> {
    let mut msg = Builder::new_default();
    let mut root = msg.init_root::<g::replay_package::Builder>();
    root.set_format_version(FORMAT_VERSION);
    root.set_last_slice(p.last_slice);
    root.set_ends_by_itself(p.ends_by_itself);
    root.set_node(p.node);
    root.set_recorded_nodes(p.recorded_nodes);
    let mut l = root.init_ranks(p.ranks.len() as u32);
    for (i, r) in p.ranks.iter().enumerate() {
        let mut e = l.reborrow().get(i as u32);
        e.set_posting(&r.posting);
        e.set_blocked_flips(&r.blocked_flips);
        set_outcomes(e.init_outcomes(r.outcomes.len() as u32), &r.outcomes);
    }
    to_bytes(&msg)
}

/// Read back [`encode_replay_package`]'s output.
pub fn decode_replay_package(bytes: &[u8]) -> Result<WireReplayPackage, SchemaError> {
    let msg = reader(bytes)?;
    let root: g::replay_package::Reader = msg.get_root()?;
    check_version(root.get_format_version())?;
    let ranks = root
        .get_ranks()?
        .iter()
        .map(|r| {
            Ok(WireRankTables {
                posting: r.get_posting()?.to_vec(),
                blocked_flips: r.get_blocked_flips()?.to_vec(),
                outcomes: get_outcomes(r.get_outcomes()?),
            })
        })
        .collect::<Result<_, SchemaError>>()?;
    Ok(WireReplayPackage {
        last_slice: root.get_last_slice(),
        ends_by_itself: root.get_ends_by_itself(),
        node: root.get_node(),
        recorded_nodes: root.get_recorded_nodes(),
        ranks,
    })
}
