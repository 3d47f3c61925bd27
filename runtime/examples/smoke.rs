//! Minimal smoke program over the raw rank API (no Rust API layer): ring exchange and a
//! barrier. `strobe run -n 4 -- target/debug/examples/smoke`
use strobe_runtime::descriptor::{DescKind, Descriptor};
use strobe_runtime::rank::RankCtx;

fn main() {
    let ctx = RankCtx::init().expect("init");
    let (r, n) = (ctx.rank(), ctx.size());
    let data = [r as u64 + 100; 4];
    let mut got = [0u64; 4];
    for _ in 0..3 {
        let s = ctx.post(Descriptor {
            kind: DescKind::Send as u8,
            peer: ((r + 1) % n) as i32,
            tag: 7,
            buf: data.as_ptr() as u64,
            bytes: 32,
            ..Default::default()
        });
        let c = ctx.call(Descriptor {
            kind: DescKind::Recv as u8,
            peer: ((r + n - 1) % n) as i32,
            tag: 7,
            buf: got.as_mut_ptr() as u64,
            bytes: 32,
            ..Default::default()
        });
        ctx.wait(strobe_runtime::mmds::Primitive::Wait, s);
        assert_eq!(c.error, 0);
        assert_eq!(
            got[0],
            ((r + n - 1) % n) as u64 + 100,
            "rank {r} got {got:?}"
        );
        ctx.call(Descriptor {
            kind: DescKind::Barrier as u8,
            ..Default::default()
        });
    }
    ctx.finalize();
}
