//! The Strobe Sender's doorbell in the job header, and the words through which ranks ask
//! it for the next slice: `urgent` (two levels), `posted_since`, `stretched`. Every
//! function here is a few atomic operations on the slice path of a rank or of the node
//! manager; none sleeps.

use std::sync::atomic::Ordering;

use super::JobSegment;

/// `JobHeader::urgent`: a rank waits for a message the posts before this slice may bring
/// (a blocked receiver of a posted send, a rank that blocks while descriptors wait for
/// their exchange). Every microsecond before the slice is its wait.
pub const URGENT_NOW: u32 = 1;
/// `JobHeader::urgent`: a rank blocked in a call the next slice completes by itself (a
/// small eager send). Nobody waits on it but its own rank; a rank that computes may be
/// about to post what the same slice could serve (a ping-pong's partner, woken a moment
/// ago, between its `MPI_Send` and its `MPI_Recv`).
pub const URGENT_SOON: u32 = 2;

/// Ask the Strobe Sender for the next slice ([`URGENT_NOW`] or [`URGENT_SOON`]).
pub fn ring_urgent(seg: &JobSegment, level: u32) {
    mark_urgent(seg, level);
    ring_doorbell(seg);
}

/// Run `post` (a rank's post of a send); with `urgent` (its receiver is blocked), ask for
/// the next slice at once ([`URGENT_NOW`]): marked before the post, rung after it. The
/// post may itself wake a stretched Strobe Sender ([`ring_if_stretched`]), and that
/// wake-up must already find the request, or the Strobe Sender polls its doorbell
/// instead of starting the slice (`RankCtx::post_send` says what that cost). A slice
/// started between the mark and the post by something else only comes early: the ring
/// after the post asks again.
pub fn post_with_request<T>(seg: &JobSegment, urgent: bool, post: impl FnOnce() -> T) -> T {
    if urgent {
        mark_urgent(seg, URGENT_NOW);
    }
    let posted = post();
    if urgent {
        ring_urgent(seg, URGENT_NOW);
    }
    posted
}

/// [`ring_urgent`] without the ring: for a request that a ring about to follow (a post's)
/// must already find.
pub fn mark_urgent(seg: &JobSegment, level: u32) {
    let h = seg.header();
    if h.urgent.load(Ordering::Relaxed) & level != level {
        h.urgent.fetch_or(level, Ordering::AcqRel);
    }
}

/// What the ranks asked of the next slice ([`ring_urgent`]): 0, or `URGENT_*` bits.
pub fn urgent(seg: &JobSegment) -> u32 {
    seg.header().urgent.load(Ordering::Acquire)
}

/// A slice begins: the ranks it serves are served (a later request starts the next one),
/// and the descriptors posted so far are about to be exchanged.
pub fn clear_urgent(seg: &JobSegment) {
    let h = seg.header();
    if h.urgent.load(Ordering::Relaxed) != 0 {
        h.urgent.store(0, Ordering::Release);
    }
    if h.posted_since.load(Ordering::Relaxed) != 0 {
        h.posted_since.store(0, Ordering::Release);
    }
}

/// `JobHeader::posted_since` once more than one rank posted since the slice began.
const POSTED_BY_SEVERAL: u32 = u32::MAX;

/// `JobHeader::posted_since` when `rank` alone posted since the slice began.
fn posted_by(rank: u32) -> u32 {
    rank.saturating_add(1).min(POSTED_BY_SEVERAL - 1)
}

/// `rank` posted a descriptor that needs a slice: note it, and who posted, for ranks that
/// block before the next slice ([`block_wants_slice`]). One load per post once the word
/// says this rank or several (the first post after a slice began writes it, and the first
/// of a second rank).
pub fn mark_posted(seg: &JobSegment, rank: u32) {
    let h = seg.header();
    let me = posted_by(rank);
    let seen = h.posted_since.load(Ordering::Relaxed);
    if seen == me || seen == POSTED_BY_SEVERAL {
        return;
    }
    if seen == 0 {
        match h
            .posted_since
            .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return,
            Err(now) if now == me || now == POSTED_BY_SEVERAL => return,
            Err(_) => {}
        }
    }
    h.posted_since.store(POSTED_BY_SEVERAL, Ordering::Release);
}

/// `rank` is about to block while others compute: whether the next slice should start
/// rather than wait for the timer, and how soon. It should when descriptors wait for
/// their exchange: the blocking rank may wait for one of them (a wavefront's downstream
/// rank, whose upstream neighbour posted its `MPI_Isend` while this rank still computed:
/// without this, the message waited up to a whole slice for the timer, 9% of the
/// SWEEP3D-like benchmark's time). At once ([`URGENT_NOW`]) when another rank posted;
/// when only this rank did, its partner is often computing only for the microseconds
/// before its own posts (an exchange's `MPI_Isend` and `MPI_Recv` on both ranks), so the
/// ranks still computing get the grace of [`URGENT_SOON`] to post and block as well: a
/// slice started at once exchanged one side of the exchange alone. At most one early
/// slice per batch of posts: the slice clears the word.
pub fn block_wants_slice(seg: &JobSegment, rank: u32) -> Option<u32> {
    match seg.header().posted_since.load(Ordering::Acquire) {
        0 => None,
        p if p == posted_by(rank) => Some(URGENT_SOON),
        _ => Some(URGENT_NOW),
    }
}

/// A post that need not wake the stretched Strobe Sender: a non-blocking receive (from a
/// rank, not `MPI_PROC_NULL`) while every rank of a one-node job computes. Nobody waits
/// for it yet: it completes nothing by itself (a send it could match completes eagerly or
/// waits in a blocked or polling rank, and then some rank does not compute), and the slice
/// that exchanges it comes when its rank, or another, blocks (`block_wants_slice`), polls
/// in vain (`RankCtx::capture_fail`), or posts anything else. Ringing for it restarted the
/// timer, and the timer slice that followed exchanged it while every rank computed, taking
/// a core from one of them: a pre-posted `MPI_Irecv` per block of the SWEEP3D-like
/// non-blocking wavefront. Several nodes ring as before (the other nodes' ranks are not
/// counted here).
pub fn post_waits_for_a_wait(seg: &JobSegment, d: &crate::descriptor::Descriptor) -> bool {
    let h = seg.header();
    d.kind() == Some(crate::descriptor::DescKind::Recv)
        && !d.blocking()
        && d.peer != crate::descriptor::PROC_NULL
        && h.nodes == 1
        && h.computing.load(Ordering::Acquire) >= h.ranks
}

/// After a post: if the Strobe Sender stretched its timer and sleeps, wake it (once: the
/// first post clears the word). The fence pairs with the Strobe Sender's, which sets the
/// word and then looks at the queues: either it sees this descriptor or this sees the word.
pub fn ring_if_stretched(seg: &JobSegment) {
    std::sync::atomic::fence(Ordering::SeqCst);
    let h = seg.header();
    if h.stretched.load(Ordering::Relaxed) != 0 && h.stretched.swap(0, Ordering::AcqRel) != 0 {
        ring_doorbell(seg);
    }
}

/// Ring the Strobe Sender's doorbell.
pub fn ring_doorbell(seg: &JobSegment) {
    let h = seg.header();
    crate::futex::bump_and_wake(&h.doorbell, &h.doorbell_sleepers);
}
