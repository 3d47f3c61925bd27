//! One endpoint's local state: its global memory and its events, plus the argument checks
//! every primitive makes before anything moves (the same errors as the shm transport).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::transport::{CmpOp, EventId, NodeSet, TransportError, Wait};

/// This node's global memory. Data and variables share one lock: a write of an
/// Xfer-And-Signal and a Compare-And-Write's compare-then-write are each one critical
/// section, which gives variables their atomicity without per-word atomics.
pub struct Memory {
    bytes: RwLock<Vec<u8>>,
}

impl Memory {
    pub fn new(size: usize) -> Memory {
        Memory {
            bytes: RwLock::new(vec![0; size]),
        }
    }

    pub fn write(&self, offset: usize, data: &[u8]) {
        let mut m = self.bytes.write().unwrap_or_else(|p| p.into_inner());
        m[offset..offset + data.len()].copy_from_slice(data);
    }

    /// Reads `len` bytes from `input` straight into `offset..offset + len` (the caller
    /// checked the range): an Xfer-And-Signal's payload goes from the socket into global
    /// memory with no buffer between. The lock is taken per piece the socket hands over,
    /// so local reads and other links' writes interleave with a large transfer. A stream
    /// that ends early leaves the range partly written: the link is then lost and the
    /// endpoint broken (receivers read data only after its event, which never comes).
    pub fn fill_from(
        &self,
        offset: usize,
        len: usize,
        input: &mut impl std::io::Read,
    ) -> std::io::Result<()> {
        let mut done = 0;
        while done < len {
            let mut m = self.bytes.write().unwrap_or_else(|p| p.into_inner());
            match input.read(&mut m[offset + done..offset + len]) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        let m = self.bytes.read().unwrap_or_else(|p| p.into_inner());
        buf.copy_from_slice(&m[offset..offset + buf.len()]);
    }

    /// Lends `offset..offset + len` (the caller checked the range) to `f`.
    pub fn with(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        let m = self.bytes.read().unwrap_or_else(|p| p.into_inner());
        f(&m[offset..offset + len]);
    }

    pub fn load(&self, var: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(var, &mut b);
        u64::from_ne_bytes(b)
    }

    pub fn store(&self, var: usize, value: u64) {
        self.write(var, &value.to_ne_bytes());
    }

    /// `global[var] op value`; if it holds and `write` is given, store it in the same step.
    pub fn compare_and_write(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        write: Option<(usize, u64)>,
    ) -> bool {
        let mut m = self.bytes.write().unwrap_or_else(|p| p.into_inner());
        let cur = u64::from_ne_bytes(m[var..var + 8].try_into().unwrap());
        let holds = op.holds(cur, value);
        if let (true, Some((w, v))) = (holds, write) {
            m[w..w + 8].copy_from_slice(&v.to_ne_bytes());
        }
        holds
    }
}

/// Counting events with spin-then-block waits. A signal increments a counter; a successful
/// test decrements it. Sleepers wait on one condition variable, woken only when someone
/// sleeps (`sleepers`), so a signal with nobody waiting costs one atomic add.
pub struct Events {
    counts: Vec<AtomicU32>,
    sleepers: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Most `Wait::BlockSpinning` polls before it sleeps: the runtime's spin policy
/// ([`crate::futex::spin_budget`], 0 when the cores are oversubscribed), capped. Polling
/// pays when the link reader has a core of its own (a cluster node); when it does not,
/// a poller takes the core the reader needs to apply the very frame polled for (polls yield
/// as every poll of the runtime does, `futex::poll_until`): two test
/// hosts sharing this machine's 2 cores ran a slice across hosts in 336 us polling 50 us
/// without yielding, 523 us polling 300 us, and 259-272 us polling 5 us
/// (docs/multi-host.md).
const SPIN_MAX: Duration = Duration::from_micros(50);

impl Events {
    pub fn new(n: u32) -> Events {
        Events {
            counts: (0..n).map(|_| AtomicU32::new(0)).collect(),
            sleepers: AtomicU32::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    pub fn signal(&self, e: EventId) {
        self.counts[e.0 as usize].fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake_all();
        }
    }

    /// Wakes every sleeper (a signal, or the link broke and they must look).
    pub fn wake_all(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
    }

    fn try_consume(&self, e: EventId) -> bool {
        self.counts[e.0 as usize]
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
            .is_ok()
    }

    /// Test-Event. `broken` reports a failed fabric: a wait that cannot be satisfied by a
    /// pending signal ends with that error instead of sleeping forever.
    pub fn test(
        &self,
        e: EventId,
        wait: Wait,
        broken: &dyn Fn() -> Option<String>,
    ) -> Result<bool, TransportError> {
        if self.try_consume(e) {
            return Ok(true);
        }
        let deadline = match wait {
            Wait::Poll => return broken().map_or(Ok(false), |b| Err(TransportError::Io(b))),
            Wait::Timeout(d) => Some(Instant::now() + d),
            Wait::Block => None,
            Wait::BlockSpinning => {
                let budget = crate::futex::spin_budget().min(SPIN_MAX);
                if crate::futex::poll_until(budget, || self.try_consume(e)) {
                    return Ok(true);
                }
                None
            }
        };
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let r = self.sleep(e, deadline, broken);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn sleep(
        &self,
        e: EventId,
        deadline: Option<Instant>,
        broken: &dyn Fn() -> Option<String>,
    ) -> Result<bool, TransportError> {
        let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.try_consume(e) {
                return Ok(true);
            }
            if let Some(b) = broken() {
                return Err(TransportError::Io(b));
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Ok(false),
                },
                // Re-check now and then anyway: cheap insurance against a lost wake-up.
                None => Duration::from_secs(1),
            };
            g = self
                .wake
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The job's shape, and the checks every primitive makes before anything moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub nodes: u32,
    pub global_size: usize,
    pub events: u32,
}

impl Shape {
    pub fn check_range(&self, offset: usize, len: usize) -> Result<(), TransportError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.global_size => Ok(()),
            end => Err(TransportError::OutOfBounds {
                offset,
                end: end.unwrap_or(usize::MAX),
                size: self.global_size,
            }),
        }
    }

    pub fn check_var(&self, var: usize) -> Result<(), TransportError> {
        if var % 8 != 0 {
            return Err(TransportError::Misaligned(var));
        }
        self.check_range(var, 8)
    }

    pub fn check_event(&self, e: EventId) -> Result<(), TransportError> {
        if e.0 >= self.events {
            return Err(TransportError::NoSuchEvent(e.0));
        }
        Ok(())
    }

    pub fn check_set(&self, dest: &NodeSet) -> Result<(), TransportError> {
        if dest.is_empty() {
            return Err(TransportError::EmptyNodeSet);
        }
        match dest.iter().find(|&n| n >= self.nodes) {
            Some(node) => Err(TransportError::NoSuchNode {
                node,
                nodes: self.nodes,
            }),
            None => Ok(()),
        }
    }
}
