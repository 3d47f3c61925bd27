//! A slice's carried payloads (`Carried`), by the receive they are for.
//!
//! A map made anew every slice allocated a node for the first payload of every slice (a
//! ping-pong's every slice; docs/benchmarks-detail.md, "The slice path's allocations"):
//! this is a vector kept across slices, put in order once, when the delivery first looks
//! a payload up, and then searched by bisection.

use super::SmallBytes;
use crate::descriptor::DescRef;

/// Receive (or reduction member) -> (address in the rank, bytes), for one slice.
#[derive(Default)]
pub struct CarriedPayloads {
    /// In insertion order until [`Self::sorted`]; then by receive, each once, a payload
    /// taken by the delivery set to `None`.
    entries: Vec<(DescRef, u64, Option<SmallBytes>)>,
    sorted: bool,
}

impl CarriedPayloads {
    /// Carry `data` to `addr` for `recv` (a later insert for the same receive replaces an
    /// earlier one, as a map's would).
    pub fn insert(&mut self, recv: DescRef, addr: u64, data: SmallBytes) {
        self.entries.push((recv, addr, Some(data)));
        self.sorted = false;
    }

    fn sort(&mut self) {
        if self.sorted {
            return;
        }
        // Reversed, a stable sort puts a receive's last insert first; `dedup` keeps it.
        self.entries.reverse();
        self.entries.sort_by_key(|e| e.0);
        self.entries.dedup_by_key(|e| e.0);
        self.sorted = true;
    }

    /// The payload for `recv`, taken.
    pub fn remove(&mut self, recv: &DescRef) -> Option<(u64, SmallBytes)> {
        self.sort();
        let i = self.entries.binary_search_by_key(recv, |e| e.0).ok()?;
        let (_, addr, data) = &mut self.entries[i];
        data.take().map(|d| (*addr, d))
    }

    /// Every payload not taken, by receive; empties the set (its room is kept).
    pub fn take_rest(&mut self) -> impl Iterator<Item = (DescRef, (u64, SmallBytes))> + '_ {
        self.sort();
        self.sorted = false;
        self.entries
            .drain(..)
            .filter_map(|(d, addr, data)| data.map(|b| (d, (addr, b))))
    }

    /// Every payload not taken, by receive (for tests and reports).
    pub fn iter(&mut self) -> impl Iterator<Item = (DescRef, u64, &SmallBytes)> + '_ {
        self.sort();
        self.entries
            .iter()
            .filter_map(|(d, addr, data)| data.as_ref().map(|b| (*d, *addr, b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(rank: u32, seq: u64) -> DescRef {
        DescRef { rank, seq }
    }

    fn bytes(b: &[u8]) -> SmallBytes {
        SmallBytes::new(b).unwrap()
    }

    #[test]
    fn payloads_are_found_once_the_last_insert_wins_and_the_rest_is_left() {
        let mut p = CarriedPayloads::default();
        p.insert(id(1, 4), 0x10, bytes(b"a"));
        p.insert(id(0, 9), 0x20, bytes(b"b"));
        p.insert(id(1, 4), 0x30, bytes(b"cc"));
        p.insert(id(0, 2), 0x40, bytes(b"d"));
        let (addr, data) = p.remove(&id(1, 4)).unwrap();
        assert_eq!((addr, &data[..]), (0x30, &b"cc"[..]));
        assert!(p.remove(&id(1, 4)).is_none(), "taken once");
        assert!(p.remove(&id(5, 5)).is_none());
        p.insert(id(0, 1), 0x50, bytes(b"e"));
        let rest: Vec<(DescRef, u64)> = p.take_rest().map(|(d, (a, _))| (d, a)).collect();
        assert_eq!(rest, [(id(0, 1), 0x50), (id(0, 2), 0x40), (id(0, 9), 0x20)]);
        assert_eq!(p.take_rest().count(), 0);
        assert!(p.remove(&id(0, 2)).is_none());
    }
}
