//! What the scheduler decides in a slice. Decisions name descriptors by [`DescRef`] and never
//! hold addresses, so the same program makes the same decisions in every run; the
//! [`SliceDecisions::catalog`] carries the descriptors (with addresses) the executors need.
//!
//! One struct per kind of decision. Their fields are named in exactly two places: the field
//! visitor ([`Decision::visit`], with its inverse [`Decision::read`], in `visit.rs`), which
//! drives the digest, the recorder's SQL row and the Cap'n Proto encoding; and the one-line
//! text ([`std::fmt::Display`], in `decision_text.rs`).

use crate::descriptor::{Completion, DescKind, DescRef, Descriptor};
use crate::sched::visit::DecisionVisitor;

/// One scheduling decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Match(Match),
    Chunk(Chunk),
    Collective(CollectiveRun),
    NewComm(NewComm),
    Complete(Completed),
}

/// MSM: a send matched a receive. `bytes` is what will move (the smaller of the two sizes);
/// `truncated` when the send was larger than the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub send: DescRef,
    pub recv: DescRef,
    pub bytes: u64,
    pub truncated: bool,
}

/// P2P: the DMA Helper of the receiver's node moves `len` bytes at `offset` of a match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub send: DescRef,
    pub recv: DescRef,
    pub offset: u64,
    pub len: u64,
}

/// BBM/RM: every member of `comm` posted its `coll_seq`-th collective; it runs this slice.
/// `parts` are the members' descriptors in communicator rank order; `root` is -1 for
/// collectives without a root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectiveRun {
    pub comm: u32,
    pub coll_seq: u64,
    pub kind: DescKind,
    pub root: i32,
    pub parts: Vec<DescRef>,
}

/// A communicator created by dup or split: its context id and world ranks in rank order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewComm {
    pub parent: u32,
    pub comm: u32,
    pub members: Vec<u32>,
}

/// A descriptor completed: `completion` is exactly the record its rank receives (its
/// `_pad` is always 0 and is neither digested, stored nor encoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    pub desc: DescRef,
    pub completion: Completion,
}

/// The kinds of decision. The discriminant is the tag that starts a decision's digest
/// encoding; it is stored in recordings (through the digest) and must never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DecisionKind {
    Match = 1,
    Chunk = 2,
    Collective = 3,
    NewComm = 4,
    Complete = 5,
}

impl DecisionKind {
    pub const ALL: [DecisionKind; 5] = [
        DecisionKind::Match,
        DecisionKind::Chunk,
        DecisionKind::Collective,
        DecisionKind::NewComm,
        DecisionKind::Complete,
    ];

    /// Short name, as in the `decision.kind` column of recordings and in logs.
    pub fn name(self) -> &'static str {
        match self {
            DecisionKind::Match => "match",
            DecisionKind::Chunk => "chunk",
            DecisionKind::Collective => "collective",
            DecisionKind::NewComm => "new_comm",
            DecisionKind::Complete => "complete",
        }
    }
}

impl Decision {
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Match(_) => DecisionKind::Match,
            Decision::Chunk(_) => DecisionKind::Chunk,
            Decision::Collective(_) => DecisionKind::Collective,
            Decision::NewComm(_) => DecisionKind::NewComm,
            Decision::Complete(_) => DecisionKind::Complete,
        }
    }

    /// For a `Complete` decision: the descriptor and the completion record a rank receives.
    pub fn completion(&self) -> Option<(DescRef, Completion)> {
        match self {
            Decision::Complete(c) => Some((c.desc, c.completion)),
            _ => None,
        }
    }

    /// Short name of the decision kind, for logs and reports.
    pub fn kind_name(&self) -> &'static str {
        self.kind().name()
    }

    /// The world rank a decision is mostly about, for "node, rank" in reports: the receiver
    /// of a match or chunk, the first member of a collective or new communicator, the rank
    /// whose descriptor completed.
    pub fn rank(&self) -> u32 {
        match self {
            Decision::Match(m) => m.recv.rank,
            Decision::Chunk(c) => c.recv.rank,
            Decision::Collective(c) => c.parts.first().map_or(0, |p| p.rank),
            Decision::NewComm(n) => n.members.first().copied().unwrap_or(0),
            Decision::Complete(c) => c.desc.rank,
        }
    }
}

/// Everything the scheduler decided for one slice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceDecisions {
    pub slice: u64,
    pub decisions: Vec<Decision>,
    /// Ranks with at least one completion this slice: the processes to wake, ascending.
    pub wake: Vec<u32>,
    /// The descriptors the decisions refer to, sorted by [`DescRef`], for the executors.
    /// Not part of the digest (it holds addresses).
    pub catalog: Vec<Descriptor>,
}

impl SliceDecisions {
    /// Look up a descriptor the decisions refer to.
    pub fn descriptor(&self, id: DescRef) -> Option<&Descriptor> {
        self.catalog
            .binary_search_by(|d| d.id().cmp(&id))
            .ok()
            .map(|i| &self.catalog[i])
    }

    /// True when nothing was decided.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }

    /// A digest of the decisions (not of the slice number, so logically equal slices of
    /// two runs compare equal; not of addresses). FNV-1a 64 over the number of decisions,
    /// then each decision as [`Decision::visit`] walks it (see [`Fnv64`]'s visitor). Stored
    /// in every recording: the golden tests in `golden_tests.rs` pin it.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv64::new();
        h.u64(self.decisions.len() as u64);
        for d in &self.decisions {
            d.visit(&mut h);
        }
        h.finish()
    }

    /// Count decisions of each kind: (matches, chunks, collectives, completions).
    pub fn counts(&self) -> DecisionCounts {
        let mut c = DecisionCounts::default();
        for d in &self.decisions {
            match d.kind() {
                DecisionKind::Match => c.matches += 1,
                DecisionKind::Chunk => c.chunks += 1,
                DecisionKind::Collective => c.collectives += 1,
                DecisionKind::NewComm => {}
                DecisionKind::Complete => c.completions += 1,
            }
        }
        c
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecisionCounts {
    pub matches: u32,
    pub chunks: u32,
    pub collectives: u32,
    pub completions: u32,
}

/// FNV-1a, 64 bit: tiny, dependency-free and stable across platforms and releases (the
/// digest is stored in recordings, so it must never change with a library upgrade).
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

/// The FNV-1a 64 prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// `FNV_PRIME` to the powers 0 to 8: hashing `k` zero bytes multiplies by the `k`th.
const FNV_PRIME_POWERS: [u64; 9] = {
    let mut p = [1u64; 9];
    let mut i = 1;
    while i < 9 {
        p[i] = p[i - 1].wrapping_mul(FNV_PRIME);
        i += 1;
    }
    p
};

impl Fnv64 {
    pub fn new() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }
    pub fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    /// The 8 little-endian bytes of `v`, as [`Fnv64::bytes`] hashes them, but the zero
    /// bytes above `v`'s highest non-zero one in one multiplication (a zero byte leaves the
    /// XOR step unchanged): most fields are small numbers, and byte by byte this digest
    /// was 9% of a node manager's CPU in a small-message ping-pong (each byte a dependent
    /// multiply). The same value, bit for bit (`fnv_u64_equals_the_bytewise_digest`).
    pub fn u64(&mut self, v: u64) {
        let significant = 8 - (v.leading_zeros() / 8) as usize;
        self.bytes(&v.to_le_bytes()[..significant]);
        self.0 = self.0.wrapping_mul(FNV_PRIME_POWERS[8 - significant]);
    }
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fnv64 {
    fn default() -> Self {
        Self::new()
    }
}

/// The digest encoding of a decision, one visitor call at a time: the kind tag and `bool`s
/// and collective kinds as one byte, every other integer widened to 64 bits little-endian
/// (signed ones sign-extended), a descriptor as its rank then its sequence number, a list
/// as its length then its elements. This is byte for byte the encoding of every release
/// since the first (format 4 recordings verify against it).
impl DecisionVisitor for Fnv64 {
    fn kind(&mut self, kind: DecisionKind) {
        self.u8(kind as u8);
    }
    fn desc(&mut self, _field: &'static str, v: DescRef) {
        self.u64(v.rank as u64);
        self.u64(v.seq);
    }
    fn u32(&mut self, _field: &'static str, v: u32) {
        self.u64(v as u64);
    }
    fn u64(&mut self, _field: &'static str, v: u64) {
        Fnv64::u64(self, v);
    }
    fn i32(&mut self, _field: &'static str, v: i32) {
        self.u64(v as i64 as u64);
    }
    fn bool(&mut self, _field: &'static str, v: bool) {
        self.u8(v as u8);
    }
    fn coll_kind(&mut self, _field: &'static str, v: DescKind) {
        self.u8(v as u8);
    }
    fn error(&mut self, _field: &'static str, v: u32) {
        self.u64(v as u64);
    }
    fn desc_list(&mut self, field: &'static str, v: &[DescRef]) {
        self.u64(v.len() as u64);
        for d in v {
            self.desc(field, *d);
        }
    }
    fn u32_list(&mut self, field: &'static str, v: &[u32]) {
        self.u64(v.len() as u64);
        for x in v {
            DecisionVisitor::u32(self, field, *x);
        }
    }
}
