//! What the scheduler decides in a slice. Decisions name descriptors by [`DescRef`] and never
//! hold addresses, so the same program makes the same decisions in every run; the
//! [`SliceDecisions::catalog`] carries the descriptors (with addresses) the executors need.

use crate::descriptor::{Completion, DescKind, DescRef, Descriptor, RtError};

/// One scheduling decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// MSM: a send matched a receive. `bytes` is what will move (the smaller of the two
    /// sizes); `truncated` when the send was larger than the receive buffer.
    Match {
        send: DescRef,
        recv: DescRef,
        bytes: u64,
        truncated: bool,
    },
    /// P2P: the DMA Helper of the receiver's node moves `len` bytes at `offset` of a match.
    Chunk {
        send: DescRef,
        recv: DescRef,
        offset: u64,
        len: u64,
    },
    /// BBM/RM: every member of `comm` posted its `coll_seq`-th collective; it runs this
    /// slice. `parts` are the members' descriptors in communicator rank order.
    Collective {
        comm: u32,
        coll_seq: u64,
        kind: DescKind,
        root: i32,
        parts: Vec<DescRef>,
    },
    /// A communicator created by dup or split: its context id and world ranks in rank order.
    NewComm {
        parent: u32,
        comm: u32,
        members: Vec<u32>,
    },
    /// A descriptor completed: the rank's request `request` is done.
    Complete {
        desc: DescRef,
        request: u64,
        source: i32,
        tag: i32,
        bytes: u64,
        error: RtError,
        flags: u32,
        value: u64,
        value2: u64,
    },
}

impl Decision {
    /// For a `Complete` decision: the descriptor and the completion record a rank receives.
    pub fn completion(&self) -> Option<(DescRef, Completion)> {
        let Decision::Complete {
            desc,
            request,
            source,
            tag,
            bytes,
            error,
            flags,
            value,
            value2,
        } = self
        else {
            return None;
        };
        Some((
            *desc,
            Completion {
                request: *request,
                source: *source,
                tag: *tag,
                bytes: *bytes,
                error: *error as u32,
                flags: *flags,
                value: *value,
                value2: *value2,
                _pad: 0,
            },
        ))
    }

    /// Short name of the decision kind, for logs and reports.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Decision::Match { .. } => "match",
            Decision::Chunk { .. } => "chunk",
            Decision::Collective { .. } => "collective",
            Decision::NewComm { .. } => "new_comm",
            Decision::Complete { .. } => "complete",
        }
    }

    fn digest_into(&self, h: &mut Fnv64) {
        match self {
            Decision::Match {
                send,
                recv,
                bytes,
                truncated,
            } => {
                h.u8(1);
                h.desc(*send);
                h.desc(*recv);
                h.u64(*bytes);
                h.u8(*truncated as u8);
            }
            Decision::Chunk {
                send,
                recv,
                offset,
                len,
            } => {
                h.u8(2);
                h.desc(*send);
                h.desc(*recv);
                h.u64(*offset);
                h.u64(*len);
            }
            Decision::Collective {
                comm,
                coll_seq,
                kind,
                root,
                parts,
            } => {
                h.u8(3);
                h.u64(*comm as u64);
                h.u64(*coll_seq);
                h.u8(*kind as u8);
                h.u64(*root as i64 as u64);
                h.u64(parts.len() as u64);
                for p in parts {
                    h.desc(*p);
                }
            }
            Decision::NewComm {
                parent,
                comm,
                members,
            } => {
                h.u8(4);
                h.u64(*parent as u64);
                h.u64(*comm as u64);
                h.u64(members.len() as u64);
                for m in members {
                    h.u64(*m as u64);
                }
            }
            Decision::Complete {
                desc,
                request,
                source,
                tag,
                bytes,
                error,
                flags,
                value,
                value2,
            } => {
                h.u8(5);
                h.desc(*desc);
                h.u64(*request);
                h.u64(*source as i64 as u64);
                h.u64(*tag as i64 as u64);
                h.u64(*bytes);
                h.u64(*error as u32 as u64);
                h.u64(*flags as u64);
                h.u64(*value);
                h.u64(*value2);
            }
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
    /// two runs compare equal; not of addresses). FNV-1a 64 over a fixed encoding.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv64::new();
        h.u64(self.decisions.len() as u64);
        for d in &self.decisions {
            d.digest_into(&mut h);
        }
        h.finish()
    }

    /// Count decisions of each kind: (matches, chunks, collectives, completions).
    pub fn counts(&self) -> DecisionCounts {
        let mut c = DecisionCounts::default();
        for d in &self.decisions {
            match d {
                Decision::Match { .. } => c.matches += 1,
                Decision::Chunk { .. } => c.chunks += 1,
                Decision::Collective { .. } => c.collectives += 1,
                Decision::NewComm { .. } => {}
                Decision::Complete { .. } => c.completions += 1,
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

impl Fnv64 {
    pub fn new() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn desc(&mut self, d: DescRef) {
        self.u64(d.rank as u64);
        self.u64(d.seq);
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

/// One line of text per decision: the decision log, divergence reports and the TUI all
/// print decisions with this (and only this).
impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Placeholder until the field visitor lands; replaced by the visitor-driven text.
        write!(f, "{self:?}")
    }
}
