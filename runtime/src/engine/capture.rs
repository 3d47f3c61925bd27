//! Payload capture (`strobe record --capture-payloads RANKS`): the bytes the runtime hands
//! to chosen ranks, so that one of them can later be replayed alone (`crate::alone`), fed
//! from the recording instead of by the other ranks.
//!
//! What a rank is handed for a descriptor is its completion plus the bytes the helpers
//! wrote into its memory. Rather than hooking every writer (the DMA Helper, the rank's own
//! DMA thread for large chunks, the Collective and Reduce Helpers, the eager path), the
//! node reads the descriptor's *result region* back from the rank once the completion is
//! about to be delivered: every write for it has happened by then (the P2P microphase waits
//! for direct copies, reductions are written before delivery), and the rank cannot touch
//! the buffer before it sees the completion.

use std::collections::BTreeMap;

use crate::descriptor::{Completion, DescKind, DescRef, Descriptor, COMPLETION_CANCELLED};
use crate::procmem;
use crate::sched::{Decision, SliceDecisions};

use super::helpers::Overrides;
use super::sink::{Payload, SliceSink};

/// The memory the runtime writes for descriptor `d` completed with `c`, as
/// `(address, length)` in the posting rank; `None` when it writes nothing (sends, probes,
/// barriers, a cancelled receive). The buffer conventions are `helpers.rs`'s: a receive
/// fills `buf` up to the bytes received, a broadcast `buf`, every other collective (and
/// `Comm_dup`/`Comm_split`, which write the new communicator's members) `rbuf`/`rbytes`.
/// A v-collective's gaps between blocks are inside the region: they are captured and
/// restored as they were, which is what the recorded program saw there.
pub fn result_region(d: &Descriptor, c: &Completion) -> Option<(u64, u64)> {
    if c.flags & COMPLETION_CANCELLED != 0 {
        return None;
    }
    let (addr, len) = match d.kind()? {
        DescKind::Recv => (d.buf, c.bytes.min(d.bytes)),
        DescKind::Bcast => (d.buf, d.bytes),
        DescKind::Barrier | DescKind::Finalize => return None,
        k if k.is_collective() => (d.rbuf, d.rbytes),
        _ => return None,
    };
    (addr != 0 && len > 0).then_some((addr, len))
}

/// The node's capture state: which send each pending receive of a captured rank matched
/// (a match and the completion of its receive can be slices apart when chunked).
#[derive(Default)]
pub struct PayloadCapture {
    matched: BTreeMap<DescRef, DescRef>,
    /// Whether the sink captures any rank, asked once: without capture the slice path
    /// pays one branch per slice.
    any: Option<bool>,
}

impl PayloadCapture {
    /// Before delivery (RM): hand the sink every completion of a local captured rank in
    /// `dec`, with the bytes of its result region read back from the rank. `pids` are the
    /// world ranks' pids; a region that cannot be read (the rank died) is captured empty.
    pub fn observe(
        &mut self,
        dec: &SliceDecisions,
        errs: &Overrides,
        pids: &[i32],
        sink: &dyn SliceSink,
        is_local: &dyn Fn(u32) -> bool,
    ) {
        let ranks = pids.len() as u32;
        if !*self
            .any
            .get_or_insert_with(|| (0..ranks).any(|r| sink.captures(r)))
        {
            return;
        }
        for d in &dec.decisions {
            match d {
                Decision::Match(m) if is_local(m.recv.rank) && sink.captures(m.recv.rank) => {
                    self.matched.insert(m.recv, m.send);
                }
                Decision::Complete(c) if is_local(c.desc.rank) && sink.captures(c.desc.rank) => {
                    let Some(desc) = dec.descriptor(c.desc) else {
                        continue;
                    };
                    let mut completion = c.completion;
                    if let Some(e) = errs.get(&c.desc) {
                        completion.error = *e as u32;
                    }
                    let data = result_region(desc, &completion)
                        .and_then(|(addr, len)| {
                            let mut v = vec![0u8; len as usize];
                            let pid = *pids.get(c.desc.rank as usize)?;
                            procmem::read_from(pid, addr, &mut v).ok()?;
                            Some(v)
                        })
                        .unwrap_or_default();
                    sink.payload(&Payload {
                        slice: dec.slice,
                        desc: *desc,
                        completion,
                        matched_send: self.matched.remove(&c.desc),
                        data,
                    });
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(kind: DescKind, buf: u64, bytes: u64, rbuf: u64, rbytes: u64) -> Descriptor {
        Descriptor {
            kind: kind as u8,
            buf,
            bytes,
            rbuf,
            rbytes,
            ..Descriptor::default()
        }
    }

    fn done(bytes: u64, flags: u32) -> Completion {
        Completion {
            bytes,
            flags,
            ..Completion::default()
        }
    }

    #[test]
    fn result_regions_follow_the_helpers_buffer_conventions() {
        // A receive: its buffer up to the bytes received (never past its capacity).
        let r = desc(DescKind::Recv, 0x1000, 64, 0, 0);
        assert_eq!(result_region(&r, &done(16, 0)), Some((0x1000, 16)));
        assert_eq!(result_region(&r, &done(99, 0)), Some((0x1000, 64)));
        assert_eq!(result_region(&r, &done(0, 0)), None);
        assert_eq!(result_region(&r, &done(16, COMPLETION_CANCELLED)), None);
        // A broadcast: `buf` on every member; other collectives: `rbuf`.
        let b = desc(DescKind::Bcast, 0x2000, 32, 0, 0);
        assert_eq!(result_region(&b, &done(0, 0)), Some((0x2000, 32)));
        let a = desc(DescKind::Allreduce, 0x3000, 8, 0x4000, 8);
        assert_eq!(result_region(&a, &done(0, 0)), Some((0x4000, 8)));
        let s = desc(DescKind::CommSplit, 0, 0, 0x5000, 12);
        assert_eq!(result_region(&s, &done(0, 0)), Some((0x5000, 12)));
        // A non-root reduce without a receive buffer, sends, barriers: nothing.
        let n = desc(DescKind::Reduce, 0x3000, 8, 0, 8);
        assert_eq!(result_region(&n, &done(0, 0)), None);
        for k in [
            DescKind::Send,
            DescKind::Barrier,
            DescKind::Finalize,
            DescKind::Iprobe,
        ] {
            assert_eq!(
                result_region(&desc(k, 0x1000, 8, 0x2000, 8), &done(8, 0)),
                None
            );
        }
    }
}
