//! The field visitor: the one description of every decision's fields, in order.
//!
//! [`Decision::visit`] walks a decision: its kind first, then each field with its name and
//! type. Everything that turns a decision into something else is a visitor: the digest
//! (`Fnv64`, whose call order *is* the digest encoding), the recorder's SQL `decision` row
//! and the Cap'n Proto encoding (schema crate). [`Decision::read`] is the inverse: it builds
//! a decision of a given kind from a [`DecisionSource`] that answers the same named fields
//! (the Cap'n Proto decoder). The two list the fields in the same order with the same names
//! and types; a test walks every kind through both to keep them in step.
//!
//! Field names are the Rust field names (`coll_seq`, `value2`); the `Completed` fields are
//! `desc` then the fields of [`Completion`] (without its padding).

use crate::descriptor::{Completion, DescKind, DescRef};
use crate::sched::decision::{
    Chunk, CollectiveRun, Completed, Decision, DecisionKind, Match, NewComm,
};

/// Receives a decision's fields from [`Decision::visit`]: `kind` first, then one call per
/// field, in the order the digest encodes them.
pub trait DecisionVisitor {
    fn kind(&mut self, kind: DecisionKind);
    fn desc(&mut self, field: &'static str, v: DescRef);
    fn u32(&mut self, field: &'static str, v: u32);
    fn u64(&mut self, field: &'static str, v: u64);
    fn i32(&mut self, field: &'static str, v: i32);
    fn bool(&mut self, field: &'static str, v: bool);
    /// A collective's kind.
    fn coll_kind(&mut self, field: &'static str, v: DescKind);
    /// A completion's error, `RtError as u32`.
    fn error(&mut self, field: &'static str, v: u32);
    fn desc_list(&mut self, field: &'static str, v: &[DescRef]);
    fn u32_list(&mut self, field: &'static str, v: &[u32]);
}

/// Answers the named fields of one decision for [`Decision::read`] (a decoder).
pub trait DecisionSource {
    type Error;
    fn desc(&mut self, field: &'static str) -> Result<DescRef, Self::Error>;
    fn u32(&mut self, field: &'static str) -> Result<u32, Self::Error>;
    fn u64(&mut self, field: &'static str) -> Result<u64, Self::Error>;
    fn i32(&mut self, field: &'static str) -> Result<i32, Self::Error>;
    fn bool(&mut self, field: &'static str) -> Result<bool, Self::Error>;
    fn coll_kind(&mut self, field: &'static str) -> Result<DescKind, Self::Error>;
    fn error(&mut self, field: &'static str) -> Result<u32, Self::Error>;
    fn desc_list(&mut self, field: &'static str) -> Result<Vec<DescRef>, Self::Error>;
    fn u32_list(&mut self, field: &'static str) -> Result<Vec<u32>, Self::Error>;
}

impl Decision {
    /// Walk this decision's fields (see the module docs). The order is the digest encoding:
    /// changing it changes every digest, and the golden tests fail.
    pub fn visit<V: DecisionVisitor + ?Sized>(&self, v: &mut V) {
        v.kind(self.kind());
        match self {
            Decision::Match(m) => {
                v.desc("send", m.send);
                v.desc("recv", m.recv);
                v.u64("bytes", m.bytes);
                v.bool("truncated", m.truncated);
            }
            Decision::Chunk(c) => {
                v.desc("send", c.send);
                v.desc("recv", c.recv);
                v.u64("offset", c.offset);
                v.u64("len", c.len);
            }
            Decision::Collective(c) => {
                v.u32("comm", c.comm);
                v.u64("coll_seq", c.coll_seq);
                v.coll_kind("kind", c.kind);
                v.i32("root", c.root);
                v.desc_list("parts", &c.parts);
            }
            Decision::NewComm(n) => {
                v.u32("parent", n.parent);
                v.u32("comm", n.comm);
                v.u32_list("members", &n.members);
            }
            Decision::Complete(Completed {
                desc,
                completion: c,
            }) => {
                v.desc("desc", *desc);
                v.u64("request", c.request);
                v.i32("source", c.source);
                v.i32("tag", c.tag);
                v.u64("bytes", c.bytes);
                v.error("error", c.error);
                v.u32("flags", c.flags);
                v.u64("value", c.value);
                v.u64("value2", c.value2);
            }
        }
    }

    /// Build a decision of kind `kind` from `src`, field by field, in [`Decision::visit`]'s
    /// order and with its names.
    pub fn read<S: DecisionSource + ?Sized>(
        kind: DecisionKind,
        src: &mut S,
    ) -> Result<Decision, S::Error> {
        Ok(match kind {
            DecisionKind::Match => Decision::Match(Match {
                send: src.desc("send")?,
                recv: src.desc("recv")?,
                bytes: src.u64("bytes")?,
                truncated: src.bool("truncated")?,
            }),
            DecisionKind::Chunk => Decision::Chunk(Chunk {
                send: src.desc("send")?,
                recv: src.desc("recv")?,
                offset: src.u64("offset")?,
                len: src.u64("len")?,
            }),
            DecisionKind::Collective => Decision::Collective(CollectiveRun {
                comm: src.u32("comm")?,
                coll_seq: src.u64("coll_seq")?,
                kind: src.coll_kind("kind")?,
                root: src.i32("root")?,
                parts: src.desc_list("parts")?,
            }),
            DecisionKind::NewComm => Decision::NewComm(NewComm {
                parent: src.u32("parent")?,
                comm: src.u32("comm")?,
                members: src.u32_list("members")?,
            }),
            DecisionKind::Complete => Decision::Complete(Completed {
                desc: src.desc("desc")?,
                completion: Completion {
                    request: src.u64("request")?,
                    source: src.i32("source")?,
                    tag: src.i32("tag")?,
                    bytes: src.u64("bytes")?,
                    error: src.error("error")?,
                    flags: src.u32("flags")?,
                    value: src.u64("value")?,
                    value2: src.u64("value2")?,
                    _pad: 0,
                },
            }),
        })
    }
}
