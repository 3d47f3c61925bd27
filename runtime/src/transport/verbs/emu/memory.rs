//! The emulation's memory regions (64-bit atomic words) and completion queues.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::super::provider::{Completion, CompletionQueue, MemoryRegion, VerbsError};
use super::lock;

/// A registered region: 64-bit words, so remote atomics are real atomics.
pub(super) struct EmuRegion {
    pub(super) device: u32,
    pub(super) words: Box<[AtomicU64]>,
    pub(super) len: usize,
    pub(super) addr: u64,
    pub(super) lkey: u32,
    pub(super) rkey: u32,
}

impl EmuRegion {
    /// The region offset of `len` bytes at remote address `addr`, if inside the region.
    pub(super) fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(self.addr)?).ok()?;
        (off.checked_add(len)? <= self.len).then_some(off)
    }
}

impl MemoryRegion for EmuRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn addr(&self) -> u64 {
        self.addr
    }

    fn lkey(&self) -> u32 {
        self.lkey
    }

    fn rkey(&self) -> u32 {
        self.rkey
    }

    fn read(&self, offset: usize, buf: &mut [u8]) {
        assert!(offset + buf.len() <= self.len, "read outside a region");
        let mut pos = 0;
        while pos < buf.len() {
            let at = offset + pos;
            let (w, b) = (at / 8, at % 8);
            let n = (8 - b).min(buf.len() - pos);
            let bytes = self.words[w].load(Ordering::Acquire).to_ne_bytes();
            buf[pos..pos + n].copy_from_slice(&bytes[b..b + n]);
            pos += n;
        }
    }

    fn write(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len, "write outside a region");
        let mut pos = 0;
        while pos < data.len() {
            let at = offset + pos;
            let (w, b) = (at / 8, at % 8);
            let n = (8 - b).min(data.len() - pos);
            let part = &data[pos..pos + n];
            if n == 8 {
                let v = u64::from_ne_bytes(part.try_into().expect("8 bytes"));
                self.words[w].store(v, Ordering::Release);
            } else {
                // A partial word: merge, never clobbering the word's other bytes.
                let _ = self.words[w].fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    let mut bytes = old.to_ne_bytes();
                    bytes[b..b + n].copy_from_slice(part);
                    Some(u64::from_ne_bytes(bytes))
                });
            }
            pos += n;
        }
    }

    fn load_u64(&self, offset: usize) -> u64 {
        assert!(offset % 8 == 0, "unaligned word");
        self.words[offset / 8].load(Ordering::Acquire)
    }

    fn store_u64(&self, offset: usize, value: u64) {
        assert!(offset % 8 == 0, "unaligned word");
        self.words[offset / 8].store(value, Ordering::Release);
    }
}

#[derive(Default)]
pub(super) struct CqState {
    entries: VecDeque<Completion>,
    overrun: bool,
}

pub(super) struct EmuCq {
    pub(super) depth: usize,
    pub(super) state: Mutex<CqState>,
    pub(super) ready: Condvar,
}

impl EmuCq {
    pub(super) fn push(&self, c: Completion) {
        let mut s = lock(&self.state);
        if s.entries.len() >= self.depth {
            s.overrun = true;
        } else {
            s.entries.push_back(c);
        }
        self.ready.notify_all();
    }
}

impl CompletionQueue for EmuCq {
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError> {
        let mut s = lock(&self.state);
        if s.overrun {
            return Err(VerbsError::Call {
                verb: "ibv_poll_cq",
                reason: "completion queue overrun".into(),
            });
        }
        let n = max.min(s.entries.len());
        out.extend(s.entries.drain(..n));
        Ok(n)
    }

    fn wait(&self, timeout: Duration) -> Result<bool, VerbsError> {
        let s = lock(&self.state);
        if !s.entries.is_empty() || s.overrun {
            return Ok(true);
        }
        let (s, _) = self
            .ready
            .wait_timeout(s, timeout)
            .unwrap_or_else(|p| p.into_inner());
        Ok(!s.entries.is_empty() || s.overrun)
    }
}
