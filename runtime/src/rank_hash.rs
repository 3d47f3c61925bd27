//! The rank's table of delivered completions and its hasher (a child module of `rank`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::descriptor::Completion;

/// Delivered completions by request id. Request ids are a rank's own sequential numbers,
/// never chosen by anybody else, so SipHash's protection against crafted keys buys nothing
/// here; with the C layer's request tables it was ~8% of the ranks' time at a window of 64
/// one-byte messages (`perf record`, docs/benchmarks-detail.md "Small messages: where the
/// time goes").
pub type DoneMap = HashMap<u64, Completion, BuildHasherDefault<RequestHasher>>;

/// A multiplicative (Fibonacci) hash of a request id: one multiply, and the high bits
/// hashbrown uses for its control bytes differ between consecutive ids.
#[derive(Default)]
pub struct RequestHasher(u64);

impl Hasher for RequestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used for u64 keys; any other key still hashes correctly, byte by byte.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn consecutive_ids_spread_over_the_control_bits() {
        let b = BuildHasherDefault::<RequestHasher>::default();
        // hashbrown takes its 7 control bits from the top of the hash: consecutive request
        // ids (what a rank inserts) must not all share them.
        let tops: std::collections::BTreeSet<u64> =
            (1..=64u64).map(|i| b.hash_one(i) >> 57).collect();
        assert!(tops.len() > 32, "{} distinct control values", tops.len());
        let mut m = DoneMap::default();
        for i in 1..=1000u64 {
            m.insert(
                i,
                Completion {
                    request: i,
                    ..Default::default()
                },
            );
        }
        assert!((1..=1000u64).all(|i| m[&i].request == i));
    }
}
