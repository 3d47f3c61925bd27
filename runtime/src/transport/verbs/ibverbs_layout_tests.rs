//! Every struct declared in `ibverbs_sys.rs`, checked against the installed
//! `<infiniband/verbs.h>`: a C program compiled against the header prints the size and
//! alignment of each struct and the offset of each field declared on the Rust side, and
//! the test compares them with `size_of`/`align_of`/`offset_of!`.
//!
//! The header comes with Debian's `libibverbs-dev` (scripts/ensure-tools.sh installs it);
//! without it the test says so and checks nothing.

use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

use super::ibverbs_sys::*;

const HEADER: &str = "/usr/include/infiniband/verbs.h";

/// One line the C program prints and the Rust side's value for it.
struct Entry {
    /// The C type (`struct ibv_send_wr`).
    c_type: &'static str,
    /// `sizeof`, `alignof`, or a field path as `offsetof` takes it.
    what: String,
    /// The C expression printed.
    c_expr: String,
    rust: usize,
}

macro_rules! shape {
    ($v:ident, $rust:ty, $c:literal) => {
        $v.push(Entry {
            c_type: $c,
            what: "sizeof".into(),
            c_expr: format!("sizeof({})", $c),
            rust: size_of::<$rust>(),
        });
        $v.push(Entry {
            c_type: $c,
            what: "alignof".into(),
            c_expr: format!("_Alignof({})", $c),
            rust: align_of::<$rust>(),
        });
    };
}

macro_rules! field {
    ($v:ident, $rust:ty, $c:literal, $($f:ident).+) => {
        field!($v, $rust, $c, $($f).+ => stringify!($($f).+))
    };
    ($v:ident, $rust:ty, $c:literal, $($f:ident).+ => $cpath:expr) => {{
        let cpath: String = $cpath.replace(' ', "");
        $v.push(Entry {
            c_type: $c,
            c_expr: format!("offsetof({}, {})", $c, cpath),
            what: cpath,
            rust: offset_of!($rust, $($f).+),
        });
    }};
}

macro_rules! fields {
    ($v:ident, $rust:ty, $c:literal: $($($f:ident).+),* $(,)?) => {
        shape!($v, $rust, $c);
        $(field!($v, $rust, $c, $($f).+);)*
    };
}

fn entries() -> Vec<Entry> {
    let mut v = Vec::new();
    fields!(v, IbvDevice, "struct ibv_device": _ops, node_type, transport_type, name,
        dev_name, dev_path, ibdev_path);
    fields!(v, IbvContextOps, "struct ibv_context_ops": poll_cq, req_notify_cq, post_send,
        post_recv);
    field!(v, IbvContextOps, "struct ibv_context_ops", _before_poll_cq => "_compat_query_device");
    field!(v, IbvContextOps, "struct ibv_context_ops", _before_post_send => "_compat_cq_event");
    field!(v, IbvContextOps, "struct ibv_context_ops", _after_post_recv => "_compat_create_ah");
    fields!(v, IbvContext, "struct ibv_context": device, ops, cmd_fd, async_fd,
        num_comp_vectors, mutex, abi_compat);
    fields!(v, IbvDeviceAttr, "struct ibv_device_attr": fw_ver, node_guid, max_mr_size,
        max_qp, max_qp_wr, max_cqe, max_qp_rd_atom, max_qp_init_rd_atom, atomic_cap,
        max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt);
    fields!(v, IbvPortAttr, "struct ibv_port_attr": state, max_mtu, active_mtu, gid_tbl_len,
        port_cap_flags, max_msg_sz, pkey_tbl_len, lid, sm_lid, lmc, phys_state, link_layer,
        flags, port_cap_flags2);
    fields!(v, IbvGid, "union ibv_gid": raw);
    fields!(v, IbvPd, "struct ibv_pd": context, handle);
    fields!(v, IbvMr, "struct ibv_mr": context, pd, addr, length, handle, lkey, rkey);
    fields!(v, IbvCompChannel, "struct ibv_comp_channel": context, fd, refcnt);
    fields!(v, IbvCq, "struct ibv_cq": context, channel, cq_context, handle, cqe, mutex,
        cond, comp_events_completed, async_events_completed);
    fields!(v, IbvQp, "struct ibv_qp": context, qp_context, pd, send_cq, recv_cq, srq,
        handle, qp_num, state, qp_type, mutex, cond, events_completed);
    fields!(v, IbvQpCap, "struct ibv_qp_cap": max_send_wr, max_recv_wr, max_send_sge,
        max_recv_sge, max_inline_data);
    fields!(v, IbvQpInitAttr, "struct ibv_qp_init_attr": qp_context, send_cq, recv_cq, srq,
        cap, qp_type, sq_sig_all);
    fields!(v, IbvGlobalRoute, "struct ibv_global_route": dgid, flow_label, sgid_index,
        hop_limit, traffic_class);
    fields!(v, IbvAhAttr, "struct ibv_ah_attr": grh, dlid, sl, src_path_bits, static_rate,
        is_global, port_num);
    fields!(v, IbvQpAttr, "struct ibv_qp_attr": qp_state, cur_qp_state, path_mtu,
        path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, cap, ah_attr,
        alt_ah_attr, pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining,
        max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt,
        rnr_retry, alt_port_num, alt_timeout, rate_limit, ah_attr.grh.sgid_index,
        ah_attr.is_global);
    fields!(v, IbvSge, "struct ibv_sge": addr, length, lkey);
    fields!(v, IbvSendWr, "struct ibv_send_wr": wr_id, next, sg_list, num_sge, opcode,
        send_flags, imm_data, wr, wr.rdma.remote_addr, wr.rdma.rkey, wr.atomic.remote_addr,
        wr.atomic.compare_add, wr.atomic.swap, wr.atomic.rkey, wr.ud.remote_qkey);
    field!(v, IbvSendWr, "struct ibv_send_wr", qp_type_remote_srqn => "qp_type.xrc.remote_srqn");
    field!(v, IbvSendWr, "struct ibv_send_wr", _bind_mw_tso => "bind_mw");
    fields!(v, IbvRecvWr, "struct ibv_recv_wr": wr_id, next, sg_list, num_sge);
    fields!(v, IbvWc, "struct ibv_wc": wr_id, status, opcode, vendor_err, byte_len, imm_data,
        qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits);
    v
}

/// The C program: one `TYPE WHAT VALUE` line per entry.
fn c_program(entries: &[Entry]) -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         int main(void) {\n",
    );
    for e in entries {
        let _ = writeln!(
            c,
            "    printf(\"%s|%s|%zu\\n\", \"{}\", \"{}\", (size_t){});",
            e.c_type, e.what, e.c_expr
        );
    }
    c.push_str("    return 0;\n}\n");
    c
}

#[test]
fn declared_structs_match_the_installed_verbs_header() {
    if !Path::new(HEADER).exists() {
        eprintln!("skipped: {HEADER} is absent (install libibverbs-dev: scripts/ensure-tools.sh)");
        return;
    }
    let entries = entries();
    let dir = std::env::temp_dir().join(format!("strobe-verbs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c_program(&entries)).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc)
        .arg("-std=gnu11")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        built.status.success(),
        "{cc} failed on the layout program:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8(run.stdout).unwrap();
    let c_values: Vec<usize> = out
        .lines()
        .map(|l| l.rsplit('|').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(c_values.len(), entries.len());
    let wrong: Vec<String> = entries
        .iter()
        .zip(&c_values)
        .filter(|(e, &c)| e.rust != c)
        .map(|(e, c)| format!("{} {}: C {c}, Rust {}", e.c_type, e.what, e.rust))
        .collect();
    assert!(
        wrong.is_empty(),
        "layouts differ from verbs.h:\n{}",
        wrong.join("\n")
    );
    // The constants declared by hand, against the header's enums.
    let consts = [
        ("IBV_QP_STATE", IBV_QP_STATE as i64),
        ("IBV_QP_AV", IBV_QP_AV as i64),
        ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as i64),
        (
            "IBV_QP_MAX_DEST_RD_ATOMIC",
            IBV_QP_MAX_DEST_RD_ATOMIC as i64,
        ),
        (
            "IBV_WC_RECV_RDMA_WITH_IMM",
            IBV_WC_RECV_RDMA_WITH_IMM as i64,
        ),
        ("IBV_WC_RNR_RETRY_EXC_ERR", IBV_WC_RNR_RETRY_EXC_ERR as i64),
        (
            "IBV_WR_ATOMIC_FETCH_AND_ADD",
            IBV_WR_ATOMIC_FETCH_AND_ADD as i64,
        ),
        ("IBV_ACCESS_REMOTE_ATOMIC", IBV_ACCESS_REMOTE_ATOMIC as i64),
        ("IBV_PORT_ACTIVE", IBV_PORT_ACTIVE as i64),
        ("IBV_QPT_RC", IBV_QPT_RC as i64),
        ("IBV_QPS_RTS", IBV_QPS_RTS as i64),
        ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as i64),
        ("IBV_WC_WITH_IMM", IBV_WC_WITH_IMM as i64),
        ("IBV_LINK_LAYER_ETHERNET", IBV_LINK_LAYER_ETHERNET as i64),
        ("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX as i64),
    ];
    check_constants(&cc, &consts);
}

/// Compiles `static_assert`s of each constant against the header: a wrong one fails the
/// build with its name.
fn check_constants(cc: &str, consts: &[(&str, i64)]) {
    let mut c = String::from("#include <assert.h>\n#include <infiniband/verbs.h>\n");
    for (name, value) in consts {
        let _ = writeln!(
            c,
            "static_assert({name} == {value}, \"{name} is not {value}\");"
        );
    }
    let dir = std::env::temp_dir().join(format!("strobe-verbs-consts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("consts.c");
    std::fs::write(&src, c).unwrap();
    let built = Command::new(cc)
        .args(["-std=gnu11", "-fsyntax-only"])
        .arg(&src)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        built.status.success(),
        "constants differ from verbs.h:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
}
