//! Unit tests of the staging rounds (`remote.rs`).

use super::*;

/// Unpack a frame body held in memory, every chunk into the store.
fn unpack(from: u32, count: u32, body: &[u8], store: &mut RemoteStore) -> Result<(), EngineError> {
    super::unpack(from, count, body, store, &|_, _, _| None)
}

/// A packer at the start of `pushes`.
fn packer(pushes: &[Push]) -> Packer<'_> {
    Packer {
        pushes,
        idx: 0,
        off: 0,
    }
}

fn push(rank: u32, addr: u64, data: Option<Vec<u8>>, total: u64) -> Push {
    let src = data.map_or(Source::Failed, Source::Bytes);
    Push {
        key: Key::Mem {
            rank,
            addr,
            len: total,
        },
        total,
        src,
    }
}

/// Pack `pushes` into rounds of `window` bytes and unpack them all.
fn round_trip(pushes: &[Push], window: usize) -> (RemoteStore, usize) {
    let mut p = packer(pushes);
    let mut store = RemoteStore::default();
    let mut buf = Vec::new();
    let mut rounds = 0;
    loop {
        let (len, more) = p.next_frame(&mut buf, window);
        assert!(len <= window);
        let frame = &buf[..len];
        rounds += 1;
        let count = u32::from_le_bytes(frame[4..8].try_into().unwrap());
        unpack(1, count, &frame[FRAME_HEADER..], &mut store).unwrap();
        if !more {
            return (store, rounds);
        }
    }
}

#[test]
fn regions_larger_than_a_window_span_rounds_and_read_back_whole() {
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    let small = vec![9u8; 5];
    let chunk = Push {
        key: Key::Chunk {
            send: DescRef { rank: 2, seq: 7 },
            offset: 4096,
        },
        total: 3,
        src: Source::Bytes(vec![1, 2, 3]),
    };
    let pushes = vec![
        push(3, 0x1000, Some(big.clone()), big.len() as u64),
        push(3, 0x900000, Some(small.clone()), 5),
        chunk,
        push(4, 0x2000, None, 64),
    ];
    let (store, rounds) = round_trip(&pushes, 64 << 10);
    assert_eq!(rounds, 5, "300 000 bytes need five 64 KiB rounds");
    assert_eq!(store.read(3, 0x1000, big.len() as u64).unwrap(), &big[..]);
    assert_eq!(store.read(3, 0x1000 + 777, 10).unwrap(), &big[777..787]);
    assert_eq!(store.read(3, 0x900001, 4).unwrap(), &small[1..]);
    let send = DescRef { rank: 2, seq: 7 };
    assert_eq!(store.chunk(send, 4096, 3).unwrap(), &[1, 2, 3]);
    // Not staged, past a region's end, another offset, a failed region: errors.
    assert_eq!(store.read(3, 0x900001, 5), Err(RtError::Buffer));
    assert_eq!(store.read(5, 0x1000, 1), Err(RtError::Buffer));
    assert_eq!(store.chunk(send, 0, 3), Err(RtError::Buffer));
    assert_eq!(store.read(4, 0x2000, 8), Err(RtError::Buffer));
}

#[test]
fn an_empty_plan_is_one_empty_round() {
    let (store, rounds) = round_trip(&[], 64 << 10);
    assert_eq!((rounds, store.bytes), (1, 0));
}

#[test]
fn damaged_rounds_are_errors_not_panics() {
    let pushes = vec![push(1, 0x10, Some(vec![5; 100]), 100)];
    let mut p = packer(&pushes);
    let mut frame = Vec::new();
    let (len, _) = p.next_frame(&mut frame, 64 << 10);
    let body = &frame[FRAME_HEADER..len];
    // More records than present, a truncated piece, an unknown kind.
    assert!(unpack(0, 2, body, &mut RemoteStore::default()).is_err());
    assert!(unpack(0, 1, &body[..60], &mut RemoteStore::default()).is_err());
    let mut bad = body.to_vec();
    bad[0] = 9;
    assert!(unpack(0, 1, &bad, &mut RemoteStore::default()).is_err());
    // A piece that does not continue the region.
    let mut skip = body.to_vec();
    skip[32..40].copy_from_slice(&8u64.to_le_bytes());
    assert!(unpack(0, 1, &skip, &mut RemoteStore::default()).is_err());
}

#[test]
fn collective_flows_follow_where_the_data_goes() {
    let part = |rank: u32| Descriptor {
        rank,
        ..Descriptor::default()
    };
    let parts: Vec<Descriptor> = (0..4).map(part).collect();
    let node_of = [0, 0, 1, 2];
    // Bcast from rank 2: node 1 sends to 0 and 2.
    assert_eq!(
        coll_flows(DescKind::Bcast, 2, &parts, &node_of),
        vec![(1, 0), (1, 2)]
    );
    // Gather to rank 0: nodes 1 and 2 send to 0.
    assert_eq!(
        coll_flows(DescKind::Gather, 0, &parts, &node_of),
        vec![(1, 0), (2, 0)]
    );
    // Allreduce: every pair of distinct nodes.
    assert_eq!(
        coll_flows(DescKind::Allreduce, -1, &parts, &node_of).len(),
        6
    );
    assert!(coll_flows(DescKind::Barrier, -1, &parts, &node_of).is_empty());
}

#[test]
fn rank_regions_are_read_while_packing_and_a_failed_read_is_reported() {
    // Our own process stands for a local rank (cross-memory attach to ourselves works).
    let buf: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let me = std::process::id() as i32;
    let rank = |pid: i32, addr: u64, len: u64| Push {
        key: Key::Mem { rank: 1, addr, len },
        total: len,
        src: Source::Rank { pid, addr },
    };
    let addr = buf.as_ptr() as u64;
    // pid 0: what a node holds for a rank of another node; procmem refuses it.
    let pushes = vec![rank(me, addr, buf.len() as u64), rank(0, 0x1000, 64)];
    let (store, rounds) = round_trip(&pushes, 64 << 10);
    assert_eq!(rounds, 4);
    assert_eq!(store.read(1, addr, buf.len() as u64).unwrap(), &buf[..]);
    assert_eq!(store.read(1, 0x1000, 8), Err(RtError::Buffer));
}

const BASE: usize = 4096;
const SMALL_WINDOW: usize = 64 << 10;
const LARGE_WINDOW: usize = 1 << 20;

/// Three nodes of two ranks each; every rank sends a 300 000-byte chunk to the rank two
/// further on (always on another node), and node 2 also sends rank 0 a second chunk of a
/// send whose buffer cannot be read. Every node runs `exchange` on its own thread over a
/// real transport. With 64 KiB windows every chunk spans rounds and is kept in the store;
/// with 1 MiB windows every chunk is whole in one round and written into its receiver
/// (a buffer of this process) straight from the window.
fn exchange_over(transports: Vec<Box<dyn Transport>>, window: usize) {
    use crate::descriptor::DescKind;
    use crate::engine::eager::EagerMemory;
    use crate::sched::{Chunk, Decision, SliceDecisions};

    const LEN: usize = 300_000;
    let node_of = [0u32, 0, 1, 1, 2, 2];
    let bufs: Vec<Vec<u8>> = (0..6u32)
        .map(|r| (0..LEN).map(|i| (i as u32 * 7 + r * 41) as u8).collect())
        .collect();
    // Receive buffers, written by process_vm_writev while the exchange runs: only their
    // addresses are held until then.
    let mut received: Vec<Vec<u8>> = (0..6).map(|_| vec![0u8; LEN]).collect();
    let recv_at: Vec<u64> = received.iter_mut().map(|b| b.as_mut_ptr() as u64).collect();
    let desc = |rank: u32, seq: u64, kind: DescKind, buf: u64| Descriptor {
        rank,
        seq,
        kind: kind as u8,
        buf,
        bytes: LEN as u64,
        ..Descriptor::default()
    };
    let mut catalog = Vec::new();
    let mut decisions = Vec::new();
    for r in 0..6u32 {
        let to = (r + 2) % 6;
        catalog.push(desc(r, 1, DescKind::Send, bufs[r as usize].as_ptr() as u64));
        catalog.push(desc(to, 2, DescKind::Recv, recv_at[to as usize]));
        let (send, recv) = (DescRef { rank: r, seq: 1 }, DescRef { rank: to, seq: 2 });
        decisions.push(Decision::Chunk(Chunk {
            send,
            recv,
            offset: 0,
            len: LEN as u64,
        }));
    }
    // Rank 4's send 3: its buffer is not mapped.
    catalog.push(desc(4, 3, DescKind::Send, 8));
    catalog.push(desc(0, 4, DescKind::Recv, 0x1000));
    decisions.push(Decision::Chunk(Chunk {
        send: DescRef { rank: 4, seq: 3 },
        recv: DescRef { rank: 0, seq: 4 },
        offset: 0,
        len: 16,
    }));
    catalog.sort_by_key(|d| d.id());
    let dec = SliceDecisions {
        slice: 1,
        decisions,
        wake: Vec::new(),
        catalog,
    };
    let me = std::process::id() as i32;
    let stop = AtomicBool::new(false);
    let stores: Vec<RemoteStore> = std::thread::scope(|scope| {
        // The endpoints outlive every thread: a node that finishes first must not drop
        // its endpoint (a goodbye) while the others still wait for its credits.
        let handles: Vec<_> = transports
            .iter()
            .enumerate()
            .map(|(node, t)| {
                let (dec, stop) = (&dec, &stop);
                scope.spawn(move || {
                    let node = node as u32;
                    let local = move |r: u32| node_of[r as usize] == node;
                    let pids: Vec<i32> = (0..6).map(|r| if local(r) { me } else { 0 }).collect();
                    let eager = EagerMemory::default();
                    let mut bounce = Vec::new();
                    let mem = Memory {
                        pids: &pids,
                        local: &local,
                        bounce: &mut bounce,
                        eager: &eager,
                        defer: None,
                        staged: None,
                    };
                    let st = Staging::with_window(BASE, window, node, 3);
                    st.exchange(t.as_ref(), stop, StagePhase::P2p, dec, &node_of, &mem)
                        .expect("exchange")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in 0..6u32 {
        let to = (r + 2) % 6;
        let store = &stores[node_of[to as usize] as usize];
        let send = DescRef { rank: r, seq: 1 };
        if window == SMALL_WINDOW {
            let got = store.chunk(send, 0, LEN as u64);
            assert_eq!(got.unwrap(), &bufs[r as usize][..], "chunk {r} -> {to}");
            assert_eq!(store.delivered(send, 0), None);
            assert!(received[to as usize].iter().all(|&b| b == 0));
        } else {
            assert_eq!(store.delivered(send, 0), Some(Ok(())), "chunk {r} -> {to}");
            assert!(
                store.chunk(send, 0, LEN as u64).is_err(),
                "not copied to the store"
            );
            assert!(
                received[to as usize] == bufs[r as usize],
                "chunk {r} -> {to}"
            );
        }
    }
    let bad = stores[0].chunk(DescRef { rank: 4, seq: 3 }, 0, 16);
    assert_eq!(bad, Err(RtError::Buffer));
    // Node 0 received rank 4's and rank 5's chunks (two from node 2): 600 000 bytes.
    assert_eq!(stores[0].bytes, 2 * LEN as u64);
}

fn job_size() -> (usize, u32) {
    (
        BASE + 3 * LARGE_WINDOW,
        crate::engine::remote::STAGE_EVENT_BASE + STAGE_EVENTS,
    )
}

#[test]
fn exchange_moves_chunks_between_three_nodes_over_shm() {
    let (global, events) = job_size();
    for window in [SMALL_WINDOW, LARGE_WINDOW] {
        let fabric = crate::transport::shm::ShmFabric::create(3, global, events).unwrap();
        exchange_over(
            (0..3)
                .map(|n| Box::new(fabric.endpoint(n)) as Box<dyn Transport>)
                .collect(),
            window,
        );
    }
}

#[test]
fn exchange_moves_chunks_between_three_nodes_over_tcp() {
    let (global, events) = job_size();
    for window in [SMALL_WINDOW, LARGE_WINDOW] {
        let job = crate::transport::tcp::TcpEndpoint::loopback_job(3, global, events).unwrap();
        exchange_over(
            job.into_iter()
                .map(|ep| Box::new(ep) as Box<dyn Transport>)
                .collect(),
            window,
        );
    }
}

/// Buffers are reused from round to round and phase to phase without zeroing: a frame
/// packed into a buffer full of old bytes is the same frame, and a store built from
/// recycled region buffers reads back exactly what was sent, nothing of the old bytes.
#[test]
fn reused_frame_and_region_buffers_carry_no_old_bytes() {
    let pushes = vec![
        push(1, 0x10, Some((0..100u8).collect()), 100),
        push(2, 0x20, Some(vec![7; 13]), 13),
    ];
    let pack = |buf: &mut Vec<u8>| {
        let mut p = packer(&pushes);
        let (len, more) = p.next_frame(buf, 64 << 10);
        assert!(!more);
        buf[..len].to_vec()
    };
    let fresh = pack(&mut Vec::new());
    let mut dirty = vec![0xa5; 64 << 10];
    assert_eq!(pack(&mut dirty), fresh, "old bytes leaked into a frame");

    let staging = Staging::with_window(0, 64 << 10, 0, 2);
    let count = u32::from_le_bytes(fresh[4..8].try_into().unwrap());
    // A first phase with larger regions full of other bytes, given back...
    let mut first = RemoteStore::default();
    let big = vec![push(1, 0x10, Some(vec![0xee; 4096]), 4096)];
    let mut p = packer(&big);
    let mut buf = Vec::new();
    let (len, _) = p.next_frame(&mut buf, 64 << 10);
    let n = u32::from_le_bytes(buf[4..8].try_into().unwrap());
    unpack(1, n, &buf[FRAME_HEADER..len], &mut first).unwrap();
    staging.recycle(first);
    assert_eq!(staging.spare.borrow().len(), 1);
    // ...then the next phase's store takes that buffer and holds only the new bytes.
    let mut second = RemoteStore {
        spare: std::mem::take(&mut *staging.spare.borrow_mut()),
        ..Default::default()
    };
    unpack(1, count, &fresh[FRAME_HEADER..], &mut second).unwrap();
    assert!(second.spare.is_empty(), "the spare buffer was reused");
    let want: Vec<u8> = (0..100u8).collect();
    assert_eq!(second.read(1, 0x10, 100).unwrap(), &want[..]);
    assert!(
        second.read(1, 0x10, 101).is_err(),
        "nothing past the region"
    );
    assert_eq!(second.read(2, 0x20, 13).unwrap(), &[7; 13]);
}
