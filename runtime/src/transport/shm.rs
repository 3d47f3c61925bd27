//! The shared-memory transport: every node of the job on one host.
//!
//! The whole fabric is one memfd segment ([`ShmRegion`]) that every node manager maps:
//!
//! ```text
//! offset 0      header (magic, version, nodes, global_size, events, total length)
//! offset 64     fabric lock: a futex-based mutex word, alone in its cache line
//! offset 128    node 0 global memory, node 1 global memory, ...   (stride: global_size
//!               rounded up to 64 bytes, so every node's memory is 64-byte aligned)
//! then          node 0 event 0, node 0 event 1, ..., node 1 event 0, ...
//!               (one AtomicU32 counter per 64-byte cache line, used as a futex word)
//! ```
//!
//! Nothing is created in the filesystem; other processes get the segment by inheriting
//! the descriptor ([`ShmFabric::inheritable_fd`]) and calling [`ShmFabric::attach`].
//!
//! Memory model. A node's global memory holds two kinds of things, and each must only be
//! accessed through its own primitive:
//! - *data* (bytes), written by Xfer-And-Signal and read by `read_local`. The copy is a
//!   plain byte copy; it is published to the receiver by the event signal (Release
//!   increment) and Test-Event (Acquire decrement), so a receiver must only read data
//!   after it consumed the corresponding event. Concurrent xfers to overlapping ranges
//!   without such ordering are a protocol error (the bytes may interleave).
//! - *variables* (8-byte aligned `u64`), accessed only atomically: Compare-And-Write,
//!   `load_var`, `store_var`. Never xfer over a variable: the byte copy could tear it.
//!
//! Atomicity of Xfer-And-Signal here means all-or-none *failure*: every check (bounds,
//! node ids, events, empty set) happens before the first byte moves, and once the checks
//! pass nothing can fail. The copies deliberately do not take the fabric lock: that would
//! serialise all data movement on the host behind every Compare-And-Write, and no
//! primitive could observe the difference (data is only read after its event).
//!
//! Limitation: the fabric lock is not robust. A process killed inside Compare-And-Write
//! (a few loads and stores) leaves it held; the Machine Manager treats the death of a
//! node manager as the death of the job anyway.

use std::fmt;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::{CmpOp, EventId, NodeId, NodeSet, Transport, TransportError, Wait};
use crate::futex;
use crate::shm_region::ShmRegion;

const MAGIC: u64 = u64::from_le_bytes(*b"STROBEFB");
const VERSION: u32 = 1;
const CACHE_LINE: usize = 64;
const LOCK_OFFSET: usize = 64;
const GLOBALS_OFFSET: usize = 128;

/// The segment header, written once by the creator before the descriptor is shared.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Header {
    magic: u64,
    version: u32,
    nodes: u32,
    global_size: u64,
    events: u32,
    _pad: u32,
    total_len: u64,
}

const _: () = assert!(size_of::<Header>() <= LOCK_OFFSET);

/// Byte offsets derived from the header.
#[derive(Clone, Copy, Debug)]
struct Layout {
    nodes: u32,
    global_size: usize,
    events: u32,
    stride: usize,
    events_offset: usize,
    total_len: usize,
}

impl Layout {
    fn new(nodes: u32, global_size: usize, events: u32) -> Result<Layout, TransportError> {
        let too_big = || TransportError::Io("fabric size overflows usize".into());
        if nodes == 0 {
            return Err(TransportError::Io(
                "a fabric needs at least one node".into(),
            ));
        }
        let stride = global_size
            .checked_next_multiple_of(CACHE_LINE)
            .ok_or_else(too_big)?;
        let events_offset = stride
            .checked_mul(nodes as usize)
            .and_then(|g| g.checked_add(GLOBALS_OFFSET))
            .ok_or_else(too_big)?;
        let total_len = (nodes as usize)
            .checked_mul(events as usize)
            .and_then(|e| e.checked_mul(CACHE_LINE))
            .and_then(|e| e.checked_add(events_offset))
            .ok_or_else(too_big)?;
        Ok(Layout {
            nodes,
            global_size,
            events,
            stride,
            events_offset,
            total_len,
        })
    }
}

struct Inner {
    region: ShmRegion,
    layout: Layout,
}

/// One host's fabric: the shared segment all node endpoints live in. Cheap to clone
/// (an `Arc`); endpoints keep the mapping alive on their own.
#[derive(Clone)]
pub struct ShmFabric {
    inner: Arc<Inner>,
}

impl fmt::Debug for ShmFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmFabric")
            .field("fd", &self.inner.region.fd())
            .field("layout", &self.inner.layout)
            .finish()
    }
}

fn io_err(e: std::io::Error) -> TransportError {
    TransportError::Io(e.to_string())
}

impl ShmFabric {
    /// Creates a fabric of `nodes` nodes, each with `global_size` bytes of zeroed global
    /// memory and `events` events with no pending signal.
    pub fn create(
        nodes: u32,
        global_size: usize,
        events: u32,
    ) -> Result<ShmFabric, TransportError> {
        let layout = Layout::new(nodes, global_size, events)?;
        let region = ShmRegion::create("strobe-fabric", layout.total_len).map_err(io_err)?;
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            nodes,
            global_size: global_size as u64,
            events,
            _pad: 0,
            total_len: layout.total_len as u64,
        };
        // SAFETY: the mapping is page aligned and at least GLOBALS_OFFSET bytes long, so
        // the header fits and is aligned; nobody else can see the segment yet.
        unsafe { ptr::write(region.as_ptr().cast::<Header>(), header) };
        // The rest (lock, memory, events) is already zero: unlocked, zeroed, unsignalled.
        Ok(ShmFabric {
            inner: Arc::new(Inner { region, layout }),
        })
    }

    /// Maps a fabric created by another process from its (inherited) descriptor, taking
    /// ownership of `fd`. Checks the header, so a wrong descriptor is refused.
    pub fn attach(fd: OwnedFd) -> Result<ShmFabric, TransportError> {
        let raw = fd.as_raw_fd();
        // Dropping `region` on any error path below closes the descriptor.
        let region = ShmRegion::from_fd_whole(fd).map_err(io_err)?;
        let len = region.len();
        if len < GLOBALS_OFFSET {
            return Err(TransportError::Io(format!(
                "descriptor {raw} is too small ({len} bytes) to be a fabric"
            )));
        }
        // SAFETY: the mapping is page aligned and at least GLOBALS_OFFSET bytes long; the
        // creator wrote the header before sharing the descriptor and never changes it.
        let h = unsafe { ptr::read(region.as_ptr().cast::<Header>()) };
        if h.magic != MAGIC || h.version != VERSION {
            return Err(TransportError::Io(format!(
                "descriptor {raw} is not a strobe fabric (version {VERSION})"
            )));
        }
        let global_size = usize::try_from(h.global_size)
            .map_err(|_| TransportError::Io("global size overflows usize".into()))?;
        let layout = Layout::new(h.nodes, global_size, h.events)?;
        if layout.total_len as u64 != h.total_len || layout.total_len > len {
            return Err(TransportError::Io(format!(
                "fabric header describes {} bytes, segment has {len}",
                layout.total_len
            )));
        }
        Ok(ShmFabric {
            inner: Arc::new(Inner { region, layout }),
        })
    }

    /// The endpoint of `node`. Cheap; any number of endpoints (also of the same node) may
    /// be used from any threads at once.
    ///
    /// # Panics
    /// If `node >= self.nodes()`: node ids come from the job layout, a wrong one is a bug.
    pub fn endpoint(&self, node: NodeId) -> ShmEndpoint {
        assert!(
            node < self.inner.layout.nodes,
            "node {node} does not exist (the fabric has {} nodes)",
            self.inner.layout.nodes
        );
        ShmEndpoint {
            inner: Arc::clone(&self.inner),
            node,
        }
    }

    /// The segment's descriptor (close-on-exec; owned by the fabric).
    pub fn fd(&self) -> RawFd {
        self.inner.region.fd()
    }

    /// Clears close-on-exec on the descriptor so a spawned node manager inherits it, and
    /// returns it (pass the number to the child, which calls [`attach`](Self::attach)).
    pub fn inheritable_fd(&self) -> Result<RawFd, TransportError> {
        self.inner.region.inheritable_fd().map_err(io_err)
    }

    /// Total size of the segment in bytes.
    pub fn len(&self) -> usize {
        self.inner.layout.total_len
    }

    /// Always false (a fabric always has a header); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn nodes(&self) -> u32 {
        self.inner.layout.nodes
    }

    pub fn global_size(&self) -> usize {
        self.inner.layout.global_size
    }

    pub fn events(&self) -> u32 {
        self.inner.layout.events
    }
}

impl Inner {
    fn base(&self) -> *mut u8 {
        self.region.as_ptr()
    }

    fn lock_word(&self) -> &AtomicU32 {
        // SAFETY: LOCK_OFFSET is inside the mapping and 4-byte aligned (the mapping is
        // page aligned); AtomicU32 has the layout of u32; the reference cannot outlive
        // `self`, which owns the mapping; all accesses to the word are atomic.
        unsafe { &*self.base().add(LOCK_OFFSET).cast::<AtomicU32>() }
    }

    /// Start of `node`'s global memory. Callers validated `node`.
    fn global(&self, node: NodeId) -> *mut u8 {
        debug_assert!(node < self.layout.nodes);
        // SAFETY: node < nodes, so the offset stays inside the mapping (Layout::new
        // checked the total for overflow).
        unsafe {
            self.base()
                .add(GLOBALS_OFFSET + node as usize * self.layout.stride)
        }
    }

    /// The 64-bit variable at `var` on `node`. Callers validated node, bounds, alignment.
    fn var(&self, node: NodeId, var: usize) -> &AtomicU64 {
        debug_assert!(var & 7 == 0 && var + 8 <= self.layout.global_size);
        // SAFETY: `var + 8 <= global_size`, so the variable lies in `node`'s global
        // memory; node memory is 64-byte aligned and `var` is a multiple of 8, so the
        // address is 8-aligned; AtomicU64 has u64's layout; variables are only accessed
        // atomically (module docs); the reference is bounded by `&self`.
        unsafe { &*self.global(node).add(var).cast::<AtomicU64>() }
    }

    /// The counter of `event` on `node`. Callers validated both.
    fn event(&self, node: NodeId, event: EventId) -> &AtomicU32 {
        debug_assert!(node < self.layout.nodes && event.0 < self.layout.events);
        let index = node as usize * self.layout.events as usize + event.0 as usize;
        // SAFETY: index < nodes * events, so the cache line is inside the mapping
        // (Layout::new); events_offset is a multiple of 64, so the word is aligned;
        // event words are only accessed atomically; the reference is bounded by `&self`.
        unsafe {
            &*self
                .base()
                .add(self.layout.events_offset + index * CACHE_LINE)
                .cast::<AtomicU32>()
        }
    }

    fn check_node(&self, node: NodeId) -> Result<(), TransportError> {
        if node < self.layout.nodes {
            Ok(())
        } else {
            Err(TransportError::NoSuchNode {
                node,
                nodes: self.layout.nodes,
            })
        }
    }

    fn check_set(&self, dest: &NodeSet) -> Result<(), TransportError> {
        if dest.is_empty() {
            return Err(TransportError::EmptyNodeSet);
        }
        dest.iter().try_for_each(|n| self.check_node(n))
    }

    fn check_event(&self, event: EventId) -> Result<(), TransportError> {
        if event.0 < self.layout.events {
            Ok(())
        } else {
            Err(TransportError::NoSuchEvent(event.0))
        }
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<(), TransportError> {
        let size = self.layout.global_size;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            end => Err(TransportError::OutOfBounds {
                offset,
                end: end.unwrap_or(usize::MAX),
                size,
            }),
        }
    }

    fn check_var(&self, var: usize) -> Result<(), TransportError> {
        if var & 7 != 0 {
            return Err(TransportError::Misaligned(var));
        }
        self.check_range(var, 8)
    }

    /// Takes the fabric lock (a futex mutex: 0 free, 1 held, 2 held with waiters).
    /// The uncontended path is one CAS.
    fn lock(&self) -> FabricGuard<'_> {
        let w = self.lock_word();
        if w.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Contended: mark "waiters present" so the holder knows to wake someone, and
            // sleep while it stays marked. Whoever swaps 0 -> 2 owns the lock (and may
            // wake one sleeper needlessly on unlock, which is harmless).
            while w.swap(2, Ordering::Acquire) != 0 {
                futex::wait(w, 2, None);
            }
        }
        FabricGuard { word: w }
    }

    fn signal(&self, node: NodeId, event: EventId) {
        let e = self.event(node, event);
        // Release: the data copied before the signal is visible to whoever consumes it.
        e.fetch_add(1, Ordering::Release);
        // One signal can satisfy one waiter; a waiter that loses the race to a poller
        // simply sleeps again, so waking one per signal never loses a wake-up.
        futex::wake(e, 1);
    }

    /// Consumes one signal if there is one.
    fn try_consume(&self, e: &AtomicU32) -> bool {
        let mut v = e.load(Ordering::Relaxed);
        while v > 0 {
            // Acquire pairs with the Release increment in `signal`.
            match e.compare_exchange_weak(v, v - 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
        false
    }

    /// Polls for a signal for a few microseconds before a blocking wait sleeps. Yields now
    /// and then: with more node threads than cores, the signaller may need our core.
    fn spin_consume(&self, e: &AtomicU32) -> bool {
        const SPINS: u32 = 2000;
        for i in 0..SPINS {
            if self.try_consume(e) {
                return true;
            }
            if i % 32 == 31 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        false
    }
}

/// Holds the fabric lock; releases it on drop.
struct FabricGuard<'a> {
    word: &'a AtomicU32,
}

impl Drop for FabricGuard<'_> {
    fn drop(&mut self) {
        if self.word.swap(0, Ordering::Release) == 2 {
            futex::wake(self.word, 1);
        }
    }
}

/// One node's endpoint onto a [`ShmFabric`]. Cheap to clone; usable from many threads.
#[derive(Clone)]
pub struct ShmEndpoint {
    inner: Arc<Inner>,
    node: NodeId,
}

impl fmt::Debug for ShmEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmEndpoint")
            .field("node", &self.node)
            .field("nodes", &self.inner.layout.nodes)
            .finish()
    }
}

impl Transport for ShmEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    fn nodes(&self) -> u32 {
        self.inner.layout.nodes
    }

    fn global_size(&self) -> usize {
        self.inner.layout.global_size
    }

    fn events(&self) -> u32 {
        self.inner.layout.events
    }

    fn xfer_and_signal(
        &self,
        data: &[u8],
        dest: &NodeSet,
        offset: usize,
        local: Option<EventId>,
        remote: Option<EventId>,
    ) -> Result<(), TransportError> {
        let inner = &*self.inner;
        // All or none: every check before the first byte moves; nothing below can fail.
        inner.check_set(dest)?;
        inner.check_range(offset, data.len())?;
        if let Some(e) = local {
            inner.check_event(e)?;
        }
        if let Some(e) = remote {
            inner.check_event(e)?;
        }
        for node in dest.iter() {
            // SAFETY: the range offset..offset+len lies in `node`'s global memory (checked
            // above), which is inside the mapping; `data` is a separate Rust slice, so
            // the ranges cannot overlap. Concurrent readers of these bytes are excluded
            // by the protocol (they read after consuming the event; module docs).
            unsafe {
                ptr::copy_nonoverlapping(data.as_ptr(), inner.global(node).add(offset), data.len());
            }
        }
        if let Some(e) = remote {
            for node in dest.iter() {
                inner.signal(node, e);
            }
        }
        if let Some(e) = local {
            inner.signal(self.node, e);
        }
        Ok(())
    }

    fn test_event(&self, event: EventId, wait: Wait) -> Result<bool, TransportError> {
        let inner = &*self.inner;
        inner.check_event(event)?;
        let e = inner.event(self.node, event);
        let deadline = match wait {
            Wait::Poll => return Ok(inner.try_consume(e)),
            Wait::Block => None,
            Wait::BlockSpinning => {
                if inner.spin_consume(e) {
                    return Ok(true);
                }
                None
            }
            // Too far in the future to represent: the same as blocking.
            Wait::Timeout(d) => Instant::now().checked_add(d),
        };
        loop {
            // Always try to consume before checking the deadline: a signal that arrives
            // together with the timeout is taken rather than left behind.
            if inner.try_consume(e) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            // Sleeps only while the counter is 0; a signal between our load and the
            // sleep changes the word, so the kernel refuses to sleep (no lost wake-up).
            futex::wait_until(e, 0, deadline);
        }
    }

    fn compare_and_write(
        &self,
        var: usize,
        op: CmpOp,
        value: u64,
        dest: &NodeSet,
        write: Option<(usize, u64)>,
    ) -> Result<bool, TransportError> {
        let inner = &*self.inner;
        inner.check_var(var)?;
        if let Some((wvar, _)) = write {
            inner.check_var(wvar)?;
        }
        inner.check_set(dest)?;
        // The lock makes compare-then-write one step with respect to every other
        // Compare-And-Write on the host (in any process); SeqCst inside it additionally
        // orders the variables against unlocked load_var/store_var.
        let _guard = inner.lock();
        let holds = dest
            .iter()
            .all(|n| op.holds(inner.var(n, var).load(Ordering::SeqCst), value));
        if holds {
            if let Some((wvar, wval)) = write {
                for n in dest.iter() {
                    inner.var(n, wvar).store(wval, Ordering::SeqCst);
                }
            }
        }
        Ok(holds)
    }

    fn with_local(
        &self,
        offset: usize,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), TransportError> {
        let inner = &*self.inner;
        inner.check_range(offset, len)?;
        // SAFETY: the range lies in this node's global memory (checked above), which stays
        // mapped while `self` lives; writers of these bytes are ordered before this call by
        // the event protocol (module docs), and no node writes them again before this node
        // signals that it is done with them, so nothing changes under the borrow.
        let bytes = unsafe { std::slice::from_raw_parts(inner.global(self.node).add(offset), len) };
        f(bytes);
        Ok(())
    }

    fn read_local(&self, offset: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        let inner = &*self.inner;
        inner.check_range(offset, buf.len())?;
        // SAFETY: the range lies in this node's global memory (checked above); `buf` is a
        // separate Rust slice, so no overlap; writers of these bytes are ordered before
        // this read by the event protocol (module docs).
        unsafe {
            ptr::copy_nonoverlapping(
                inner.global(self.node).add(offset),
                buf.as_mut_ptr(),
                buf.len(),
            );
        }
        Ok(())
    }

    fn load_var(&self, var: usize) -> Result<u64, TransportError> {
        self.inner.check_var(var)?;
        Ok(self.inner.var(self.node, var).load(Ordering::SeqCst))
    }

    fn store_var(&self, var: usize, value: u64) -> Result<(), TransportError> {
        // Not under the fabric lock: a local store is a single atomic write, and the
        // protocol never races it with a Compare-And-Write that targets the same word.
        self.inner.check_var(var)?;
        self.inner
            .var(self.node, var)
            .store(value, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned() {
        let l = Layout::new(3, 100, 5).unwrap();
        assert_eq!(l.stride, 128);
        assert_eq!(l.events_offset, 128 + 3 * 128);
        assert_eq!(l.total_len, l.events_offset + 15 * 64);
        assert_eq!(Layout::new(2, 0, 0).unwrap().total_len, GLOBALS_OFFSET);
        assert!(Layout::new(0, 64, 1).is_err());
        assert!(Layout::new(u32::MAX, usize::MAX - 10, 1).is_err());
    }

    #[test]
    fn variables_and_events_are_aligned() {
        let f = ShmFabric::create(3, 100, 4).unwrap();
        for n in 0..3 {
            assert_eq!(f.inner.global(n) as usize % CACHE_LINE, 0);
            for e in 0..4 {
                assert_eq!(
                    f.inner.event(n, EventId(e)).as_ptr() as usize % CACHE_LINE,
                    0
                );
            }
        }
        // The last event line ends exactly at the end of the segment.
        let last = f.inner.event(2, EventId(3)).as_ptr() as usize;
        assert_eq!(last + CACHE_LINE - f.inner.base() as usize, f.len());
    }

    #[test]
    fn attach_sees_the_same_memory() {
        let f = ShmFabric::create(2, 256, 2).unwrap();
        // SAFETY: `f` owns the descriptor and outlives the borrow.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(f.fd()) };
        let fd = fd.try_clone_to_owned().unwrap();
        let g = ShmFabric::attach(fd).unwrap();
        assert_eq!((g.nodes(), g.global_size(), g.events()), (2, 256, 2));
        f.endpoint(0)
            .xfer_and_signal(b"hello", &NodeSet::single(1), 8, None, Some(EventId(1)))
            .unwrap();
        let e = g.endpoint(1);
        assert!(e.test_event(EventId(1), Wait::Poll).unwrap());
        let mut buf = [0; 5];
        e.read_local(8, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
    }

    #[test]
    fn attach_refuses_foreign_descriptor() {
        let r = ShmRegion::create("not-a-fabric", 4096).unwrap();
        // SAFETY: `r` owns the descriptor and outlives the borrow.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(r.fd()) };
        assert!(ShmFabric::attach(fd.try_clone_to_owned().unwrap()).is_err());
    }

    #[test]
    fn lock_excludes() {
        let f = ShmFabric::create(1, 64, 0).unwrap();
        let counter = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..2000 {
                        let _g = f.inner.lock();
                        // A non-atomic read-modify-write: only correct under the lock.
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), 8000);
        assert_eq!(f.inner.lock_word().load(Ordering::Relaxed), 0);
    }

    #[test]
    #[should_panic(expected = "does not exist")]
    fn endpoint_of_missing_node_panics() {
        ShmFabric::create(2, 64, 1).unwrap().endpoint(2);
    }
}
