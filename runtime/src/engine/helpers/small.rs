//! Collectives small enough for the ranks to write their results themselves: a result of
//! at most `RANK_COPY_MAX` bytes (a reduction's, a small broadcast's or all-to-all's) rides
//! in its completion or the rank's receive arena, as tiny messages do (`Carried`), instead
//! of a `process_vm_writev` per member on the node manager's path. What is written, where,
//! and the decisions are unchanged; only who copies the bytes in the last step.

use super::{Carried, Memory, Overrides, PendingWrite};
use crate::descriptor::{Descriptor, RtError, RANK_COPY_MAX};

impl Carried {
    /// Take the reduction results the ranks may write themselves: a whole result of at
    /// most `RANK_COPY_MAX` bytes for an allowed rank rides in its completion (or its
    /// receive arena) like a tiny message, instead of a `process_vm_writev` per rank on
    /// the node manager's path between the RM microstrobe and the wake-ups. Returns the
    /// writes left to [`super::apply_writes`]. What is written, and where, is unchanged.
    pub fn take_results(
        &mut self,
        writes: Vec<PendingWrite>,
        errs: &Overrides,
    ) -> Vec<PendingWrite> {
        let mut rest = Vec::new();
        for w in writes {
            let allowed = self
                .allowed
                .get(w.desc.rank as usize)
                .copied()
                .unwrap_or(false);
            let small = super::SmallBytes::new(&w.data);
            // A null result buffer is written (and reported) as before.
            match small {
                Some(data) if allowed && w.fits && w.addr != 0 && !errs.contains_key(&w.desc) => {
                    self.by_recv.insert(w.desc, w.addr, data);
                }
                _ => rest.push(w),
            }
        }
        rest
    }
}

/// A broadcast of at most `RANK_COPY_MAX` bytes: the root's buffer is taken from node
/// memory (`coll_inputs.rs`) or read once, and each
/// local member's copy becomes a write applied with the reduction results (after RM's
/// read), which a rank that may carry payloads takes in its completion
/// ([`Carried::take_results`]): no system call per member. A legal program does not touch
/// a broadcast's buffer before it completes, so the later write changes nothing it sees.
pub(super) fn small_bcast(
    root: usize,
    rt: &Descriptor,
    parts: &[Descriptor],
    mem: &Memory<'_>,
    writes: &mut Vec<PendingWrite>,
) -> Result<(), RtError> {
    if rt.bytes == 0 {
        return Ok(());
    }
    // The scheduler checked that every member's `bytes` is the root's.
    let data = mem.input(rt, rt.buf, rt.bytes)?;
    let members = parts
        .iter()
        .enumerate()
        .filter(|&(i, p)| i != root && (mem.local)(p.rank));
    for (_, p) in members {
        writes.push(PendingWrite {
            desc: p.id(),
            addr: p.buf,
            data: data.clone(),
            fits: p.bytes >= rt.bytes,
        });
    }
    Ok(())
}

/// The block of an all-to-all whose every member sends and receives `n` equal blocks of
/// the same size, at most `RANK_COPY_MAX` bytes in all: each member's whole receive
/// buffer is then written, so it can ride in its completion. `None`: the general path.
pub(super) fn small_alltoall_block(parts: &[Descriptor]) -> Option<u64> {
    let n = parts.len() as u64;
    let blk = parts.first()?.bytes / n;
    let whole = blk * n;
    let uniform = parts.iter().all(|q| q.bytes == whole && q.rbytes == whole);
    (uniform && blk > 0 && whole <= RANK_COPY_MAX).then_some(blk)
}

/// A small all-to-all ([`small_alltoall_block`]): every local member's send buffer is
/// taken from node memory or read once (a remote member's blocks as they were staged),
/// and each local member's receive buffer, assembled here, becomes a write applied with
/// the reduction results:
/// `n` reads for the node instead of a read and a write per block (24 system calls on 4
/// ranks, 42 us of a 4-rank 8-byte `MPI_Alltoall`'s BBM). Same bytes, same places.
pub(super) fn small_alltoall(
    blk: u64,
    parts: &[Descriptor],
    mem: &Memory<'_>,
    writes: &mut Vec<PendingWrite>,
) -> Result<(), RtError> {
    let locals: Vec<(usize, &Descriptor)> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| (mem.local)(p.rank))
        .collect();
    let whole = blk as usize * parts.len();
    let mut received = vec![Vec::with_capacity(whole); locals.len()];
    for q in parts {
        let sent = if (mem.local)(q.rank) {
            Some(mem.input(q, q.buf, q.bytes)?)
        } else {
            None
        };
        for ((i, _), into) in locals.iter().zip(received.iter_mut()) {
            let at = *i as u64 * blk;
            match &sent {
                Some(all) => into.extend_from_slice(&all[at as usize..(at + blk) as usize]),
                None => into.extend_from_slice(&mem.read(q.rank, q.buf + at, blk)?),
            }
        }
    }
    for ((_, p), data) in locals.into_iter().zip(received) {
        writes.push(PendingWrite {
            desc: p.id(),
            addr: p.rbuf,
            data,
            fits: true,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::DescRef;

    #[test]
    fn small_reduction_results_ride_with_allowed_ranks_and_the_rest_is_written() {
        let write = |rank: u32, seq: u64, addr: u64, len: usize, fits: bool| PendingWrite {
            desc: DescRef { rank, seq },
            addr,
            data: vec![7; len],
            fits,
        };
        let mut carried = Carried {
            allowed: vec![true, false],
            ..Carried::default()
        };
        let mut errs = Overrides::new();
        errs.insert(DescRef { rank: 0, seq: 6 }, RtError::Op);
        let left = carried.take_results(
            vec![
                write(0, 1, 0x1000, 8, true),
                write(0, 2, 0x2000, RANK_COPY_MAX as usize, true),
                write(1, 3, 0x3000, 8, true),
                write(0, 4, 0x4000, RANK_COPY_MAX as usize + 1, true),
                write(0, 5, 0, 8, true),
                write(0, 6, 0x6000, 8, true),
                write(0, 7, 0x7000, 8, false),
            ],
            &errs,
        );
        let taken: Vec<(u64, u64, usize)> = carried
            .by_recv
            .iter()
            .map(|(d, addr, data)| (d.seq, addr, data.len()))
            .collect();
        assert_eq!(taken, vec![(1, 0x1000, 8), (2, 0x2000, 64)]);
        let rest: Vec<u64> = left.iter().map(|w| w.desc.seq).collect();
        assert_eq!(
            rest,
            vec![3, 4, 5, 6, 7],
            "not allowed, too large, null, failed, too long for its buffer"
        );
    }

    #[test]
    fn only_uniform_all_to_alls_of_at_most_64_bytes_take_the_small_path() {
        let part = |bytes: u64, rbytes: u64| Descriptor {
            bytes,
            rbytes,
            ..Descriptor::default()
        };
        assert_eq!(small_alltoall_block(&[part(16, 16), part(16, 16)]), Some(8));
        assert_eq!(small_alltoall_block(&[part(64, 64); 4]), Some(16));
        assert_eq!(small_alltoall_block(&[part(72, 72); 4]), None, "72 bytes");
        assert_eq!(small_alltoall_block(&[part(16, 16), part(16, 32)]), None);
        assert_eq!(small_alltoall_block(&[part(15, 15), part(15, 15)]), None);
        assert_eq!(small_alltoall_block(&[part(0, 0), part(0, 0)]), None);
    }
}
