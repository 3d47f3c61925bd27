//! The papers' per-process monitoring (MMDS): for every rank, how its time splits between
//! computation (outside MPI calls) and communication (inside them), the distributions of
//! both (computation granularity, communication overhead), and per MPI primitive the
//! count, min, max, total latency and bytes, with latency and size histograms.
//!
//! Measured on the rank side by a guard around every MPI entry point ([`enter`]). Only the
//! **outermost** call is measured: a thread-local nesting depth makes inner guards free, so
//! the C ABI can wrap each C entry point in the same guard although it calls the Rust API
//! underneath (the C name is then the one recorded). The counters live in the job segment
//! ([`MmdsBlock`], one per rank), so a rank that crashes keeps the statistics it gathered
//! up to its last call; the launcher reads them when the job ends ([`snapshot`]). A call
//! costs two reads of `CLOCK_MONOTONIC` (vDSO, no system call) and a few plain stores:
//! each block has exactly one writer, its rank's application thread (the runtime is
//! `MPI_THREAD_FUNNELED`), so no atomic read-modify-write is needed.
//!
//! Timeline of a rank: the clock starts when `MPI_Init` is entered and stops when
//! `MPI_Finalize` returns (or at the rank's last call if it never finalizes). Every
//! interval in between is either computation (from one call's exit to the next call's
//! entry) or communication (a call's entry to its exit), so `compute + comm == wall`
//! unless an interval was lost or counted twice: the papers' accuracy check, which
//! `strobe stats` performs.
//!
//! Histograms have `2^k` buckets per power of two (`k` = 0..=3, the *resolution* the user
//! chooses): bucket 0 holds the value 0, then for each power `p` the range `[2^p, 2^(p+1))`
//! is cut into `2^k` equal parts.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::segment::JobSegment;

/// Largest resolution: buckets per power of two.
pub const MAX_RESOLUTION: u32 = 8;
/// Resolution `strobe record` uses unless told otherwise.
pub const DEFAULT_RESOLUTION: u32 = 4;
/// The environment variable that sets the resolution when no flag does.
pub const ENV_HISTOGRAM_RESOLUTION: &str = "STROBE_HISTOGRAM_RESOLUTION";
/// Buckets of one histogram at the largest resolution.
pub const BUCKETS: usize = 1 + 64 * MAX_RESOLUTION as usize;
/// Primitive slots per rank (room for the C ABI to add primitives without a new layout).
pub const PRIMITIVE_SLOTS: usize = 64;

/// Check a user-given resolution: a power of two from 1 to [`MAX_RESOLUTION`].
pub fn parse_resolution(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(r) if r.is_power_of_two() && r <= MAX_RESOLUTION => Ok(r),
        _ => Err(format!(
            "histogram resolution must be 1, 2, 4 or 8 buckets per power of two (got {s:?})"
        )),
    }
}

pub use crate::calls::Primitive;

/// One histogram in shared memory; bucket `i` counts values in [`bucket_bounds`]`(i)`.
#[repr(C)]
pub struct Histogram {
    pub buckets: [AtomicU64; BUCKETS],
}

/// One primitive's counters.
#[repr(C)]
pub struct PrimitiveCounters {
    pub count: AtomicU64,
    pub min_ns: AtomicU64,
    pub max_ns: AtomicU64,
    pub total_ns: AtomicU64,
    pub bytes: AtomicU64,
    pub latency: Histogram,
    pub size: Histogram,
}

/// A rank's MMDS counters, in the job segment. Times are `CLOCK_MONOTONIC` nanoseconds.
#[repr(C)]
pub struct MmdsBlock {
    /// When `MPI_Init` was entered (0: never).
    pub init_ns: AtomicU64,
    /// When the last outermost call was entered or left.
    pub last_event_ns: AtomicU64,
    /// When the last outermost call returned (start of the current computation interval).
    pub last_exit_ns: AtomicU64,
    /// When `MPI_Finalize` returned (0: not yet); nothing is counted after it.
    pub end_ns: AtomicU64,
    pub compute_ns: AtomicU64,
    pub comm_ns: AtomicU64,
    pub calls: AtomicU64,
    /// Shortest computation interval plus one (0: none yet) and the longest.
    pub granularity_min_plus1: AtomicU64,
    pub granularity_max_ns: AtomicU64,
    /// Bit `p` set: primitive slot `p` has counted a call. A snapshot reads only these
    /// slots: each [`PrimitiveCounters`] spans two pages, and loading the count of every
    /// slot of every rank faulted in (and, the segment being shared memory, allocated)
    /// 64 pages per rank that no call touched: 177 ms at the end of a 1,000-rank job.
    pub primitives_used: AtomicU64,
    /// Computation intervals (granularity) and communication intervals (overhead).
    pub granularity: Histogram,
    pub overhead: Histogram,
    pub primitives: [PrimitiveCounters; PRIMITIVE_SLOTS],
}

/// Bytes a rank's [`MmdsBlock`] takes in the segment.
pub const BLOCK_BYTES: usize = std::mem::size_of::<MmdsBlock>();

fn log2(r: u32) -> u32 {
    r.trailing_zeros()
}

/// The bucket of `v` at resolution `2^k`.
pub fn bucket_index(v: u64, k: u32) -> usize {
    if v == 0 {
        return 0;
    }
    let p = 63 - v.leading_zeros();
    let off = v - (1u64 << p);
    // off < 2^p, so off << k fits in 128 bits and the sub-bucket is < 2^k.
    let sub = ((off as u128) << k) >> p;
    1 + (p as usize) * (1usize << k) + sub as usize
}

/// The half-open value range `[lo, hi)` of bucket `i` at resolution `2^k` (saturating at
/// `u64::MAX` for the very last bucket).
pub fn bucket_bounds(i: usize, k: u32) -> (u64, u64) {
    if i == 0 {
        return (0, 1);
    }
    let per = 1usize << k;
    let p = ((i - 1) / per) as u32;
    let sub = ((i - 1) % per) as u128;
    let base = 1u128 << p;
    let lo = base + ((sub * base) >> k);
    let hi = base + (((sub + 1) * base) >> k);
    // Below 2^k a sub-bucket can be narrower than one integer: its range is [v, v+1).
    let hi = hi.max(lo + 1);
    (
        lo.min(u64::MAX as u128) as u64,
        hi.min(u64::MAX as u128) as u64,
    )
}

fn bump(a: &AtomicU64, by: u64) {
    a.store(
        a.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

impl Histogram {
    fn add(&self, v: u64, k: u32) {
        bump(&self.buckets[bucket_index(v, k)], 1);
    }

    fn snapshot(&self, k: u32) -> Vec<Bucket> {
        let used = 1 + 64 * (1usize << k);
        (0..used)
            .filter_map(|i| {
                let count = self.buckets[i].load(Ordering::Relaxed);
                (count > 0).then(|| {
                    let (lo, hi) = bucket_bounds(i, k);
                    Bucket { lo, hi, count }
                })
            })
            .collect()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (vDSO: no system call).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's block and resolution, once the rank attached with MMDS on.
struct Attached {
    block: &'static MmdsBlock,
    k: u32,
}

static ATTACHED: OnceLock<Attached> = OnceLock::new();

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Bytes announced by inner calls (the Rust API under a C entry point, which only knows
    /// the function name): the outermost call takes them when it has none of its own.
    static INNER_BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Called by [`crate::rank::RankCtx::init`] once the segment is mapped: turns measuring on
/// if the launcher asked for it, and records `MPI_Init` itself, entered at `entered_ns`.
pub(crate) fn attach(seg: &'static JobSegment, rank: u32, entered_ns: u64) {
    // Always, measuring or not: the launcher tells "never called MPI_Init" from "never
    // called MPI_Finalize" by it ([`called_init`]); `snapshot` reads nothing when off.
    seg.mmds(rank)
        .init_ns
        .store(entered_ns.max(1), Ordering::Release);
    let res = seg.header().mmds_resolution.load(Ordering::Acquire);
    if res == 0 || !res.is_power_of_two() || res > MAX_RESOLUTION {
        return;
    }
    let block = seg.mmds(rank);
    if ATTACHED
        .set(Attached {
            block,
            k: log2(res),
        })
        .is_err()
    {
        return;
    }
    block.init_ns.store(entered_ns, Ordering::Relaxed);
    block.last_exit_ns.store(entered_ns, Ordering::Relaxed);
    block.last_event_ns.store(entered_ns, Ordering::Relaxed);
    let a = ATTACHED.get().expect("just set");
    on_exit(a, Primitive::Init, entered_ns, now_ns(), 0);
}

/// Measures one MPI call from [`enter`] until it is dropped.
#[must_use = "the call is measured until the guard is dropped"]
pub struct CallGuard {
    /// `Some` only for an outermost call while measuring is on.
    outer: Option<(Primitive, u64)>,
    bytes: u64,
}

impl CallGuard {
    /// Bytes this call moves (its size-histogram value), if known after entry.
    pub fn set_bytes(&mut self, bytes: u64) {
        self.bytes = bytes;
    }
}

/// Enter an MPI call. Keep the guard alive until the call returns:
/// `let _m = mmds::enter(Primitive::Send);`.
#[inline]
pub fn enter(p: Primitive) -> CallGuard {
    enter_bytes(p, 0)
}

/// [`enter`] for a call that moves `bytes` bytes (sends: the message; receives: the buffer
/// capacity; collectives: the rank's send buffer).
#[inline]
pub fn enter_bytes(p: Primitive, bytes: u64) -> CallGuard {
    let depth = DEPTH.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v
    });
    if depth > 0 && bytes > 0 {
        INNER_BYTES.with(|b| b.set(b.get().max(bytes)));
    } else if depth == 0 {
        INNER_BYTES.with(|b| b.set(0));
    }
    let outer = match ATTACHED.get() {
        Some(a) if depth == 0 && a.block.end_ns.load(Ordering::Relaxed) == 0 => {
            let now = now_ns();
            let b = a.block;
            let computed = now.saturating_sub(b.last_exit_ns.load(Ordering::Relaxed));
            // The time sums and the last event's time side by side: a rank killed between
            // them (the launcher ends the others when one dies) would leave
            // compute + comm != wall in its statistics (seen once in CI with the
            // histogram updates in between).
            bump(&b.compute_ns, computed);
            b.last_event_ns.store(now, Ordering::Relaxed);
            b.granularity.add(computed, a.k);
            let min1 = b.granularity_min_plus1.load(Ordering::Relaxed);
            if min1 == 0 || computed < min1 - 1 {
                b.granularity_min_plus1
                    .store(computed + 1, Ordering::Relaxed);
            }
            if computed > b.granularity_max_ns.load(Ordering::Relaxed) {
                b.granularity_max_ns.store(computed, Ordering::Relaxed);
            }
            Some((p, now))
        }
        _ => None,
    };
    CallGuard { outer, bytes }
}

fn on_exit(a: &Attached, p: Primitive, entered: u64, now: u64, bytes: u64) {
    let b = a.block;
    let lat = now.saturating_sub(entered);
    // As in `enter_bytes`: the time sum and the event times side by side.
    bump(&b.comm_ns, lat);
    b.last_exit_ns.store(now, Ordering::Relaxed);
    b.last_event_ns.store(now, Ordering::Relaxed);
    bump(&b.calls, 1);
    b.overhead.add(lat, a.k);
    let c = &b.primitives[p as usize];
    let n = c.count.load(Ordering::Relaxed);
    if n == 0 || lat < c.min_ns.load(Ordering::Relaxed) {
        c.min_ns.store(lat, Ordering::Relaxed);
    }
    if lat > c.max_ns.load(Ordering::Relaxed) {
        c.max_ns.store(lat, Ordering::Relaxed);
    }
    bump(&c.total_ns, lat);
    bump(&c.bytes, bytes);
    c.latency.add(lat, a.k);
    c.size.add(bytes, a.k);
    // The count last: a reader that sees it sees the rest of this call.
    c.count.store(n + 1, Ordering::Release);
    if n == 0 {
        // After the count: a reader that sees the bit sees a count.
        b.primitives_used
            .fetch_or(1u64 << p as usize, Ordering::Release);
    }
    if p == Primitive::Finalize {
        b.end_ns.store(now, Ordering::Release);
    }
}

impl Drop for CallGuard {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        if let (Some((p, entered)), Some(a)) = (self.outer, ATTACHED.get()) {
            let bytes = if self.bytes > 0 {
                self.bytes
            } else {
                INNER_BYTES.with(|b| b.replace(0))
            };
            on_exit(a, p, entered, now_ns(), bytes);
        }
    }
}

/// One histogram bucket: `count` values in `[lo, hi)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// One primitive's statistics for a rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimitiveStats {
    pub primitive: Primitive,
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub bytes: u64,
    pub latency: Vec<Bucket>,
    pub size: Vec<Bucket>,
}

/// A rank's MMDS as the launcher read it at the end of the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankMmds {
    pub rank: u32,
    /// From entering `MPI_Init` to `MPI_Finalize`'s return (or the rank's last call).
    pub wall_ns: u64,
    pub compute_ns: u64,
    pub comm_ns: u64,
    pub calls: u64,
    /// Whether `MPI_Finalize` returned.
    pub finalized: bool,
    /// Shortest and longest computation interval (`None`: the rank never computed).
    pub granularity_min_max: Option<(u64, u64)>,
    pub granularity: Vec<Bucket>,
    pub overhead: Vec<Bucket>,
    /// Primitives called at least once, in slot order.
    pub primitives: Vec<PrimitiveStats>,
}

/// Whether `rank` got into `MPI_Init` (launcher side, after the rank exited).
pub fn called_init(seg: &JobSegment, rank: u32) -> bool {
    seg.mmds(rank).init_ns.load(Ordering::Acquire) != 0
}

/// Read `rank`'s counters (launcher side, after the rank exited). `None` if the rank never
/// got through `MPI_Init` with measuring on.
pub fn snapshot(seg: &JobSegment, rank: u32) -> Option<RankMmds> {
    let res = seg.header().mmds_resolution.load(Ordering::Acquire);
    if res == 0 || !res.is_power_of_two() || res > MAX_RESOLUTION {
        return None;
    }
    let k = log2(res);
    let b = seg.mmds(rank);
    let init = b.init_ns.load(Ordering::Acquire);
    if init == 0 {
        return None;
    }
    let end = b.end_ns.load(Ordering::Acquire);
    let last = if end != 0 {
        end
    } else {
        b.last_event_ns.load(Ordering::Acquire)
    };
    let used = b.primitives_used.load(Ordering::Acquire);
    let primitives = (0..PRIMITIVE_SLOTS)
        .filter(|&slot| used & (1u64 << slot) != 0)
        .filter_map(|slot| {
            let c = &b.primitives[slot];
            let count = c.count.load(Ordering::Acquire);
            let primitive = Primitive::from_slot(slot)?;
            (count > 0).then(|| PrimitiveStats {
                primitive,
                count,
                min_ns: c.min_ns.load(Ordering::Relaxed),
                max_ns: c.max_ns.load(Ordering::Relaxed),
                total_ns: c.total_ns.load(Ordering::Relaxed),
                bytes: c.bytes.load(Ordering::Relaxed),
                latency: c.latency.snapshot(k),
                size: c.size.snapshot(k),
            })
        })
        .collect();
    Some(RankMmds {
        rank,
        wall_ns: last.saturating_sub(init),
        compute_ns: b.compute_ns.load(Ordering::Relaxed),
        comm_ns: b.comm_ns.load(Ordering::Relaxed),
        calls: b.calls.load(Ordering::Relaxed),
        finalized: end != 0,
        granularity_min_max: match b.granularity_min_plus1.load(Ordering::Relaxed) {
            0 => None,
            m => Some((m - 1, b.granularity_max_ns.load(Ordering::Relaxed))),
        },
        granularity: b.granularity.snapshot(k),
        overhead: b.overhead.snapshot(k),
        primitives,
    })
}

/// Resolution word of the job header: buckets per power of two, 0 = MMDS off.
pub(crate) fn set_resolution(seg: &JobSegment, resolution: u32) {
    seg.header()
        .mmds_resolution
        .store(resolution, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_its_bucket_and_buckets_are_ordered() {
        let mut values: Vec<u64> = (0..5000).collect();
        for p in 0..64 {
            let x = 1u64 << p;
            values.extend([x - 1, x, x + 1, x + x / 3]);
        }
        values.push(u64::MAX);
        values.sort_unstable();
        for k in 0..=3 {
            let mut prev = (0usize, 0u64);
            for &v in &values {
                let i = bucket_index(v, k);
                assert!(i < 1 + 64 * (1usize << k), "k {k} v {v}: index {i}");
                let (l, h) = bucket_bounds(i, k);
                assert!(l <= v && (v < h || h == u64::MAX), "k {k} v {v}: [{l},{h})");
                assert!(i >= prev.0, "indices grow with values");
                if i > prev.0 {
                    assert!(l >= prev.1, "buckets do not overlap");
                }
                prev = (i, h);
            }
        }
        // Resolution 1: one bucket per power of two.
        assert_eq!(bucket_bounds(bucket_index(1000, 0), 0), (512, 1024));
        // Resolution 4: [512, 1024) in quarters.
        assert_eq!(bucket_bounds(bucket_index(1000, 2), 2), (896, 1024));
        assert_eq!(bucket_bounds(bucket_index(600, 2), 2), (512, 640));
    }

    #[test]
    fn a_snapshot_reads_only_the_primitives_a_rank_called() {
        let seg: &'static JobSegment =
            Box::leak(Box::new(JobSegment::create(2, 1, 16, 16).expect("segment")));
        set_resolution(seg, 4);
        let b = seg.mmds(1);
        b.init_ns.store(1, Ordering::Release);
        let a = Attached { block: b, k: 2 };
        on_exit(&a, Primitive::Send, 100, 300, 8);
        on_exit(&a, Primitive::Send, 400, 450, 16);
        on_exit(&a, Primitive::Finalize, 500, 600, 0);
        assert_eq!(
            b.primitives_used.load(Ordering::Acquire),
            (1u64 << Primitive::Send as usize) | (1u64 << Primitive::Finalize as usize)
        );
        // A slot whose bit is clear is never read (its pages stay unmapped), even if it
        // held a count.
        b.primitives[Primitive::Recv as usize]
            .count
            .store(5, Ordering::Release);
        let snap = snapshot(seg, 1).expect("attached rank");
        let got: Vec<_> = snap
            .primitives
            .iter()
            .map(|p| (p.primitive, p.count, p.bytes))
            .collect();
        assert_eq!(
            got,
            vec![(Primitive::Finalize, 1, 0), (Primitive::Send, 2, 24)]
        );
        assert!(snap.finalized);
        // Rank 0 never attached: no snapshot.
        assert!(snapshot(seg, 0).is_none());
    }

    #[test]
    fn resolutions_are_powers_of_two_up_to_eight() {
        assert_eq!(parse_resolution("4"), Ok(4));
        assert_eq!(parse_resolution("1"), Ok(1));
        assert!(parse_resolution("3").is_err());
        assert!(parse_resolution("16").is_err());
        assert!(parse_resolution("0").is_err());
        assert!(parse_resolution("x").is_err());
    }
}
