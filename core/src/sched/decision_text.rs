//! One line of text per decision: the decision log, divergence reports and the TUI all print
//! decisions with this (and only this).
//!
//! Two decisions that differ in any field print differently: divergence reports find the
//! first recorded decision that differs from the replayed one by comparing these lines. A
//! field is left out only where it holds its one usual value (a root of -1, no flags, no
//! error, no new communicator), so the text stays injective. Descriptors print as
//! `rank#seq`.

use std::fmt::{self, Display, Formatter};

use crate::descriptor::{
    Completion, DescRef, RtError, COMPLETION_CANCELLED, COMPLETION_EAGER, COMPLETION_FOUND,
    COMPLETION_INLINE,
};
use crate::sched::decision::{Chunk, CollectiveRun, Completed, Decision, Match, NewComm};

/// `rank#seq`.
struct Ref(DescRef);

impl Display for Ref {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.0.rank, self.0.seq)
    }
}

/// Space-separated items, or `none`.
fn list<T>(f: &mut Formatter<'_>, items: &[T], item: impl Fn(&T) -> String) -> fmt::Result {
    if items.is_empty() {
        return f.write_str("none");
    }
    let text: Vec<String> = items.iter().map(item).collect();
    f.write_str(&text.join(" "))
}

/// The name of an error class, as in the recorder's `decision.error` column.
pub fn error_name(e: RtError) -> &'static str {
    match e {
        RtError::Ok => "ok",
        RtError::Truncate => "truncate",
        RtError::Rank => "rank",
        RtError::Comm => "comm",
        RtError::CollectiveMismatch => "collective_mismatch",
        RtError::Op => "op",
        RtError::Arg => "arg",
        RtError::Aborted => "aborted",
        RtError::Count => "count",
        RtError::Buffer => "buffer",
    }
}

/// A completion's error code as text: its [`error_name`], or the number for a code this
/// strobe does not know.
fn error_text(code: u32) -> String {
    let known = RtError::from_u32(code);
    if known as u32 == code {
        error_name(known).to_string()
    } else {
        code.to_string()
    }
}

impl Display for Decision {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Match(m) => m.fmt(f),
            Decision::Chunk(c) => c.fmt(f),
            Decision::Collective(c) => c.fmt(f),
            Decision::NewComm(n) => n.fmt(f),
            Decision::Complete(c) => c.fmt(f),
        }
    }
}

/// `match send 0#3 -> recv 1#2, 64 bytes[, truncated]`
impl Display for Match {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "match send {} -> recv {}, {} bytes",
            Ref(self.send),
            Ref(self.recv),
            self.bytes
        )?;
        if self.truncated {
            f.write_str(", truncated")?;
        }
        Ok(())
    }
}

/// `chunk send 0#3 -> recv 1#2, 1024 bytes at offset 4096`
impl Display for Chunk {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "chunk send {} -> recv {}, {} bytes at offset {}",
            Ref(self.send),
            Ref(self.recv),
            self.len,
            self.offset
        )
    }
}

/// `collective MPI_Bcast #4 on comm 0, root 2: 0#5 1#5 2#6` (no root for -1).
impl Display for CollectiveRun {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "collective {} #{} on comm {}",
            self.kind.mpi_name(),
            self.coll_seq,
            self.comm
        )?;
        if self.root != -1 {
            write!(f, ", root {}", self.root)?;
        }
        f.write_str(": ")?;
        list(f, &self.parts, |p| Ref(*p).to_string())
    }
}

/// `new_comm 2 from comm 0: world ranks 3 1 0`
impl Display for NewComm {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "new_comm {} from comm {}: world ranks ",
            self.comm, self.parent
        )?;
        list(f, &self.members, u32::to_string)
    }
}

/// `complete 1#2 req 7: source 0 tag 5, 64 bytes`, then what is unusual: `, error
/// truncate`, `, cancelled`, `, found` (an Iprobe's hit), `, eager` (a send completed
/// eagerly, its bytes copied into node memory), `, inline` (a send that carried its bytes in
/// its descriptor and completed when posted), other flag bits in hex, and for
/// dup and split the new communicator (`, new comm 3 rank 1 of 2`; `none` for all ones).
impl Display for Completed {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let c: &Completion = &self.completion;
        write!(
            f,
            "complete {} req {}: source {} tag {}, {} bytes",
            Ref(self.desc),
            c.request,
            c.source,
            c.tag,
            c.bytes
        )?;
        if c.error != RtError::Ok as u32 {
            write!(f, ", error {}", error_text(c.error))?;
        }
        if c.flags & COMPLETION_CANCELLED != 0 {
            f.write_str(", cancelled")?;
        }
        if c.flags & COMPLETION_FOUND != 0 {
            f.write_str(", found")?;
        }
        if c.flags & COMPLETION_EAGER != 0 {
            f.write_str(", eager")?;
        }
        if c.flags & COMPLETION_INLINE != 0 {
            f.write_str(", inline")?;
        }
        let other_flags = c.flags
            & !(COMPLETION_CANCELLED | COMPLETION_FOUND | COMPLETION_EAGER | COMPLETION_INLINE);
        if other_flags != 0 {
            write!(f, ", flags {other_flags:#x}")?;
        }
        if (c.value, c.value2) != (0, 0) {
            f.write_str(", new comm ")?;
            match c.value {
                u64::MAX => f.write_str("none")?,
                id => write!(f, "{id}")?,
            }
            write!(f, " rank {} of {}", c.value2 >> 32, c.value2 & 0xffff_ffff)?;
        }
        Ok(())
    }
}
