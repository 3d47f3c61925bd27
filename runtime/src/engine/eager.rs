//! Node memory for eager sends (scheduler version 2, `strobe_core::sched::p2p`).
//!
//! A send the scheduler completed with `COMPLETION_EAGER` has its bytes copied here by its
//! node's DMA Helper during P2P of that slice, before the completion is delivered (the
//! sender may then reuse its buffer). The receive matched in a later slice is filled from
//! here by the receiver's node, and the entry is freed once its last byte moved. Which
//! sends are copied, and when, is entirely the scheduler's decisions: this store only says
//! where the bytes wait.
//!
//! An entry lives at the **sender's** node, which also frees it: a chunk to a receiver on
//! the same node is copied out of it here ([`EagerMemory::copy_out`]); a chunk to a
//! receiver on another node is taken out of it by the sender's node and pushed with the
//! other P2P bytes of the slice through the transport (`remote.rs`,
//! [`EagerMemory::take_chunk`]), so the bytes cross between nodes when the receive is
//! matched, never before (nothing is shipped for a message that is never received). The
//! copies never overlap on one entry: the copy in is in the slice of the completion and the
//! copies out in that or later slices, after it, and slices are separated by microstrobes.
//!
//! An arena send (`FLAG_INLINE` above `INLINE_MAX`, scheduler version 5) has an entry
//! too, made from its rank's send arena when its descriptor is drained ([`EagerMemory::hold`]).
//! An inline send (`FLAG_INLINE`, scheduler version 3) is served from here too, without an
//! entry: its bytes are in its descriptor, which every node's scheduler replica holds, so
//! [`EagerMemory::copy_out`] writes them straight from it (one `process_vm_writev`, no
//! read of the sender) and [`EagerMemory::take_chunk`] hands them to the data plane.

use std::collections::HashMap;
use std::sync::Mutex;

use super::helpers::{Memory, Overrides};
use crate::descriptor::{DescRef, Descriptor, RtError, COMPLETION_EAGER};
use crate::procmem;
use crate::sched::{Decision, SliceDecisions};

/// The bytes of eager sends not yet delivered, by send descriptor.
#[derive(Default)]
pub struct EagerMemory {
    entries: Mutex<HashMap<DescRef, Vec<u8>>>,
    /// Small collectives' inputs, taken from the ranks' send arenas (`coll_inputs.rs`).
    pub inputs: super::coll_inputs::CollInputs,
}

impl EagerMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DescRef, Vec<u8>>> {
        // A poisoned lock only means another node thread panicked; the map is still whole.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `send`'s bytes wait here, or travel in its descriptor (inline): either
    /// way its buffer may be the program's again.
    pub fn holds(&self, send: &Descriptor) -> bool {
        send.is_inline() || self.lock().contains_key(&send.id())
    }

    /// An arena send's bytes, taken from its rank's send arena when its descriptor was
    /// drained (`NodeManager::drain`); served and freed like an eager send's.
    pub fn hold(&self, send: DescRef, bytes: Vec<u8>) {
        self.lock().insert(send, bytes);
    }

    /// Number of messages held (tests, reports).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// P2P, sender's node: copy the bytes of every local send this slice completes eagerly.
    /// A send whose buffer cannot be read completes with `MPI_ERR_BUFFER`.
    pub fn copy_in(&self, dec: &SliceDecisions, mem: &Memory<'_>, errs: &mut Overrides) {
        for (desc, c) in dec.decisions.iter().filter_map(Decision::completion) {
            if c.flags & COMPLETION_EAGER == 0 || !(mem.local)(desc.rank) {
                continue;
            }
            let Some(s) = dec.descriptor(desc) else {
                continue;
            };
            let mut data = vec![0u8; s.bytes as usize];
            if !data.is_empty() {
                if let Err(e) = procmem::read_from(mem.pids[s.rank as usize], s.buf, &mut data) {
                    let _ = e;
                    errs.insert(desc, RtError::Buffer);
                    data.fill(0);
                }
            }
            self.lock().insert(desc, data);
        }
    }

    /// P2P, sender's node, receiver on the same node: move a chunk of an eager send from
    /// node memory into the receive buffer; `false` when the send is not eager (the caller
    /// copies from the sender). The entry is freed with its last byte.
    pub fn copy_out(
        &self,
        s: &Descriptor,
        r: &Descriptor,
        offset: u64,
        len: u64,
        pids: &[i32],
        errs: &mut Overrides,
    ) -> bool {
        let res = self.with_chunk(s, r, offset, len, |bytes| {
            if bytes.is_empty() {
                return Ok(());
            }
            procmem::write_to(pids[r.rank as usize], r.buf + offset, bytes)
                .map_err(|_| RtError::Buffer)
        });
        match res {
            None => false,
            Some(res) => {
                if let Err(e) = res {
                    errs.insert(r.id(), e);
                }
                true
            }
        }
    }

    /// P2P, sender's node, receiver on another node: the bytes of a chunk of an eager send,
    /// to push; `None` when the send is not eager. The entry is freed with its last byte.
    pub fn take_chunk(
        &self,
        s: &Descriptor,
        r: &Descriptor,
        offset: u64,
        len: u64,
    ) -> Option<Result<Vec<u8>, RtError>> {
        self.with_chunk(s, r, offset, len, |bytes| Ok(bytes.to_vec()))
    }

    /// [`Self::take_chunk`] of at most `RANK_COPY_MAX` bytes, without a heap allocation.
    pub fn take_small_chunk(
        &self,
        s: &Descriptor,
        r: &Descriptor,
        offset: u64,
        len: u64,
    ) -> Option<Result<super::helpers::SmallBytes, RtError>> {
        self.with_chunk(s, r, offset, len, |bytes| {
            super::helpers::SmallBytes::new(bytes).ok_or(RtError::Buffer)
        })
    }

    /// Run `f` on the bytes of a chunk of an eager send (an error when the chunk is outside
    /// them) and free the entry with its last byte; `None` when the send is not eager.
    fn with_chunk<T>(
        &self,
        s: &Descriptor,
        r: &Descriptor,
        offset: u64,
        len: u64,
        f: impl FnOnce(&[u8]) -> Result<T, RtError>,
    ) -> Option<Result<T, RtError>> {
        let (from, to) = (offset as usize, (offset + len) as usize);
        if s.is_inline() && !s.in_arena() {
            let res = s.inline_payload().ok_or(RtError::Buffer).and_then(|p| {
                let bytes = &p[..(s.bytes as usize).min(p.len())];
                bytes.get(from..to).ok_or(RtError::Buffer).and_then(f)
            });
            return Some(res);
        }
        let mut map = self.lock();
        let Some(data) = map.get(&s.id()) else {
            // An arena send's bytes were here or nowhere: never the program's buffer.
            return s.in_arena().then_some(Err(RtError::Buffer));
        };
        let res = data.get(from..to).ok_or(RtError::Buffer).and_then(f);
        if offset + len >= s.bytes.min(r.bytes) {
            map.remove(&s.id());
        }
        Some(res)
    }

    /// A match that moves no byte (an empty message, or one truncated to nothing) gets no
    /// chunk: the sender's node frees its entry at the match.
    pub fn release_empty(&self, dec: &SliceDecisions, local: &dyn Fn(u32) -> bool) {
        for d in &dec.decisions {
            if let Decision::Match(m) = d {
                if m.bytes == 0 && local(m.send.rank) {
                    self.lock().remove(&m.send);
                }
            }
        }
    }
}
