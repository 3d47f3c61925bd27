//! Small collective inputs in node memory.
//!
//! A rank posting a collective whose input is at most `RANK_COPY_MAX` bytes (a reduction's
//! contribution, a broadcast's buffer, an all-to-all's send buffer:
//! [`crate::rank_inline::arena_input`]) copies that input into its send arena entry for
//! the descriptor, as it does the bytes of a small send, and the node manager moves it here
//! when it drains the descriptor (`NodeManager::drain`), before the entry can be reused.
//! The collective's helpers then take it from here instead of reading the rank's memory
//! with `process_vm_readv` (one system call per member on the node manager's path: 6.5 us
//! of an 8-byte `MPI_Allreduce`'s RM on 4 ranks). Which collectives carry their input is a
//! rule both sides apply to the descriptor alone, so the descriptor, the decisions and
//! the recording are the same with or without it.
//!
//! An input is taken (and freed) by the helper that reads it, and only for the very
//! region it reads; whatever is left (a broadcast member that is not the root, a call that
//! completed in error) is freed when its completion is delivered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::descriptor::DescRef;

/// Inputs held for collectives not yet executed: descriptor -> (address, bytes).
#[derive(Default)]
pub struct CollInputs {
    held: Mutex<HashMap<DescRef, (u64, Vec<u8>)>>,
    /// How many are held (kept with the map): [`CollInputs::forget`] runs for every
    /// delivered completion, and a job without small collectives pending only loads this.
    count: AtomicUsize,
}

impl CollInputs {
    fn lock(&self) -> MutexGuard<'_, HashMap<DescRef, (u64, Vec<u8>)>> {
        // A poisoned lock only means another node thread panicked; the map is still whole.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hold `bytes`, the input of `desc` found at `addr` in its rank when it was posted.
    pub fn hold(&self, desc: DescRef, addr: u64, bytes: Vec<u8>) {
        let mut held = self.lock();
        held.insert(desc, (addr, bytes));
        self.count.store(held.len(), Ordering::Relaxed);
    }

    /// The held input of `desc` if it is exactly the region `(addr, len)`, freed.
    pub fn take(&self, desc: DescRef, addr: u64, len: u64) -> Option<Vec<u8>> {
        let mut held = self.lock();
        match held.get(&desc) {
            Some((a, b)) if *a == addr && b.len() as u64 == len => {
                let taken = held.remove(&desc).map(|(_, b)| b);
                self.count.store(held.len(), Ordering::Relaxed);
                taken
            }
            _ => None,
        }
    }

    /// Free whatever is held for `desc` (its completion is being delivered).
    pub fn forget(&self, desc: DescRef) {
        // Every store of the count is the map's size, made under the lock; `desc` was held
        // by this thread (its node drained it) before its completion is delivered here, so
        // while it is held this load sees that store or a later one, never 0.
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut held = self.lock();
        held.remove(&desc);
        self.count.store(held.len(), Ordering::Relaxed);
    }

    /// Inputs held (tests, reports).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_is_taken_once_and_only_for_its_own_region() {
        let inputs = CollInputs::default();
        let d = DescRef { rank: 2, seq: 9 };
        inputs.hold(d, 0x1000, vec![1, 2, 3, 4]);
        assert_eq!(inputs.take(d, 0x1000, 8), None, "other length");
        assert_eq!(inputs.take(d, 0x2000, 4), None, "other address");
        assert_eq!(inputs.take(DescRef { rank: 2, seq: 8 }, 0x1000, 4), None);
        assert_eq!(inputs.take(d, 0x1000, 4), Some(vec![1, 2, 3, 4]));
        assert_eq!(inputs.take(d, 0x1000, 4), None, "taken once");
        inputs.hold(d, 0x1000, vec![5]);
        inputs.forget(d);
        assert!(inputs.is_empty());
    }
}
