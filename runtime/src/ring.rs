//! A single-producer single-consumer ring of fixed-size plain-data records in shared memory.
//!
//! A rank pushes descriptors that its node manager pops, and the node manager pushes
//! completions that the rank pops. The two parties are different OS processes that map the
//! same bytes at different addresses, so the ring holds no pointers: a header with two
//! monotonic `u64` counters (`head`, advanced by the producer; `tail`, advanced by the
//! consumer) followed by `capacity` slots. A counter is turned into a slot index by masking
//! with `capacity - 1`, which is why the capacity must be a power of two. Because the
//! counters are 64-bit they never wrap in practice, and `head - tail` is always the fill level.
//!
//! Memory ordering: the producer writes a slot, then publishes it by storing `head` with
//! `Release`; the consumer loads `head` with `Acquire` before reading the slot, then frees it
//! by storing `tail` with `Release`; the producer loads `tail` with `Acquire` before reusing a
//! slot. Atomics on a `MAP_SHARED` mapping are coherent across processes exactly as across
//! threads, so the same argument covers both.
//!
//! Layout (all offsets from the 64-byte aligned base):
//!
//! | offset | contents                                                    |
//! |--------|-------------------------------------------------------------|
//! | 0      | `head` (own cache line, written only by the producer)       |
//! | 64     | `tail` (own cache line, written only by the consumer)       |
//! | 128    | magic, capacity, record size/alignment (written by `init`)  |
//! | 192    | `capacity` slots of `T`                                     |

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Written last by [`Ring::init`], checked by [`Ring::attach`]: catches attaching to memory
/// that was never initialised (or was initialised as something else).
const MAGIC: u64 = u64::from_le_bytes(*b"strbRNG1");

/// One cache line, so the producer's and the consumer's counters never share a line (false
/// sharing would make every push and pop bounce the line between the two cores).
#[repr(C, align(64))]
struct CacheLine<T>(T);

/// Immutable-after-init description of the ring, checked on attach.
#[repr(C)]
struct Meta {
    magic: AtomicU64,
    capacity: AtomicU64,
    elem_size: AtomicU64,
    elem_align: AtomicU64,
}

#[repr(C)]
struct Header {
    head: CacheLine<AtomicU64>,
    tail: CacheLine<AtomicU64>,
    meta: CacheLine<Meta>,
}

/// Size of the header; slots start here. A multiple of 64, so any `T` with alignment up to
/// 64 is correctly aligned in its slots.
const HEADER_BYTES: usize = size_of::<Header>();

const _: () = assert!(HEADER_BYTES == 192 && HEADER_BYTES & 63 == 0);

/// Bytes needed for a ring of `capacity` records of `T` (capacity a power of two).
///
/// # Panics
/// If `capacity` is not a power of two, if `T` needs more than 64-byte alignment, or if the
/// size overflows `usize` (at compile time when used in a const context).
pub const fn ring_bytes<T>(capacity: usize) -> usize {
    assert!(
        capacity.is_power_of_two(),
        "ring capacity must be a power of two"
    );
    assert!(
        align_of::<T>() <= 64,
        "ring records may need at most 64-byte alignment"
    );
    let Some(slots) = capacity.checked_mul(size_of::<T>()) else {
        panic!("ring size overflows usize");
    };
    let Some(total) = slots.checked_add(HEADER_BYTES) else {
        panic!("ring size overflows usize");
    };
    total
}

/// A handle on one end (or, in tests, both ends) of a shared-memory SPSC ring.
///
/// The handle itself is process-local (it holds this process's address of the region); the
/// ring state lives entirely in the region. Which side a handle plays is not recorded: the
/// caller must only `push` from the single producer and only `pop`/`drain_into` from the
/// single consumer.
pub struct Ring<T: Copy> {
    header: NonNull<Header>,
    slots: NonNull<T>,
    capacity: usize,
    mask: u64,
    /// Producer's last seen `tail`: lets `push` skip touching the consumer's cache line while
    /// it already knows there is room.
    cached_tail: Cell<u64>,
    /// Consumer's last seen `head`: lets `pop` skip touching the producer's cache line while
    /// it already knows there are records.
    cached_head: Cell<u64>,
    _records: PhantomData<T>,
}

// SAFETY: a `Ring` is only a pointer into shared memory plus side-local caches. Moving it to
// another thread is sound provided the caller keeps the discipline that `init`/`attach`
// already demand: exactly one producer handle and one consumer handle use the region, and
// the region outlives them. `T: Send` is required because records move between the parties.
// `Ring` is deliberately not `Sync` (the `Cell` caches would race), so a single handle
// cannot be shared between the producer and consumer threads.
unsafe impl<T: Copy + Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Initialise a fresh ring in `base` and return a handle to it.
    ///
    /// Writes the header (head and tail zeroed, capacity and layout recorded, magic last) so
    /// that another process can [`attach`](Ring::attach) to the same bytes.
    ///
    /// # Safety
    /// `base` points to `ring_bytes::<T>(capacity)` writable bytes, 64-byte aligned, valid as
    /// long as any `Ring` on it is used, shared only with the one other party (which must not
    /// touch the ring until `init` returns). Both parties use the same `T`, and the producer
    /// only ever stores valid `T` values (the consumer reads slots back as `T`).
    ///
    /// # Panics
    /// If `capacity` is not a power of two or `base` is null or misaligned.
    pub unsafe fn init(base: *mut u8, capacity: usize) -> Ring<T> {
        let bytes = ring_bytes::<T>(capacity);
        assert!(
            !base.is_null() && (base as usize) & 63 == 0,
            "ring base must be 64-byte aligned"
        );
        let header = base.cast::<Header>();
        let fresh = Header {
            head: CacheLine(AtomicU64::new(0)),
            tail: CacheLine(AtomicU64::new(0)),
            meta: CacheLine(Meta {
                magic: AtomicU64::new(0),
                capacity: AtomicU64::new(capacity as u64),
                elem_size: AtomicU64::new(size_of::<T>() as u64),
                elem_align: AtomicU64::new(align_of::<T>() as u64),
            }),
        };
        // SAFETY: the caller guarantees `base` is aligned and covers `bytes >= HEADER_BYTES`
        // writable bytes that nobody else is using yet.
        unsafe { header.write(fresh) };
        debug_assert!(bytes >= HEADER_BYTES);
        // SAFETY: just written; the magic is published with Release so an attacher that sees
        // it (Acquire) also sees the rest of the header.
        unsafe { (*header).meta.0.magic.store(MAGIC, Ordering::Release) };
        // SAFETY: same region, just initialised and validated.
        unsafe { Self::from_base(base, capacity) }
    }

    /// Attach to a ring that the other party initialised with [`init`](Ring::init).
    ///
    /// # Safety
    /// As for [`init`](Ring::init), with `ring_bytes::<T>(capacity)` bytes for the capacity
    /// stored in the header, and `init` has completed on these bytes (in any process).
    ///
    /// # Panics
    /// If the header is not an initialised ring of `T` (bad magic, capacity not a power of
    /// two, or different record size/alignment): that means the two parties disagree about
    /// the shared layout, which is a bug, not a runtime condition.
    pub unsafe fn attach(base: *mut u8) -> Ring<T> {
        assert!(
            !base.is_null() && (base as usize) & 63 == 0,
            "ring base must be 64-byte aligned"
        );
        // SAFETY: the caller guarantees an initialised, aligned header at `base`; we only
        // take a shared reference to atomics in it.
        let meta = unsafe { &(*base.cast::<Header>()).meta.0 };
        let magic = meta.magic.load(Ordering::Acquire);
        assert_eq!(magic, MAGIC, "ring header at {base:p} is not initialised");
        let capacity = meta.capacity.load(Ordering::Relaxed);
        assert!(
            capacity.is_power_of_two() && usize::try_from(capacity).is_ok(),
            "ring header has invalid capacity {capacity}"
        );
        let (size, align) = (
            meta.elem_size.load(Ordering::Relaxed),
            meta.elem_align.load(Ordering::Relaxed),
        );
        assert!(
            size == size_of::<T>() as u64 && align == align_of::<T>() as u64,
            "ring was initialised for {size}-byte records (align {align}), attaching as {}-byte (align {})",
            size_of::<T>(),
            align_of::<T>()
        );
        // SAFETY: header validated above; the caller guarantees the slot area.
        unsafe { Self::from_base(base, capacity as usize) }
    }

    /// # Safety
    /// `base` is a non-null, aligned, initialised ring region of `capacity` records of `T`.
    unsafe fn from_base(base: *mut u8, capacity: usize) -> Ring<T> {
        // SAFETY: `base` is non-null (checked by both callers); slots start HEADER_BYTES
        // further into the same region.
        let (header, slots) = unsafe {
            (
                NonNull::new_unchecked(base.cast::<Header>()),
                NonNull::new_unchecked(base.add(HEADER_BYTES).cast::<T>()),
            )
        };
        // SAFETY: header initialised per the caller's contract.
        let h = unsafe { header.as_ref() };
        Ring {
            header,
            slots,
            capacity,
            mask: capacity as u64 - 1,
            cached_tail: Cell::new(h.tail.0.load(Ordering::Acquire)),
            cached_head: Cell::new(h.head.0.load(Ordering::Acquire)),
            _records: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: valid for the life of the handle per the init/attach contract.
        unsafe { self.header.as_ref() }
    }

    fn slot(&self, counter: u64) -> *mut T {
        // SAFETY: masking keeps the index below `capacity`, inside the slot area.
        unsafe { self.slots.as_ptr().add((counter & self.mask) as usize) }
    }

    /// Append `item`. Returns `Err(*item)` when the ring is full. Producer side only.
    pub fn push(&self, item: &T) -> Result<(), T> {
        self.push_with(item, |_| {})
    }

    /// [`Self::push`], calling `before_publish` with the item's position (its slot is
    /// `position % capacity`) once the slot is known to be free and before the item is
    /// published: what the producer writes there for that slot (a receive arena entry) is
    /// visible to the consumer with the item. Not called when the ring is full.
    pub fn push_with(&self, item: &T, before_publish: impl FnOnce(u64)) -> Result<(), T> {
        let h = self.header();
        // Only we write head, so Relaxed reads our own last store.
        let head = h.head.0.load(Ordering::Relaxed);
        if head.wrapping_sub(self.cached_tail.get()) >= self.capacity as u64 {
            // Looks full with the stale tail: refresh. Acquire pairs with the consumer's
            // Release store, so its reads of the slot we are about to reuse are finished.
            self.cached_tail.set(h.tail.0.load(Ordering::Acquire));
            if head.wrapping_sub(self.cached_tail.get()) >= self.capacity as u64 {
                return Err(*item);
            }
        }
        before_publish(head);
        // SAFETY: the slot is in bounds, and free: the consumer has moved past it (tail
        // acquired above) and will not read it until we publish the new head below.
        unsafe { self.slot(head).write(*item) };
        h.head.0.store(head.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// Remove the oldest record, or `None` if the ring is empty. Consumer side only.
    pub fn pop(&self) -> Option<T> {
        self.pop_with(|_, _| {})
    }

    /// [`Self::pop`], calling `f` with the record and its position before the slot is
    /// freed: the producer cannot reuse the slot (nor what it keeps for it beside the
    /// ring) until `f` has returned.
    pub fn pop_with(&self, f: impl FnOnce(&mut T, u64)) -> Option<T> {
        let h = self.header();
        let tail = h.tail.0.load(Ordering::Relaxed);
        if tail == self.cached_head.get() {
            // Acquire pairs with the producer's Release: the slot contents are visible.
            self.cached_head.set(h.head.0.load(Ordering::Acquire));
            if tail == self.cached_head.get() {
                return None;
            }
        }
        // SAFETY: the slot is in bounds and was published by the producer (head acquired),
        // which will not overwrite it until we store the new tail below. The producer stored
        // a valid `T` there (init/attach contract).
        let mut item = unsafe { self.slot(tail).read() };
        f(&mut item, tail);
        h.tail.0.store(tail.wrapping_add(1), Ordering::Release);
        Some(item)
    }

    /// Pop everything currently visible, in order, appending to `out`; returns the count.
    /// Consumer side only.
    ///
    /// Takes one snapshot of `head`, so a producer that keeps pushing cannot keep the caller
    /// here forever, and frees all the drained slots with a single `tail` store.
    pub fn drain_into(&self, out: &mut Vec<T>) -> usize {
        let h = self.header();
        let tail = h.tail.0.load(Ordering::Relaxed);
        let head = h.head.0.load(Ordering::Acquire);
        self.cached_head.set(head);
        // Clamp: a corrupted header (the other party is a separate, possibly buggy process)
        // must not make us read more than one ring's worth.
        let n = head.wrapping_sub(tail).min(self.capacity as u64) as usize;
        out.reserve(n);
        for i in 0..n as u64 {
            // SAFETY: as in `pop`: in bounds, published before the head we acquired, and
            // not reusable by the producer until the tail store below.
            out.push(unsafe { self.slot(tail.wrapping_add(i)).read() });
        }
        if n > 0 {
            h.tail
                .0
                .store(tail.wrapping_add(n as u64), Ordering::Release);
        }
        n
    }

    /// Number of records currently in the ring (a snapshot; exact only on a quiet ring).
    pub fn len(&self) -> usize {
        let h = self.header();
        // Load tail first: head only grows, so head read afterwards is >= any head that was
        // current when tail was read, and the difference cannot underflow.
        let tail = h.tail.0.load(Ordering::Acquire);
        let head = h.head.0.load(Ordering::Acquire);
        head.wrapping_sub(tail).min(self.capacity as u64) as usize
    }

    /// Whether the ring is currently empty (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maximum number of records the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl<T: Copy> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("base", &self.header)
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};

    /// A heap region for in-process tests, 64-byte aligned.
    struct Region {
        ptr: *mut u8,
        layout: Layout,
    }

    impl Region {
        fn new(bytes: usize) -> Region {
            let layout = Layout::from_size_align(bytes, 64).unwrap();
            // SAFETY: non-zero size (the header alone is 192 bytes).
            let ptr = unsafe { alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            Region { ptr, layout }
        }
    }

    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(C)]
    struct Rec {
        seq: u64,
        check: u64,
        pad: [u32; 3],
    }

    fn rec(seq: u64) -> Rec {
        Rec {
            seq,
            check: seq.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            pad: [seq as u32; 3],
        }
    }

    fn ring<T: Copy>(cap: usize) -> (Region, Ring<T>) {
        let region = Region::new(ring_bytes::<T>(cap));
        // SAFETY: region sized and aligned for this ring, used only by this test.
        let r = unsafe { Ring::init(region.ptr, cap) };
        (region, r)
    }

    #[test]
    fn layout() {
        assert_eq!(ring_bytes::<u64>(8), 192 + 64);
        assert_eq!(ring_bytes::<Rec>(4), 192 + 4 * size_of::<Rec>());
    }

    #[test]
    fn push_pop_in_order() {
        let (_region, r) = ring::<Rec>(8);
        assert!(r.is_empty());
        for i in 0..5 {
            r.push(&rec(i)).unwrap();
        }
        assert_eq!(r.len(), 5);
        for i in 0..5 {
            assert_eq!(r.pop(), Some(rec(i)));
        }
        assert_eq!(r.pop(), None);
        assert!(r.is_empty());
    }

    #[test]
    fn full_and_empty() {
        let (_region, r) = ring::<u32>(4);
        assert_eq!(r.capacity(), 4);
        assert_eq!(r.pop(), None);
        for i in 0..4 {
            r.push(&i).unwrap();
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.push(&99), Err(99));
        assert_eq!(r.pop(), Some(0));
        r.push(&4).unwrap();
        assert_eq!(r.push(&100), Err(100));
        assert_eq!(
            (1..5).map(|_| r.pop().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn wraparound_many_times() {
        let (_region, r) = ring::<u64>(4);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        // Uneven batch sizes so the ring is left at every fill level and offset.
        for round in 0..10_000u64 {
            for _ in 0..(round % 5) {
                if r.push(&next_in).is_ok() {
                    next_in += 1;
                }
            }
            for _ in 0..(round % 3 + 1) {
                if let Some(v) = r.pop() {
                    assert_eq!(v, next_out);
                    next_out += 1;
                }
            }
            assert_eq!(r.len() as u64, next_in - next_out);
        }
        assert!(next_out > 4 * 1000, "the ring wrapped many times");
    }

    #[test]
    fn drain_into_takes_everything_visible() {
        let (_region, r) = ring::<u32>(8);
        let mut out = vec![100];
        assert_eq!(r.drain_into(&mut out), 0);
        for i in 0..6 {
            r.push(&i).unwrap();
        }
        assert_eq!(r.pop(), Some(0));
        assert_eq!(r.drain_into(&mut out), 5);
        assert_eq!(out, [100, 1, 2, 3, 4, 5]);
        assert!(r.is_empty());
        // Drained slots are free again, across the wrap.
        for i in 6..14 {
            r.push(&i).unwrap();
        }
        out.clear();
        assert_eq!(r.drain_into(&mut out), 8);
        assert_eq!(out, (6..14).collect::<Vec<_>>());
    }

    #[test]
    fn attach_sees_same_ring() {
        let (region, producer) = ring::<Rec>(16);
        producer.push(&rec(7)).unwrap();
        // SAFETY: same region, initialised above.
        let consumer = unsafe { Ring::<Rec>::attach(region.ptr) };
        assert_eq!(consumer.capacity(), 16);
        assert_eq!(consumer.pop(), Some(rec(7)));
    }

    #[test]
    #[should_panic(expected = "not initialised")]
    fn attach_rejects_uninitialised() {
        let region = Region::new(ring_bytes::<u64>(4));
        // SAFETY: aligned, large enough; attach reads only the header and panics.
        let _ = unsafe { Ring::<u64>::attach(region.ptr) };
    }

    #[test]
    #[should_panic(expected = "records")]
    fn attach_rejects_other_record_type() {
        let (region, _r) = ring::<u64>(4);
        // SAFETY: aligned, initialised; attach validates and panics before using slots.
        let _ = unsafe { Ring::<u32>::attach(region.ptr) };
    }

    #[test]
    fn two_thread_stress() {
        const N: u64 = 1_000_000;
        let (region, producer) = ring::<Rec>(64);
        // SAFETY: same region, initialised; one producer and one consumer handle.
        let consumer = unsafe { Ring::<Rec>::attach(region.ptr) };
        let t = std::thread::spawn(move || {
            for i in 0..N {
                let mut item = rec(i);
                while let Err(back) = producer.push(&item) {
                    item = back;
                    std::hint::spin_loop();
                }
            }
        });
        let (mut next, mut batch) = (0u64, Vec::new());
        while next < N {
            // Mix both consumer paths.
            if next % 2 == 0 {
                if let Some(v) = consumer.pop() {
                    assert_eq!(v, rec(next));
                    next += 1;
                }
            } else {
                batch.clear();
                consumer.drain_into(&mut batch);
                for v in &batch {
                    assert_eq!(*v, rec(next));
                    next += 1;
                }
            }
            std::hint::spin_loop();
        }
        t.join().unwrap();
        assert_eq!(consumer.pop(), None);
        drop(region);
    }

    #[test]
    fn cross_process_fork() {
        const N: u64 = 100_000;
        const CAP: usize = 256;
        let bytes = ring_bytes::<Rec>(CAP);
        // SAFETY: anonymous shared mapping, no file; checked for MAP_FAILED below. mmap
        // returns page-aligned memory, so 64-byte alignment holds.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        // SAFETY: fresh mapping of the right size, shared only with the child forked below.
        let consumer = unsafe { Ring::<Rec>::init(base, CAP) };

        // SAFETY: fork in a test process; the child only attaches, pushes (no allocation,
        // no locks) and `_exit`s, so it never returns into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: the mapping is inherited at the same address and initialised.
            let producer = unsafe { Ring::<Rec>::attach(base) };
            for i in 0..N {
                while producer.push(&rec(i)).is_err() {
                    std::hint::spin_loop();
                }
            }
            // SAFETY: terminate the child without running the parent's atexit/test code.
            unsafe { libc::_exit(0) };
        }

        let (mut next, mut child_done) = (0u64, false);
        let mut status = 0;
        while next < N {
            match consumer.pop() {
                Some(v) => {
                    assert_eq!(v, rec(next), "record {next}");
                    next += 1;
                }
                None if child_done => panic!("child exited after only {next} records"),
                None => {
                    // SAFETY: non-blocking wait on our own child.
                    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                    child_done = r == pid;
                    std::thread::yield_now();
                }
            }
        }
        if !child_done {
            // SAFETY: blocking wait on our own child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(consumer.pop(), None);
        // SAFETY: unmapping the region we mapped; no handle is used afterwards.
        unsafe { libc::munmap(base.cast(), bytes) };
    }
}
