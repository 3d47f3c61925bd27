//! Large chunks go to the ranks' own DMA Helper threads (one copy, by a rank: the receiver
//! pulls, the sender pushes): the node manager queues them during P2P and waits for them
//! before closing it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::helpers::{DirectChunk, Overrides};
use super::JobShared;
use crate::futex;
use crate::segment::{DmaWork, RankQueues, RankState};

/// Queue each direct chunk to its receiver's DMA Helper and wake it. Returns, per rank,
/// the `dma_done` value that means "all done".
pub(super) fn dispatch_direct(
    shared: &JobShared,
    local_ranks: &[u32],
    queues: &[RankQueues],
    pushed: &mut [u32],
    direct: &[DirectChunk],
) -> Vec<(u32, u32)> {
    let mut woken: Vec<(u32, u32)> = Vec::new();
    for (tag, c) in direct.iter().enumerate() {
        let i = local_ranks
            .binary_search(&c.helper)
            .expect("direct chunks have local helpers");
        let w = DmaWork {
            src_pid: c.src_pid as u32,
            dst_pid: c.dst_pid as u32,
            src_addr: c.src_addr,
            dst_addr: c.dst_addr,
            len: c.len,
            tag: tag as u64,
        };
        // The queue holds far more than one slice's P2P chunks (the budget bounds them).
        while queues[i].dma.push(&w).is_err() {
            // Full (a collective can queue one block per member): wake the helper now so it
            // drains while we wait, instead of after the loop.
            let slot = shared.seg.slot(c.helper);
            slot.dma_req.fetch_add(1, Ordering::Release);
            futex::wake_all(&slot.dma_req);
            std::thread::yield_now();
        }
        pushed[i] = pushed[i].wrapping_add(1);
        match woken.iter_mut().find(|(r, _)| *r == c.helper) {
            Some(e) => e.1 = pushed[i],
            None => woken.push((c.helper, pushed[i])),
        }
    }
    for &(rank, _) in &woken {
        let slot = shared.seg.slot(rank);
        slot.dma_req.fetch_add(1, Ordering::Release);
        futex::wake_all(&slot.dma_req);
    }
    woken
}

/// Wait until every rank's DMA Helper finished the copies queued this slice.
pub(super) fn await_direct(
    shared: &JobShared,
    waits: &[(u32, u32)],
    direct: &[DirectChunk],
    errs: &mut Overrides,
) {
    for &(rank, target) in waits {
        let slot = shared.seg.slot(rank);
        let mut spins = 0u32;
        loop {
            let done = slot.dma_done.load(Ordering::Acquire);
            if done == target {
                break;
            }
            if slot.state() == RankState::Exited
                || shared.seg.header().shutdown.load(Ordering::Acquire) != 0
            {
                for c in direct.iter().filter(|c| c.helper == rank) {
                    errs.insert(c.recv, crate::descriptor::RtError::Aborted);
                }
                break;
            }
            spins += 1;
            if spins < 2000 {
                if spins % 32 == 0 {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
            } else {
                let deadline = std::time::Instant::now().checked_add(Duration::from_millis(5));
                futex::wait_counted(&slot.dma_done, done, &slot.dma_done_sleepers, deadline);
            }
        }
        let e = slot.dma_error.swap(0, Ordering::AcqRel);
        if e != 0 {
            if let Some(c) = direct.get(e as usize - 1) {
                errs.insert(c.recv, crate::descriptor::RtError::Buffer);
            }
        }
    }
}
