//! The vectors a slice fills on the node manager (its drained batch, blocked list, call-site
//! words and sites), kept from the last slice for the next to refill: a slice with a
//! blocked rank allocated each of them (docs/benchmarks-detail.md, "The node manager's
//! allocations"). A vector that grew past [`MAX_KEPT`] entries in one large slice is freed
//! rather than held for the rest of the job.

use std::sync::Arc;

use crate::callsite::SiteWords;
use crate::descriptor::Descriptor;
use crate::segment::BlockedCall;
use crate::symbolize::CallSite;

/// The most entries a kept vector may have room for.
pub const MAX_KEPT: usize = 4096;

/// `v`, emptied, if its room is at most [`MAX_KEPT`] entries; else a new vector.
pub fn kept<T>(mut v: Vec<T>) -> Vec<T> {
    if v.capacity() > MAX_KEPT {
        return Vec::new();
    }
    v.clear();
    v
}

#[derive(Default)]
pub(super) struct Spares {
    pub batch: Vec<Descriptor>,
    pub blocked: Vec<(u32, BlockedCall)>,
    pub words: Vec<(u32, i32, SiteWords)>,
    pub sites: Vec<(u32, Arc<CallSite>)>,
    /// An emptied per-rank delivery buffer (`deliver`).
    pub overflow: Vec<crate::descriptor::Completion>,
    /// The sites published with this slice's blocking posts (`add_post_sites`).
    pub post_sites: Vec<(u32, i32, SiteWords)>,
}

impl Spares {
    /// Keep a spent slice's vectors.
    pub fn keep(
        &mut self,
        batch: Vec<Descriptor>,
        blocked: Vec<(u32, BlockedCall)>,
        sites: Vec<(u32, Arc<CallSite>)>,
    ) {
        self.batch = kept(batch);
        self.blocked = kept(blocked);
        self.sites = kept(sites);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_is_kept_empty_unless_it_grew_too_large() {
        let small: Vec<u32> = (0..100).collect();
        let cap = small.capacity();
        let again = kept(small);
        assert!(again.is_empty() && again.capacity() == cap);
        let large: Vec<u32> = (0..MAX_KEPT as u32 + 1).collect();
        assert_eq!(kept(large).capacity(), 0);
    }
}
