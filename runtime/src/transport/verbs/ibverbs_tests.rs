//! Tests of the libibverbs provider that need no RDMA device: loading (and failing to
//! load) the library, listing no devices, the one-line explanations, and the mappings of
//! completion statuses, opcodes and queue-pair attributes.

use std::sync::Arc;

use super::ibverbs::{completion_from_wc, link_layer, wc_opcode, wc_status, IbverbsProvider};
use super::ibverbs_qp::{access_flags, rtr_attr, rts_attr, send_wr};
use super::ibverbs_sys::*;
use super::provider::*;
use super::system::{choose_port, MIN_MEMLOCK};

/// Whether libibverbs.so.1 is installed here (it is in CI: scripts/ensure-tools.sh).
fn have_libibverbs() -> bool {
    match IbverbsProvider::load() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

fn have_no_device() -> bool {
    let empty = std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_none())
        .unwrap_or(true);
    if !empty {
        eprintln!("skipped: this host has an RDMA device (scripts/verbs-check.sh tests it)");
    }
    empty
}

#[test]
fn missing_library_is_named_in_the_explanation() {
    let err = IbverbsProvider::load_from("libibverbs-strobe-test-absent.so.1")
        .err()
        .expect("a library that does not exist cannot load");
    assert_eq!(
        err,
        VerbsError::Unavailable(
            "libibverbs-strobe-test-absent.so.1 not found (install rdma-core / libibverbs1)"
                .to_string()
        )
    );
}

#[test]
fn a_library_without_the_verbs_is_refused() {
    // libc is certainly there and certainly has no ibv_get_device_list.
    let err = IbverbsProvider::load_from("libc.so.6")
        .err()
        .expect("libc is not libibverbs");
    let text = err.to_string();
    assert!(
        text.contains("libc.so.6 has no ibv_get_device_list"),
        "{text}"
    );
}

#[test]
fn real_library_lists_no_device_on_a_host_without_one() {
    if !have_libibverbs() || !have_no_device() {
        return;
    }
    let provider = IbverbsProvider::load().unwrap();
    assert_eq!(provider.name(), "libibverbs");
    assert_eq!(provider.devices().unwrap(), Vec::<DeviceInfo>::new());
    let err = provider.open("mlx5_0", 1).err().expect("no device to open");
    assert_eq!(
        err,
        VerbsError::Unavailable("no RDMA device mlx5_0".to_string())
    );
}

#[test]
fn system_provider_explains_a_host_without_device() {
    if !have_libibverbs()
        || !have_no_device()
        || std::env::var_os("STROBE_VERBS_PROVIDER").is_some()
    {
        return;
    }
    let err = super::system_provider().err().expect("no device here");
    assert_eq!(
        err.to_string(),
        "verbs unavailable: no RDMA device (/sys/class/infiniband is empty)"
    );
}

fn port(n: u8, active: bool, link: LinkLayer) -> PortInfo {
    PortInfo {
        port: n,
        active,
        link_layer: link,
        lid: if link == LinkLayer::InfiniBand { 7 } else { 0 },
        gid: [0xfe; 16],
        mtu: 4096,
    }
}

fn dev(name: &str, ports: Vec<PortInfo>) -> DeviceInfo {
    DeviceInfo {
        name: name.to_string(),
        ports,
    }
}

fn why(devices: &[DeviceInfo], memlock: Option<u64>, pinned: Option<&str>) -> String {
    match choose_port(devices, memlock, pinned) {
        Err(VerbsError::Unavailable(s)) => s,
        other => panic!("expected unavailable, got {other:?}"),
    }
}

#[test]
fn each_reason_verbs_is_unavailable_is_one_plain_line() {
    assert_eq!(
        why(&[], None, None),
        "no RDMA device (/sys/class/infiniband is empty)"
    );
    let down = [dev("mlx5_0", vec![port(1, false, LinkLayer::InfiniBand)])];
    assert_eq!(why(&down, None, None), "device mlx5_0 has no active port");
    let two_down = [
        dev("mlx5_0", vec![port(1, false, LinkLayer::InfiniBand)]),
        dev("mlx5_1", vec![]),
    ];
    assert_eq!(
        why(&two_down, None, None),
        "devices mlx5_0, mlx5_1 have no active port"
    );
    let up = [dev("mlx5_0", vec![port(1, true, LinkLayer::InfiniBand)])];
    let memlock = why(&up, Some(8 << 20), None);
    assert!(
        memlock.starts_with("locked-memory limit is 8 MiB"),
        "{memlock}"
    );
    assert!(memlock.contains("ulimit -l unlimited"), "{memlock}");
    assert!(!memlock.contains('\n'));
    assert_eq!(
        why(&up, None, Some("mlx4_0")),
        "STROBE_VERBS_DEVICE=mlx4_0: no such device (this host has mlx5_0)"
    );
    // A port is not pinned: `mlx5_0:2` is no device name.
    assert_eq!(
        why(&up, None, Some("mlx5_0:2")),
        "STROBE_VERBS_DEVICE=mlx5_0:2: no such device (this host has mlx5_0)"
    );
}

#[test]
fn the_first_active_port_is_chosen_on_the_pinned_device_or_the_first_that_has_one() {
    let devices = [
        dev("mlx5_0", vec![port(1, false, LinkLayer::InfiniBand)]),
        dev(
            "rxe0",
            vec![
                port(1, true, LinkLayer::Ethernet),
                port(2, true, LinkLayer::Ethernet),
            ],
        ),
    ];
    let (name, p) = choose_port(&devices, Some(MIN_MEMLOCK), None).unwrap();
    assert_eq!((name.as_str(), p.port), ("rxe0", 1));
    let (name, p) = choose_port(&devices, None, Some("rxe0")).unwrap();
    assert_eq!((name.as_str(), p.port), ("rxe0", 1));
    let down = [
        dev(
            "mlx5_0",
            vec![
                port(1, false, LinkLayer::InfiniBand),
                port(2, true, LinkLayer::InfiniBand),
            ],
        ),
        dev("mlx5_1", vec![port(1, true, LinkLayer::InfiniBand)]),
    ];
    let (name, p) = choose_port(&down, None, Some("mlx5_0")).unwrap();
    assert_eq!(
        (name.as_str(), p.port),
        ("mlx5_0", 2),
        "the first active port of the pinned device"
    );
}

#[test]
fn completion_statuses_map_to_what_the_transport_tells_apart() {
    assert_eq!(wc_status(IBV_WC_SUCCESS), WcStatus::Success);
    assert_eq!(wc_status(10), WcStatus::RemoteAccessError);
    assert_eq!(wc_status(12), WcStatus::RetryExceeded);
    assert_eq!(wc_status(13), WcStatus::RnrRetryExceeded);
    assert_eq!(wc_status(5), WcStatus::WrFlushError);
    assert_eq!(wc_status(4), WcStatus::LocalError);
    assert_eq!(wc_status(1), WcStatus::LocalError);
    assert_eq!(wc_status(21), WcStatus::Other(21)); // IBV_WC_GENERAL_ERR
    assert_eq!(wc_opcode(1), Some(WcOpcode::Write));
    assert_eq!(wc_opcode(3), Some(WcOpcode::CompareSwap));
    assert_eq!(wc_opcode(4), Some(WcOpcode::FetchAdd));
    assert_eq!(wc_opcode(129), Some(WcOpcode::RecvWithImm));
    assert_eq!(wc_opcode(0), None); // IBV_WC_SEND: the transport never sends
    assert_eq!(link_layer(IBV_LINK_LAYER_ETHERNET), LinkLayer::Ethernet);
    assert_eq!(link_layer(IBV_LINK_LAYER_INFINIBAND), LinkLayer::InfiniBand);
    assert_eq!(
        link_layer(IBV_LINK_LAYER_UNSPECIFIED),
        LinkLayer::InfiniBand
    );
    assert_eq!(mtu_bytes(1), 256);
    assert_eq!(mtu_bytes(5), 4096);
    assert_eq!(mtu_bytes(0), 0);
}

fn wc(status: u32, opcode: u32, flags: u32) -> IbvWc {
    IbvWc {
        wr_id: 42,
        status,
        opcode,
        vendor_err: 0,
        byte_len: 640,
        imm_data: 0x0102_0304u32.to_be(),
        qp_num: 0x11,
        src_qp: 0,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

#[test]
fn work_completions_decode_the_immediate_and_ignore_fields_of_errors() {
    let ok = completion_from_wc(&wc(0, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM)).unwrap();
    assert_eq!(
        ok,
        Completion {
            wr_id: 42,
            status: WcStatus::Success,
            opcode: WcOpcode::RecvWithImm,
            qp_num: 0x11,
            byte_len: 640,
            imm: Some(0x0102_0304),
        }
    );
    // Error completions: opcode undefined in libibverbs (here garbage 77), no immediate.
    let err = completion_from_wc(&wc(IBV_WC_REM_ACCESS_ERR, 77, IBV_WC_WITH_IMM)).unwrap();
    assert_eq!(err.status, WcStatus::RemoteAccessError);
    assert_eq!(
        (err.wr_id, err.qp_num, err.imm, err.byte_len),
        (42, 0x11, None, 0)
    );
    // A successful completion the transport cannot have caused is an error, not a guess.
    assert!(completion_from_wc(&wc(0, 0, 0)).is_err());
}

#[test]
fn attribute_masks_name_what_each_transition_requires() {
    // The values of enum ibv_qp_attr_mask (verbs.h) and the sets rdma-core's man page
    // ibv_modify_qp(3) lists as required for an RC QP.
    assert_eq!(INIT_MASK, 0x1 | 0x10 | 0x20 | 0x8);
    assert_eq!(
        RTR_MASK,
        0x1 | 0x80 | 0x100 | 0x10_0000 | 0x1000 | 0x2_0000 | 0x8000
    );
    assert_eq!(RTS_MASK, 0x1 | 0x200 | 0x400 | 0x800 | 0x1_0000 | 0x2000);
    assert_eq!(access_flags(), 0xf);
}

#[test]
fn rtr_uses_the_lid_on_infiniband_and_the_gid_on_roce() {
    let remote = QpEndpoint {
        qpn: 0x1234,
        psn: 0xabc_def0,
        lid: 9,
        gid: [3; 16],
    };
    let ib = rtr_attr(&port(1, true, LinkLayer::InfiniBand), 5, 0, 16, &remote);
    assert_eq!(
        (ib.qp_state, ib.path_mtu, ib.dest_qp_num),
        (IBV_QPS_RTR, 5, 0x1234)
    );
    assert_eq!(ib.rq_psn, 0xbc_def0, "PSNs are 24 bits");
    assert_eq!(
        (ib.ah_attr.dlid, ib.ah_attr.is_global, ib.ah_attr.port_num),
        (9, 0, 1)
    );
    let roce = rtr_attr(&port(1, true, LinkLayer::Ethernet), 3, 3, 16, &remote);
    assert_eq!(roce.ah_attr.is_global, 1);
    assert_eq!(roce.ah_attr.grh.dgid.raw, [3; 16]);
    assert_eq!(roce.ah_attr.grh.sgid_index, 3);
    assert!(roce.ah_attr.grh.hop_limit > 1);
    let rts = rts_attr(0x1ff_ffff, 16);
    assert_eq!(
        (rts.qp_state, rts.sq_psn, rts.max_rd_atomic),
        (IBV_QPS_RTS, 0xff_ffff, 16)
    );
    assert!(rts.rnr_retry < 7, "7 would retry a missing receive forever");
}

/// A region of the emulation's shape for building work requests (no device needed).
struct FakeRegion;

impl MemoryRegion for FakeRegion {
    fn len(&self) -> usize {
        4096
    }
    fn addr(&self) -> u64 {
        0x10_0000
    }
    fn lkey(&self) -> u32 {
        0x55
    }
    fn rkey(&self) -> u32 {
        0x66
    }
    fn read(&self, _: usize, _: &mut [u8]) {}
    fn write(&self, _: usize, _: &[u8]) {}
    fn load_u64(&self, _: usize) -> u64 {
        0
    }
    fn store_u64(&self, _: usize, _: u64) {}
}

#[test]
fn work_requests_fill_the_send_wr_as_the_header_expects() {
    let mr: Arc<dyn MemoryRegion> = Arc::new(FakeRegion);
    let remote = RemoteAddr {
        addr: 0x20_0000,
        rkey: 0x77,
    };
    let sge = |offset, len| Sge {
        mr: mr.clone(),
        offset,
        len,
    };
    let mut raw_sge = IbvSge {
        addr: 0,
        length: 0,
        lkey: 0,
    };
    let w = send_wr(
        &WorkRequest::WriteWithImm {
            wr_id: 9,
            local: sge(64, 100),
            remote,
            imm: 0xdead_beef,
            signaled: false,
        },
        &mut raw_sge,
    )
    .unwrap();
    assert_eq!((w.wr_id, w.opcode, w.send_flags, w.num_sge), (9, 1, 0, 1));
    assert_eq!(
        w.imm_data,
        0xdead_beefu32.to_be(),
        "immediates go in network order"
    );
    // SAFETY: the rdma member is the one a write sets.
    let rdma = unsafe { w.wr.rdma };
    assert_eq!((rdma.remote_addr, rdma.rkey), (0x20_0000, 0x77));
    assert_eq!(
        (raw_sge.addr, raw_sge.length, raw_sge.lkey),
        (0x10_0040, 100, 0x55)
    );

    let cas = send_wr(
        &WorkRequest::CompareSwap {
            wr_id: 10,
            result: sge(8, 8),
            remote,
            compare: 1,
            swap: 2,
        },
        &mut raw_sge,
    )
    .unwrap();
    assert_eq!(
        (cas.opcode, cas.send_flags),
        (IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_SIGNALED)
    );
    // SAFETY: the atomic member is the one an atomic sets.
    let at = unsafe { cas.wr.atomic };
    assert_eq!(
        (at.remote_addr, at.compare_add, at.swap, at.rkey),
        (0x20_0000, 1, 2, 0x77)
    );

    let fa = send_wr(
        &WorkRequest::FetchAdd {
            wr_id: 11,
            result: sge(0, 8),
            remote,
            add: 5,
        },
        &mut raw_sge,
    )
    .unwrap();
    // SAFETY: as above.
    assert_eq!(
        (fa.opcode, unsafe { fa.wr.atomic.compare_add }),
        (IBV_WR_ATOMIC_FETCH_AND_ADD, 5)
    );

    let empty = send_wr(
        &WorkRequest::Write {
            wr_id: 12,
            local: sge(0, 0),
            remote,
            signaled: true,
        },
        &mut raw_sge,
    )
    .unwrap();
    assert_eq!(
        (empty.num_sge, empty.send_flags),
        (0, IBV_SEND_SIGNALED),
        "zero-length: no SGE"
    );
}
