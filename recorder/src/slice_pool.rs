//! Spent slice messages, handed back by the writer for the slice path to refill.
//!
//! The slice path (a node manager's thread) copied each slice's descriptors, decisions and
//! blocked-set changes into fresh vectors and the writer thread freed them. In glibc a
//! free of another thread's allocation takes the allocating arena's lock: on a
//! message-heavy job (`comet_exchange`, 70,000 slices a second) a fifth of the writer's
//! time went to those frees and the lock waits, and the node manager's allocations were a
//! tenth of its own. A refilled message keeps its vectors' capacity, so in the steady state
//! the slice path allocates nothing for the recorder and the writer frees nothing.
//! (mimalloc as the global allocator was tried instead: 4% faster on `comet_exchange`,
//! 5% slower on a 1,000-rank `token_ring`.)

use std::sync::{Arc, Mutex};

use crate::writer::SliceMsg;

/// At most this many spare messages are kept: the writer's queue can hold thousands when
/// it falls behind, and those beyond the pool are freed as before.
const POOL_MAX: usize = 1024;

// Boxes: a message travels through the writer's queue as a `Box`, and back.
#[allow(clippy::vec_box)]
#[derive(Clone, Default)]
pub(crate) struct SlicePool(Arc<Mutex<Vec<Box<SliceMsg>>>>);

impl SlicePool {
    /// A spare message (its fields hold the last slice it carried), or a new one.
    pub fn take(&self) -> Box<SliceMsg> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(|| Box::new(SliceMsg::empty()))
    }

    /// Give back a message the writer has written.
    pub fn give(&self, m: Box<SliceMsg>) {
        let mut spare = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < POOL_MAX {
            spare.push(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_given_back_is_handed_out_again_with_its_capacity() {
        let pool = SlicePool::default();
        let mut m = pool.take();
        m.replay.posted.reserve(100);
        let cap = m.replay.posted.capacity();
        let at = &*m as *const SliceMsg;
        pool.give(m);
        let again = pool.take();
        assert_eq!(&*again as *const SliceMsg, at);
        assert_eq!(again.replay.posted.capacity(), cap);
        // An empty pool makes a new one.
        let other = pool.take();
        assert_ne!(&*other as *const SliceMsg, at);
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound() {
        let pool = SlicePool::default();
        let many: Vec<_> = (0..POOL_MAX + 10).map(|_| pool.take()).collect();
        for m in many {
            pool.give(m);
        }
        assert_eq!(pool.0.lock().unwrap().len(), POOL_MAX);
    }
}
