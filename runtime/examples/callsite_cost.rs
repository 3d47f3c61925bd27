//! What call-site capture costs per MPI call (docs/recording.md, "Call sites"): the C
//! entry's marker alone (calls that neither post nor block, e.g. `MPI_Comm_rank`), the
//! marker plus the one stack walk of a call that posts or blocks (from as deep in the
//! runtime as `RankCtx::post` is below `MPI_Send`), and the Rust API's `#[track_caller]`
//! site. Prints nanoseconds per call; no assertion (performance is not tested).
//!   cargo run --release -p strobe-runtime --example callsite_cost

use std::hint::black_box;
use std::time::Instant;

use strobe_runtime::callsite;

/// Frames between an exported C function and `RankCtx::post` (entry closure, the C
/// layer's helper, the Rust API, its p2p helper, `post`).
const RUNTIME_DEPTH: u32 = 5;

#[inline(never)]
fn exported(walk: bool) -> u64 {
    let marker = 0u8;
    let _s = callsite::enter_c(black_box(&marker) as *const u8 as usize);
    if walk {
        deeper(RUNTIME_DEPTH)
    } else {
        black_box(0)
    }
}

#[inline(never)]
fn deeper(n: u32) -> u64 {
    if n == 0 {
        callsite::current().addr
    } else {
        black_box(deeper(black_box(n - 1)))
    }
}

#[track_caller]
#[inline(never)]
fn rust_api() -> u64 {
    let _s = callsite::enter_rust(std::panic::Location::caller());
    callsite::current().info
}

fn per_call(name: &str, n: u32, mut f: impl FnMut() -> u64) {
    for _ in 0..n / 10 {
        black_box(f());
    }
    let t = Instant::now();
    for _ in 0..n {
        black_box(f());
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{name:<48} {ns:>8.1} ns per call");
}

fn main() {
    per_call(
        "C entry, no post or block (marker only)",
        10_000_000,
        || exported(false),
    );
    per_call(
        "C entry that posts or blocks (one stack walk)",
        200_000,
        || exported(true),
    );
    per_call("Rust API (#[track_caller])", 10_000_000, rust_api);
}
