//! A rank's send arena (layout 12, scheduler version 5): where a rank puts the bytes of a
//! standard-mode send too large for its descriptor (`descriptor::INLINE_MAX`) but at most
//! `descriptor::RANK_COPY_MAX`, so that the send completes when posted like an inline one
//! and the node manager never reads the program's memory for it.
//!
//! Entry `seq % (2 * desc_capacity)` belongs to the rank's descriptor `seq`. The rank
//! writes it before it pushes the descriptor (the queue's release store publishes both);
//! the node manager reads it after it pops the descriptor, in the same drain, before its
//! next drain. Why twice the queue's capacity: a pop frees queue space at once, so while
//! the node manager reads the entries of a batch it just popped, the rank may already push
//! up to `desc_capacity` more descriptors; with `2 * desc_capacity` entries none of those
//! can land on an entry of the batch being read (a batch is at most `desc_capacity`).
//! 64 bytes an entry, 128 KiB a rank at the default capacity, in pages nobody touches
//! until the rank sends such a message.
//!
//! A rank's receive arena (layout 13) is the other direction: where the node manager puts
//! the bytes of a small message (17 to 64 bytes; up to 16 ride in the completion itself)
//! for one of the rank's receives, so that they reach the rank without a
//! `process_vm_writev`. Entry `p % completion capacity` belongs to the completion at
//! position `p` of the rank's completion queue: the node manager writes it after the
//! queue said the slot is free and before it publishes the completion
//! (`Ring::push_with`), the rank copies it into the receive buffer before it frees the
//! slot (`Ring::pop_with`), so neither can touch an entry the other is using. 64 KiB a
//! rank at the default capacity.

use super::{arena_offset, recv_arena_offset, JobSegment};
use crate::descriptor::RANK_COPY_MAX;

const ENTRY: usize = RANK_COPY_MAX as usize;

/// Bytes of a rank's arena for a descriptor queue of `desc_cap` entries.
pub(super) fn arena_bytes(desc_cap: usize) -> usize {
    2 * desc_cap * ENTRY
}

/// Bytes of a rank's receive arena for a completion queue of `comp_cap` entries.
pub(super) fn recv_arena_bytes(comp_cap: usize) -> usize {
    comp_cap * ENTRY
}

impl JobSegment {
    /// Address of entry `index` of the arena at `offset` in `rank`'s slot.
    fn entry_at(&self, rank: u32, offset: impl Fn(usize, usize) -> usize, index: usize) -> *mut u8 {
        let h = self.header();
        let (dcap, ccap) = (h.desc_capacity as usize, h.comp_capacity as usize);
        // SAFETY: both arenas lie inside the slot (`slot_stride` reserves `arena_bytes`
        // after `arena_offset` and `recv_arena_bytes` after `recv_arena_offset`), and the
        // callers' indices are below their arena's entry count.
        unsafe { self.slot_ptr(rank).add(offset(dcap, ccap) + index * ENTRY) }
    }

    /// Address of `rank`'s receive arena entry for its completion at `position`.
    fn recv_arena_entry(&self, rank: u32, position: u64) -> *mut u8 {
        let ccap = self.header().comp_capacity as u64;
        self.entry_at(rank, recv_arena_offset, (position % ccap) as usize)
    }

    /// The node manager's side: put `data` in `rank`'s receive arena entry for the
    /// completion it is about to publish at `position`; `false` when it does not fit.
    pub fn recv_arena_write(&self, rank: u32, position: u64, data: &[u8]) -> bool {
        if data.len() > ENTRY || rank >= self.ranks() {
            return false;
        }
        // SAFETY: the entry is `ENTRY` bytes inside the mapping; its completion slot is
        // free (the queue's producer checked), so the rank is not reading it (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.recv_arena_entry(rank, position),
                data.len(),
            );
        }
        true
    }

    /// The rank's side: the first `len` bytes of its receive arena entry for the
    /// completion it is taking at `position` (`None` when `len` is more than an entry).
    pub fn recv_arena_bytes(&self, rank: u32, position: u64, len: usize) -> Option<&[u8]> {
        if len > ENTRY || rank >= self.ranks() {
            return None;
        }
        // SAFETY: the entry is `ENTRY` bytes inside the mapping, which lives as long as
        // `self`; the node manager wrote it before publishing the completion being taken
        // and does not write it again until the rank frees that completion's slot, after
        // the borrow ends (`Ring::pop_with`). Plain bytes: a misbehaving writer can only
        // make them wrong.
        Some(unsafe { std::slice::from_raw_parts(self.recv_arena_entry(rank, position), len) })
    }

    /// Address of `rank`'s arena entry for its descriptor `seq`.
    fn arena_entry(&self, rank: u32, seq: u64) -> *mut u8 {
        let dcap = self.header().desc_capacity as u64;
        self.entry_at(rank, arena_offset, (seq % (2 * dcap)) as usize)
    }

    /// The rank's side: put the bytes of its send `seq` in its arena; `false` when they do
    /// not fit an entry.
    pub fn arena_write(&self, rank: u32, seq: u64, data: &[u8]) -> bool {
        if data.len() > ENTRY || rank >= self.ranks() {
            return false;
        }
        // SAFETY: the entry is `ENTRY` bytes inside the mapping; only this rank writes its
        // arena, and only to the entry of a descriptor not pushed yet, which the node
        // manager does not read (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.arena_entry(rank, seq), data.len());
        }
        true
    }

    /// The node manager's side: the first `len` bytes of `rank`'s entry for its popped
    /// descriptor `seq`; `None` when `len` is more than an entry holds.
    pub fn arena_read(&self, rank: u32, seq: u64, len: usize) -> Option<Vec<u8>> {
        if len > ENTRY || rank >= self.ranks() {
            return None;
        }
        let mut out = vec![0u8; len];
        // SAFETY: the entry is `ENTRY` bytes inside the mapping; the rank wrote it before
        // pushing the descriptor this node manager popped (acquire), and does not write it
        // again before this drain is over (module docs). A rank that breaks the protocol
        // can only make these bytes wrong, never unsafe: they are plain bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.arena_entry(rank, seq), out.as_mut_ptr(), len);
        }
        Some(out)
    }
}
