//! What a node received from the other nodes in one phase of the data plane
//! (`remote.rs`): staged regions and chunks, read by the helpers, and the buffers reused
//! from phase to phase.

use std::collections::BTreeMap;

use super::Key;
use crate::descriptor::{DescRef, RtError};

#[derive(Default, Debug)]
pub(super) struct Staged {
    total: u64,
    /// The region's bytes are `data[..filled]`; what lies beyond is a reused buffer's old
    /// contents (kept initialized so a piece is copied in without zeroing it first).
    pub(super) data: Vec<u8>,
    filled: usize,
    failed: bool,
}

impl Staged {
    fn bytes(&self) -> &[u8] {
        &self.data[..self.filled]
    }
}

/// What arrived from the other nodes this phase, read by the helpers.
#[derive(Default, Debug)]
pub struct RemoteStore {
    pub(super) regions: BTreeMap<Key, Staged>,
    /// Bytes received (metrics, tests).
    pub bytes: u64,
    /// P2P chunks whole in one round, written into their local receiver straight from the
    /// staging window while the rounds ran (no copy into the store, and the write
    /// overlaps the next round's transfer), with the outcome of that write.
    pub(super) delivered: BTreeMap<(DescRef, u64), Result<(), RtError>>,
    /// Emptied buffers of earlier phases' regions ([`super::Staging::recycle`]), reused for new
    /// regions: a fresh buffer of a large message is page-faulted in and zeroed page by
    /// page, which cost more than the copy into it (perf of a 1 MiB exchange across
    /// hosts: `exc_page_fault` under `memset`, 13% of the node manager's samples).
    pub(super) spare: Vec<Vec<u8>>,
}

/// Most buffers [`super::Staging`] keeps for reuse, and the most bytes of capacity they may hold.
pub(super) const SPARE_BUFFERS: usize = 64;
pub(super) const SPARE_BYTES: usize = 64 << 20;

impl RemoteStore {
    /// The bytes of `send`'s chunk at `offset`.
    pub fn chunk(&self, send: DescRef, offset: u64, len: u64) -> Result<&[u8], RtError> {
        match self.regions.get(&Key::Chunk { send, offset }) {
            Some(s) if !s.failed && s.filled as u64 == len => Ok(s.bytes()),
            _ => Err(RtError::Buffer),
        }
    }

    /// Whether `send`'s chunk at `offset` was written into its receiver already, and how
    /// that went.
    pub fn delivered(&self, send: DescRef, offset: u64) -> Option<Result<(), RtError>> {
        self.delivered.get(&(send, offset)).copied()
    }

    /// `len` bytes at `addr` of remote `rank`: inside some region its node pushed.
    pub fn read(&self, rank: u32, addr: u64, len: u64) -> Result<&[u8], RtError> {
        let lo = Key::Mem {
            rank,
            addr: 0,
            len: 0,
        };
        let hi = Key::Mem {
            rank,
            addr,
            len: u64::MAX,
        };
        for (k, s) in self.regions.range(lo..=hi).rev() {
            let Key::Mem { addr: start, .. } = *k else {
                continue;
            };
            let end = start + s.filled as u64;
            if addr + len <= end && !s.failed {
                let from = (addr - start) as usize;
                return Ok(&s.bytes()[from..from + len as usize]);
            }
        }
        tracing::debug!(rank, addr, len, "remote read not staged");
        Err(RtError::Buffer)
    }

    /// Room for the next piece of a region, to be filled by the caller; `None` when the
    /// piece does not continue the region (a damaged round).
    pub(super) fn piece_slot(
        &mut self,
        key: Key,
        total: u64,
        off: u64,
        len: usize,
        failed: bool,
    ) -> Option<&mut [u8]> {
        let spare = &mut self.spare;
        let s = self.regions.entry(key).or_insert_with(|| Staged {
            total,
            // One allocation for the whole region (bounded: `total` comes from a peer).
            data: take_spare(spare, total.min(256 << 20) as usize),
            filled: 0,
            failed: false,
        });
        // Pieces of a region arrive in order, each continuing the previous one.
        if s.total != total || off != s.filled as u64 || off + len as u64 > total {
            return None;
        }
        s.failed |= failed;
        let start = s.filled;
        if s.data.len() < start + len {
            s.data.resize(start + len, 0);
        }
        s.filled = start + len;
        self.bytes += len as u64;
        Some(&mut s.data[start..start + len])
    }
}

/// A buffer for a region of `want` bytes: the smallest spare one at least that long (its
/// old bytes stay until overwritten), else a new, empty one with that capacity.
fn take_spare(spare: &mut Vec<Vec<u8>>, want: usize) -> Vec<u8> {
    let best = spare
        .iter()
        .enumerate()
        .filter(|(_, b)| b.len() >= want)
        .min_by_key(|(_, b)| b.len())
        .map(|(i, _)| i);
    match best {
        Some(i) => spare.swap_remove(i),
        None => Vec::with_capacity(want),
    }
}
