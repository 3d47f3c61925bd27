//! The rank's side of inline sends (scheduler version 3, docs/architecture.md "Inline sends
//! for tiny messages"): copying a tiny send into its descriptor when it is posted, and
//! writing a tiny message that rides in a delivered completion into the receive buffer.

use crate::descriptor::{
    Completion, DescKind, Descriptor, ANY_TAG, COMPLETION_INLINE, FLAG_INLINE, FLAG_LOCAL,
    INLINE_MAX, PROC_NULL, RANK_COPY_MAX,
};
use crate::segment::JobSegment;

/// A standard-mode or ready send of at most `inline_max` bytes to a rank carries its bytes
/// in the descriptor (at most `INLINE_MAX`) or in the rank's send arena (above it,
/// scheduler version 5: `segment_arena.rs`; `d.seq` must be set) and completes now, as the
/// scheduler records (`COMPLETION_INLINE`). Returns that completion, for the rank's table,
/// when `d` became inline.
pub(crate) fn carry(d: &mut Descriptor, inline_max: u64, seg: &JobSegment) -> Option<Completion> {
    let standard = matches!(d.kind(), Some(DescKind::Send | DescKind::Rsend));
    // A null buffer with bytes to send takes the usual path, which reports it.
    let bad_buffer = d.buf == 0 && d.bytes > 0;
    if !standard || d.bytes > inline_max || d.peer == PROC_NULL || d.tag < 0 || bad_buffer {
        return None;
    }
    let data: &[u8] = if d.bytes == 0 {
        &[]
    } else {
        // SAFETY: a send descriptor's `buf` is the address of `bytes` readable bytes of
        // this process until the send completes: a borrowed slice in the Rust API
        // (`send_desc`), the MPI contract of a send buffer in the C ABI (packed into a
        // buffer the C layer owns when the datatype is not contiguous). The send
        // completes here, after this copy.
        unsafe { std::slice::from_raw_parts(d.buf as *const u8, d.bytes as usize) }
    };
    if data.len() as u64 <= INLINE_MAX {
        if !d.set_inline_payload(data) {
            return None;
        }
    } else {
        if !seg.arena_write(d.rank, d.seq, data) {
            return None;
        }
        d.flags |= FLAG_INLINE;
    }
    Some(Completion {
        request: d.request,
        source: d.peer,
        tag: d.tag,
        bytes: d.bytes,
        flags: COMPLETION_INLINE,
        ..Completion::default()
    })
}

/// The input region, as (address, bytes), of a collective small enough for its rank to
/// copy into its send arena when it posts it (`engine/coll_inputs.rs`): a reduction's
/// contribution, a broadcast's buffer (every member's: the rank does not know whether it
/// is the root), an all-to-all's send buffer, of 1 to `RANK_COPY_MAX` bytes at a non-null
/// address. The rank ([`copy_input`]) and the node manager (its drain) both apply this rule
/// to the descriptor alone, so they agree on which arena entries hold an input.
pub(crate) fn arena_input(d: &Descriptor) -> Option<(u64, u64)> {
    let kind = d.kind()?;
    let (addr, len) = if kind.is_reduction() {
        crate::engine::remote::contribution_region(d)
    } else if matches!(kind, DescKind::Bcast | DescKind::Alltoall) && !d.in_place() {
        (d.buf, d.bytes)
    } else {
        return None;
    };
    (addr != 0 && len > 0 && len <= RANK_COPY_MAX).then_some((addr, len))
}

/// Copy a small collective's input ([`arena_input`]) into the rank's send arena entry for
/// `d` (`d.seq` set), before `d` is pushed.
pub(crate) fn copy_input(d: &Descriptor, seg: &JobSegment) {
    let Some((addr, len)) = arena_input(d) else {
        return;
    };
    // SAFETY: a collective's input region (`buf`/`bytes`, or `rbuf`/`rbytes` in place) is
    // `len` readable bytes of this process until the call completes: a borrowed slice in
    // the Rust API, the MPI contract of the call's buffers in the C ABI (packed into a
    // buffer the C layer owns for a non-contiguous datatype). Null addresses are excluded
    // by `arena_input`; the node manager reports them as before. A broadcast member that
    // is not the root has its receive buffer copied too: mapped memory of the program,
    // copied as plain bytes and never used.
    let data = unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) };
    // Cannot fail: `len` fits an entry and `d.rank` is this segment's.
    let _ = seg.arena_write(d.rank, d.seq, data);
}

/// A send or receive whose peer is `MPI_PROC_NULL` (scheduler version 4) completes when it
/// is posted: flag it [`FLAG_LOCAL`] (the scheduler then records the same completion and
/// delivers nothing). Returns whether `d` became local.
pub(crate) fn make_local(d: &mut Descriptor) -> bool {
    let p2p = matches!(
        d.kind(),
        Some(DescKind::Send | DescKind::Ssend | DescKind::Rsend | DescKind::Recv)
    );
    if !p2p || d.peer != PROC_NULL {
        return false;
    }
    d.flags |= FLAG_LOCAL;
    true
}

/// The completion of a local `MPI_PROC_NULL` call, as the scheduler records it: source
/// `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, no bytes (the standard's status for such calls).
pub(crate) fn local_completion(d: &Descriptor) -> Completion {
    Completion {
        request: d.request,
        source: PROC_NULL,
        tag: ANY_TAG,
        bytes: 0,
        flags: COMPLETION_INLINE,
        ..Completion::default()
    }
}

/// A delivered completion whose receive's bytes wait in the rank's receive arena
/// (`COMPLETION_ARENA`, segment layout 13): copy them into the receive buffer, before the
/// completion's queue slot (and with it the entry) is freed.
pub(crate) fn write_from_arena(
    seg: &crate::segment::JobSegment,
    rank: u32,
    c: &mut Completion,
    position: u64,
) {
    let Some((addr, len)) = c.take_arena() else {
        return;
    };
    let Some(bytes) = seg.recv_arena_bytes(rank, position, len) else {
        c.error = crate::descriptor::RtError::Buffer as u32;
        return;
    };
    // SAFETY: as in `write_carried`: the node manager flags a completion so only for one
    // of this rank's receives, with that receive's buffer address and at most the bytes it
    // matched (never more than its capacity), or for one of its reductions, with its
    // non-null result buffer and at most that buffer's `rbytes`; the
    // buffer is the call's until this completion is taken, and the arena entry is not the
    // buffer (shared memory of the job segment).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, len) };
}

/// A delivered completion that carries its receive's bytes (`COMPLETION_PAYLOAD`): write
/// them into the receive buffer and leave the completion as the scheduler decided it.
pub(crate) fn write_carried(c: &mut Completion) {
    if let Some((addr, raw, len)) = c.take_payload() {
        // SAFETY: the node manager carries a payload only in the completion of one of this
        // rank's receives, with that receive's buffer address and at most the bytes it
        // matched (never more than its capacity), or of one of its reductions, with its
        // non-null result buffer and at most that buffer's `rbytes`. The buffer is the
        // call's until this completion is taken (the MPI contract; a Rust scope's borrow),
        // and nothing else writes it meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), addr as *mut u8, len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::FLAG_IN_PLACE;

    fn coll(kind: DescKind, bytes: u64, flags: u8) -> Descriptor {
        Descriptor {
            kind: kind as u8,
            flags,
            buf: 0x1000,
            bytes,
            rbuf: 0x2000,
            rbytes: bytes,
            ..Descriptor::default()
        }
    }

    #[test]
    fn small_collective_inputs_are_their_contribution_or_send_buffer() {
        assert_eq!(
            arena_input(&coll(DescKind::Allreduce, 8, 0)),
            Some((0x1000, 8))
        );
        assert_eq!(
            arena_input(&coll(DescKind::Allreduce, 8, FLAG_IN_PLACE)),
            Some((0x2000, 8)),
            "in place: the result buffer holds the input"
        );
        assert_eq!(
            arena_input(&coll(DescKind::Scan, 64, 0)),
            Some((0x1000, 64))
        );
        assert_eq!(
            arena_input(&coll(DescKind::Bcast, 16, 0)),
            Some((0x1000, 16))
        );
        assert_eq!(
            arena_input(&coll(DescKind::Alltoall, 32, 0)),
            Some((0x1000, 32))
        );
        assert_eq!(
            arena_input(&coll(DescKind::Alltoall, 32, FLAG_IN_PLACE)),
            None
        );
        assert_eq!(
            arena_input(&coll(DescKind::Allreduce, 65, 0)),
            None,
            "too long"
        );
        assert_eq!(arena_input(&coll(DescKind::Allreduce, 0, 0)), None, "empty");
        assert_eq!(arena_input(&coll(DescKind::Gather, 8, 0)), None);
        assert_eq!(
            arena_input(&coll(DescKind::Send, 8, 0)),
            None,
            "sends have their own"
        );
        let mut null = coll(DescKind::Allreduce, 8, 0);
        null.buf = 0;
        assert_eq!(
            arena_input(&null),
            None,
            "a null buffer is reported as before"
        );
    }
}
