//! The one place that names generated Cap'n Proto types: conversions between them and the
//! runtime's own types, and the byte encodings the rest of strobe uses.
//!
//! Encodings are *packed* Cap'n Proto messages (`capnp::serialize_packed`): decision sets
//! are mostly small integers and zeros, which packing squeezes well, and the recorder stores
//! one per slice. Decoders verify what they can (format version, enum values, the decision
//! digest) and return [`SchemaError`] instead of panicking on bad input.

use capnp::message::{Builder, ReaderOptions};
use std::cell::RefCell;

use capnp::schema::{Field, StructSchema};
use capnp::{dynamic_list, dynamic_struct, dynamic_value};
use strobe_core::descriptor::{DescKind, DescRef, Descriptor, RtError};
use strobe_core::sched::{Decision, DecisionKind, DecisionSource, DecisionVisitor, SliceDecisions};
use strobe_core::slice::{Phase, StartReason};

use crate::generated::strobe_capnp as g;
use crate::FORMAT_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("malformed Cap'n Proto message: {0}")]
    Capnp(#[from] capnp::Error),
    #[error("unknown {what} value {value} (written by a newer strobe?)")]
    Unknown { what: &'static str, value: u16 },
    #[error("format version {found} is newer than this strobe's {supported}: use a newer strobe")]
    TooNew { found: u32, supported: u32 },
    #[error("decision set of slice {slice}: stored digest {stored:016x} but the decisions digest to {computed:016x}")]
    Digest {
        slice: u64,
        stored: u64,
        computed: u64,
    },
}

/// What crosses between node managers (schema `NodeMessage`), in the runtime's types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeMessage {
    /// The global strobe opens `slice`.
    Strobe { slice: u64, reason: StartReason },
    /// DEM: a node's Buffer Sender delivers its ranks' descriptors, canonical order.
    Batch {
        slice: u64,
        node: u32,
        descriptors: Vec<Descriptor>,
    },
    /// A node finished a microphase.
    Done { slice: u64, node: u32, phase: Phase },
    /// A node's decision set (replica cross-check). The catalog does not travel.
    Decisions(SliceDecisions),
    /// The job is going down.
    Shutdown,
}

pub(crate) fn unknown(what: &'static str) -> impl Fn(capnp::NotInSchema) -> SchemaError {
    move |e| SchemaError::Unknown { what, value: e.0 }
}

pub(crate) fn check_version(found: u32) -> Result<(), SchemaError> {
    if found > FORMAT_VERSION {
        return Err(SchemaError::TooNew {
            found,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

pub(crate) fn to_bytes<A: capnp::message::Allocator>(msg: &Builder<A>) -> Vec<u8> {
    let mut out = Vec::new();
    capnp::serialize_packed::write_message(&mut out, msg)
        .expect("writing to a Vec<u8> cannot fail");
    out
}

pub(crate) fn reader(
    bytes: &[u8],
) -> Result<capnp::message::Reader<capnp::serialize::OwnedSegments>, SchemaError> {
    // Packing turns at most 256 words of zeros into 2 bytes, so a genuine message is never
    // larger than this; a corrupt header claiming more is refused before anything is
    // allocated for it.
    let limit = (bytes.len() as u64 * 128).max(1024) as usize;
    let mut opts = ReaderOptions::new();
    opts.traversal_limit_in_words(Some(limit));
    let mut input = bytes;
    Ok(capnp::serialize_packed::read_message(&mut input, opts)?)
}

// ---- enums ------------------------------------------------------------------------------

fn kind_to(k: Option<DescKind>) -> g::DescKind {
    use DescKind as K;
    let Some(k) = k else {
        return g::DescKind::Invalid;
    };
    match k {
        K::Send => g::DescKind::Send,
        K::Ssend => g::DescKind::Ssend,
        K::Rsend => g::DescKind::Rsend,
        K::Recv => g::DescKind::Recv,
        K::Probe => g::DescKind::Probe,
        K::Iprobe => g::DescKind::Iprobe,
        K::Cancel => g::DescKind::Cancel,
        K::Barrier => g::DescKind::Barrier,
        K::Bcast => g::DescKind::Bcast,
        K::Reduce => g::DescKind::Reduce,
        K::Allreduce => g::DescKind::Allreduce,
        K::Scatter => g::DescKind::Scatter,
        K::Scatterv => g::DescKind::Scatterv,
        K::Gather => g::DescKind::Gather,
        K::Gatherv => g::DescKind::Gatherv,
        K::Allgather => g::DescKind::Allgather,
        K::Allgatherv => g::DescKind::Allgatherv,
        K::Alltoall => g::DescKind::Alltoall,
        K::Alltoallv => g::DescKind::Alltoallv,
        K::ReduceScatter => g::DescKind::ReduceScatter,
        K::ReduceScatterBlock => g::DescKind::ReduceScatterBlock,
        K::Scan => g::DescKind::Scan,
        K::Exscan => g::DescKind::Exscan,
        K::CommDup => g::DescKind::CommDup,
        K::CommSplit => g::DescKind::CommSplit,
        K::CommFree => g::DescKind::CommFree,
        K::Finalize => g::DescKind::Finalize,
    }
}

fn kind_from(k: g::DescKind) -> Option<DescKind> {
    use DescKind as K;
    Some(match k {
        g::DescKind::Invalid => return None,
        g::DescKind::Send => K::Send,
        g::DescKind::Ssend => K::Ssend,
        g::DescKind::Rsend => K::Rsend,
        g::DescKind::Recv => K::Recv,
        g::DescKind::Probe => K::Probe,
        g::DescKind::Iprobe => K::Iprobe,
        g::DescKind::Cancel => K::Cancel,
        g::DescKind::Barrier => K::Barrier,
        g::DescKind::Bcast => K::Bcast,
        g::DescKind::Reduce => K::Reduce,
        g::DescKind::Allreduce => K::Allreduce,
        g::DescKind::Scatter => K::Scatter,
        g::DescKind::Scatterv => K::Scatterv,
        g::DescKind::Gather => K::Gather,
        g::DescKind::Gatherv => K::Gatherv,
        g::DescKind::Allgather => K::Allgather,
        g::DescKind::Allgatherv => K::Allgatherv,
        g::DescKind::Alltoall => K::Alltoall,
        g::DescKind::Alltoallv => K::Alltoallv,
        g::DescKind::ReduceScatter => K::ReduceScatter,
        g::DescKind::ReduceScatterBlock => K::ReduceScatterBlock,
        g::DescKind::Scan => K::Scan,
        g::DescKind::Exscan => K::Exscan,
        g::DescKind::CommDup => K::CommDup,
        g::DescKind::CommSplit => K::CommSplit,
        g::DescKind::CommFree => K::CommFree,
        g::DescKind::Finalize => K::Finalize,
    })
}

fn error_to(e: RtError) -> g::RtError {
    match e {
        RtError::Ok => g::RtError::Ok,
        RtError::Truncate => g::RtError::Truncate,
        RtError::Rank => g::RtError::Rank,
        RtError::Comm => g::RtError::Comm,
        RtError::CollectiveMismatch => g::RtError::CollectiveMismatch,
        RtError::Op => g::RtError::Op,
        RtError::Arg => g::RtError::Arg,
        RtError::Aborted => g::RtError::Aborted,
        RtError::Count => g::RtError::Count,
        RtError::Buffer => g::RtError::Buffer,
    }
}

fn error_from(e: g::RtError) -> RtError {
    match e {
        g::RtError::Ok => RtError::Ok,
        g::RtError::Truncate => RtError::Truncate,
        g::RtError::Rank => RtError::Rank,
        g::RtError::Comm => RtError::Comm,
        g::RtError::CollectiveMismatch => RtError::CollectiveMismatch,
        g::RtError::Op => RtError::Op,
        g::RtError::Arg => RtError::Arg,
        g::RtError::Aborted => RtError::Aborted,
        g::RtError::Count => RtError::Count,
        g::RtError::Buffer => RtError::Buffer,
    }
}

fn phase_to(p: Phase) -> g::Phase {
    match p {
        Phase::Dem => g::Phase::Dem,
        Phase::Msm => g::Phase::Msm,
        Phase::P2p => g::Phase::P2p,
        Phase::Bbm => g::Phase::Bbm,
        Phase::RmRead => g::Phase::RmRead,
        Phase::Rm => g::Phase::Rm,
    }
}

fn phase_from(p: g::Phase) -> Phase {
    match p {
        g::Phase::Dem => Phase::Dem,
        g::Phase::Msm => Phase::Msm,
        g::Phase::P2p => Phase::P2p,
        g::Phase::Bbm => Phase::Bbm,
        g::Phase::RmRead => Phase::RmRead,
        g::Phase::Rm => Phase::Rm,
    }
}

pub(crate) fn reason_to(r: StartReason) -> g::StartReason {
    match r {
        StartReason::First => g::StartReason::First,
        StartReason::Timer => g::StartReason::Timer,
        StartReason::Early => g::StartReason::Early,
        StartReason::Logical => g::StartReason::Logical,
    }
}

pub(crate) fn reason_from(r: g::StartReason) -> StartReason {
    match r {
        g::StartReason::First => StartReason::First,
        g::StartReason::Timer => StartReason::Timer,
        g::StartReason::Early => StartReason::Early,
        g::StartReason::Logical => StartReason::Logical,
    }
}

// ---- structs ----------------------------------------------------------------------------

/// A descriptor's fields. A kind code the runtime does not know is written as `invalid`
/// and read back as kind 0 (equally invalid); everything else round-trips exactly.
pub(crate) fn set_descriptor(mut b: g::descriptor::Builder<'_>, d: &Descriptor) {
    b.set_rank(d.rank);
    b.set_seq(d.seq);
    b.set_kind(kind_to(d.kind()));
    b.set_flags(d.flags);
    b.set_elem(d.elem);
    b.set_op(d.op);
    b.set_request(d.request);
    b.set_comm(d.comm);
    b.set_peer(d.peer);
    b.set_tag(d.tag);
    b.set_buf(d.buf);
    b.set_bytes(d.bytes);
    b.set_rbuf(d.rbuf);
    b.set_rbytes(d.rbytes);
    b.set_aux(d.aux);
    b.set_aux2(d.aux2);
}

pub(crate) fn get_descriptor(r: g::descriptor::Reader<'_>) -> Result<Descriptor, SchemaError> {
    let kind = kind_from(r.get_kind().map_err(unknown("descriptor kind"))?);
    Ok(Descriptor {
        rank: r.get_rank(),
        kind: kind.map_or(0, |k| k as u8),
        flags: r.get_flags(),
        elem: r.get_elem(),
        op: r.get_op(),
        seq: r.get_seq(),
        request: r.get_request(),
        comm: r.get_comm(),
        peer: r.get_peer(),
        tag: r.get_tag(),
        buf: r.get_buf(),
        bytes: r.get_bytes(),
        rbuf: r.get_rbuf(),
        rbytes: r.get_rbytes(),
        aux: r.get_aux(),
        aux2: r.get_aux2(),
        ..Descriptor::default()
    })
}

// ---- decisions: driven by the field visitor --------------------------------------------
//
// No decision field is named here: `Decision::visit` walks a decision's fields and
// `FieldWriter` sets each, by name, through capnp's dynamic (reflection) API on the union
// member of the decision's kind; `Decision::read` asks `FieldReader` for each field back.
// The visitor's names are the schema's (in snake case), its order the order the static
// builders allocated sub-objects in, so the bytes are those of the hand-written encoder
// this replaced (pinned by a golden test). A name or type the schema does not have is a
// bug in strobe, not in the input: the schema tests walk every kind, so encoding treats it
// as unreachable (`agreed`); decoding untrusted bytes never depends on it.
//
// Cost: the dynamic API reads the schema as it goes and is slower than the generated
// setters: 12,100 instructions a decision to encode against 4,400 for the hand-written
// encoder it replaced, 19,700 against 2,800 to decode (callgrind over the previous
// release's recording: docs/benchmarks-detail.md, `examples/encode_cost.rs`). Only the
// recorder's writer thread encodes decision sets, never the slice path, and only readers
// of a recording decode them. `field_of` caches field lookups, which roughly halved the
// encoding's cost.

/// The schema's field name for a visitor field name (the schema uses camel case).
fn capnp_field(field: &'static str) -> &'static str {
    match field {
        "coll_seq" => "collSeq",
        other => other,
    }
}

/// Unwrap a dynamic-API result that can only fail if the visitor and strobe.capnp disagree.
fn agreed<T>(r: capnp::Result<T>) -> T {
    r.expect("the decision visitor and strobe.capnp name the same fields (schema tests)")
}

thread_local! {
    /// Schema fields already looked up by name: (struct, field name, field). Finding a field
    /// by name walks the schema's encoded nodes and was half of the encoding's cost; the
    /// same couple of dozen fields are set over and over.
    static FIELDS: RefCell<Vec<(StructSchema, &'static str, Field)>> =
        const { RefCell::new(Vec::new()) };
}

/// The field `name` (a schema name) of the struct `schema`, looked up once per thread.
fn field_of(schema: StructSchema, name: &'static str) -> Field {
    FIELDS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((.., f)) = cache.iter().find(|(s, n, _)| *s == schema && *n == name) {
            return *f;
        }
        let f = agreed(schema.get_field_by_name(name));
        cache.push((schema, name, f));
        f
    })
}

fn set_dynamic_ref(mut b: dynamic_struct::Builder<'_>, r: DescRef) {
    let schema = b.get_schema();
    agreed(b.set(field_of(schema, "rank"), r.rank.into()));
    agreed(b.set(field_of(schema, "seq"), r.seq.into()));
}

fn get_dynamic_ref(r: dynamic_struct::Reader<'_>) -> Result<DescRef, SchemaError> {
    Ok(DescRef {
        rank: r.get_named("rank")?.downcast(),
        seq: r.get_named("seq")?.downcast(),
    })
}

/// Sets one decision's fields on the union member of its kind (already initialised).
struct FieldWriter<'a> {
    body: dynamic_struct::Builder<'a>,
}

impl FieldWriter<'_> {
    fn field(&self, field: &'static str) -> Field {
        field_of(self.body.get_schema(), capnp_field(field))
    }
    fn set(&mut self, field: &'static str, v: dynamic_value::Reader<'_>) {
        let f = self.field(field);
        agreed(self.body.set(f, v));
    }
    fn init_list(&mut self, field: &'static str, len: usize) -> dynamic_list::Builder<'_> {
        let f = self.field(field);
        agreed(self.body.reborrow().initn(f, len as u32)).downcast()
    }
}

impl DecisionVisitor for FieldWriter<'_> {
    /// The union member was chosen from the kind before the visit (`set_decision`).
    fn kind(&mut self, _kind: DecisionKind) {}
    fn desc(&mut self, field: &'static str, v: DescRef) {
        let f = self.field(field);
        set_dynamic_ref(agreed(self.body.reborrow().init(f)).downcast(), v);
    }
    fn u32(&mut self, field: &'static str, v: u32) {
        self.set(field, v.into());
    }
    fn u64(&mut self, field: &'static str, v: u64) {
        self.set(field, v.into());
    }
    fn i32(&mut self, field: &'static str, v: i32) {
        self.set(field, v.into());
    }
    fn bool(&mut self, field: &'static str, v: bool) {
        self.set(field, v.into());
    }
    fn coll_kind(&mut self, field: &'static str, v: DescKind) {
        self.set(field, kind_to(Some(v)).into());
    }
    /// The scheduler only completes with `RtError` codes; a code it does not know cannot be
    /// an enumerant of the schema and is written as the catch-all `buffer` (the decoder's
    /// digest check then reports the set as damaged rather than silently changed).
    fn error(&mut self, field: &'static str, v: u32) {
        self.set(field, error_to(RtError::from_u32(v)).into());
    }
    fn desc_list(&mut self, field: &'static str, v: &[DescRef]) {
        let mut l = self.init_list(field, v.len());
        for (i, d) in v.iter().enumerate() {
            set_dynamic_ref(agreed(l.reborrow().get(i as u32)).downcast(), *d);
        }
    }
    fn u32_list(&mut self, field: &'static str, v: &[u32]) {
        let mut l = self.init_list(field, v.len());
        for (i, x) in v.iter().enumerate() {
            agreed(l.set(i as u32, (*x).into()));
        }
    }
}

/// Answers `Decision::read` from the union member of a decoded decision.
struct FieldReader<'a> {
    body: dynamic_struct::Reader<'a>,
}

impl<'a> FieldReader<'a> {
    fn get(&self, field: &'static str) -> Result<dynamic_value::Reader<'a>, SchemaError> {
        Ok(self.body.get_named(capnp_field(field))?)
    }
    fn list(&self, field: &'static str) -> Result<dynamic_list::Reader<'a>, SchemaError> {
        Ok(self.get(field)?.downcast())
    }
}

impl DecisionSource for FieldReader<'_> {
    type Error = SchemaError;
    fn desc(&mut self, field: &'static str) -> Result<DescRef, SchemaError> {
        get_dynamic_ref(self.get(field)?.downcast())
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, SchemaError> {
        Ok(self.get(field)?.downcast())
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, SchemaError> {
        Ok(self.get(field)?.downcast())
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, SchemaError> {
        Ok(self.get(field)?.downcast())
    }
    fn bool(&mut self, field: &'static str) -> Result<bool, SchemaError> {
        Ok(self.get(field)?.downcast())
    }
    fn coll_kind(&mut self, field: &'static str) -> Result<DescKind, SchemaError> {
        let raw: dynamic_value::Enum = self.get(field)?.downcast();
        let kind = g::DescKind::try_from(raw.get_value()).map_err(unknown("collective kind"))?;
        kind_from(kind).ok_or(SchemaError::Unknown {
            what: "collective kind",
            value: 0,
        })
    }
    fn error(&mut self, field: &'static str) -> Result<u32, SchemaError> {
        let raw: dynamic_value::Enum = self.get(field)?.downcast();
        let error = g::RtError::try_from(raw.get_value()).map_err(unknown("completion error"))?;
        Ok(error_from(error) as u32)
    }
    fn desc_list(&mut self, field: &'static str) -> Result<Vec<DescRef>, SchemaError> {
        let l = self.list(field)?;
        (0..l.len())
            .map(|i| get_dynamic_ref(l.get(i)?.downcast()))
            .collect()
    }
    fn u32_list(&mut self, field: &'static str) -> Result<Vec<u32>, SchemaError> {
        let l = self.list(field)?;
        (0..l.len()).map(|i| Ok(l.get(i)?.downcast())).collect()
    }
}

fn set_decision(b: g::decision::Builder<'_>, d: &Decision) {
    let member: dynamic_value::Builder<'_> = match d.kind() {
        DecisionKind::Match => b.init_matched().into(),
        DecisionKind::Chunk => b.init_chunk().into(),
        DecisionKind::Collective => b.init_collective().into(),
        DecisionKind::NewComm => b.init_new_comm().into(),
        DecisionKind::Complete => b.init_complete().into(),
    };
    d.visit(&mut FieldWriter {
        body: member.downcast(),
    });
}

fn get_decision(r: g::decision::Reader<'_>) -> Result<Decision, SchemaError> {
    use g::decision::Which;
    let (kind, member): (DecisionKind, dynamic_value::Reader<'_>) =
        match r.which().map_err(unknown("decision"))? {
            Which::Matched(m) => (DecisionKind::Match, m?.into()),
            Which::Chunk(c) => (DecisionKind::Chunk, c?.into()),
            Which::Collective(c) => (DecisionKind::Collective, c?.into()),
            Which::NewComm(n) => (DecisionKind::NewComm, n?.into()),
            Which::Complete(c) => (DecisionKind::Complete, c?.into()),
        };
    Decision::read(
        kind,
        &mut FieldReader {
            body: member.downcast(),
        },
    )
}

fn set_slice_decisions(mut b: g::slice_decisions::Builder<'_>, sd: &SliceDecisions) {
    b.set_format_version(FORMAT_VERSION);
    b.set_slice(sd.slice);
    b.set_digest(sd.digest());
    let mut l = b.reborrow().init_decisions(sd.decisions.len() as u32);
    for (i, d) in sd.decisions.iter().enumerate() {
        set_decision(l.reborrow().get(i as u32), d);
    }
    let mut w = b.init_wake(sd.wake.len() as u32);
    for (i, r) in sd.wake.iter().enumerate() {
        w.set(i as u32, *r);
    }
}

fn get_slice_decisions(r: g::slice_decisions::Reader<'_>) -> Result<SliceDecisions, SchemaError> {
    check_version(r.get_format_version())?;
    let decisions = r
        .get_decisions()?
        .iter()
        .map(get_decision)
        .collect::<Result<Vec<_>, _>>()?;
    let sd = SliceDecisions {
        slice: r.get_slice(),
        decisions,
        wake: r.get_wake()?.iter().collect(),
        catalog: Vec::new(),
    };
    let computed = sd.digest();
    if computed != r.get_digest() {
        return Err(SchemaError::Digest {
            slice: sd.slice,
            stored: r.get_digest(),
            computed,
        });
    }
    Ok(sd)
}

// ---- public encodings -------------------------------------------------------------------

/// A slice's decision set as a packed Cap'n Proto message (schema `SliceDecisions`), with
/// its digest. The catalog (descriptors with addresses) is left out.
pub fn encode_slice_decisions(sd: &SliceDecisions) -> Vec<u8> {
    let mut msg = Builder::new_default();
    set_slice_decisions(msg.init_root(), sd);
    to_bytes(&msg)
}

/// Read back [`encode_slice_decisions`]' output; checks the version and the digest. The
/// returned set has an empty catalog.
pub fn decode_slice_decisions(bytes: &[u8]) -> Result<SliceDecisions, SchemaError> {
    let msg = reader(bytes)?;
    get_slice_decisions(msg.get_root()?)
}

/// A message between node managers as a packed Cap'n Proto message (schema `NodeMessage`).
pub fn encode_node_message(m: &NodeMessage) -> Vec<u8> {
    let mut msg = Builder::new_default();
    let mut root = msg.init_root::<g::node_message::Builder>();
    root.set_format_version(FORMAT_VERSION);
    match m {
        NodeMessage::Strobe { slice, reason } => {
            let mut s = root.init_strobe();
            s.set_slice(*slice);
            s.set_reason(reason_to(*reason));
        }
        NodeMessage::Batch {
            slice,
            node,
            descriptors,
        } => {
            let mut b = root.init_batch();
            b.set_slice(*slice);
            b.set_node(*node);
            let mut l = b.init_descriptors(descriptors.len() as u32);
            for (i, d) in descriptors.iter().enumerate() {
                set_descriptor(l.reborrow().get(i as u32), d);
            }
        }
        NodeMessage::Done { slice, node, phase } => {
            let mut d = root.init_done();
            d.set_slice(*slice);
            d.set_node(*node);
            d.set_phase(phase_to(*phase));
        }
        NodeMessage::Decisions(sd) => set_slice_decisions(root.init_decisions(), sd),
        NodeMessage::Shutdown => root.set_shutdown(()),
    }
    to_bytes(&msg)
}

/// Read back [`encode_node_message`]'s output.
pub fn decode_node_message(bytes: &[u8]) -> Result<NodeMessage, SchemaError> {
    use g::node_message::Which;
    let msg = reader(bytes)?;
    let root: g::node_message::Reader = msg.get_root()?;
    check_version(root.get_format_version())?;
    Ok(match root.which().map_err(unknown("node message"))? {
        Which::Strobe(s) => {
            let s = s?;
            NodeMessage::Strobe {
                slice: s.get_slice(),
                reason: reason_from(s.get_reason().map_err(unknown("start reason"))?),
            }
        }
        Which::Batch(b) => {
            let b = b?;
            NodeMessage::Batch {
                slice: b.get_slice(),
                node: b.get_node(),
                descriptors: b
                    .get_descriptors()?
                    .iter()
                    .map(get_descriptor)
                    .collect::<Result<_, _>>()?,
            }
        }
        Which::Done(d) => {
            let d = d?;
            NodeMessage::Done {
                slice: d.get_slice(),
                node: d.get_node(),
                phase: phase_from(d.get_phase().map_err(unknown("phase"))?),
            }
        }
        Which::Decisions(sd) => NodeMessage::Decisions(get_slice_decisions(sd?)?),
        Which::Shutdown(()) => NodeMessage::Shutdown,
    })
}
