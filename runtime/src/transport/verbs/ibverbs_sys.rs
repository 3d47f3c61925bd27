//! Hand-written declarations of the parts of `<infiniband/verbs.h>` (rdma-core) the
//! libibverbs provider uses, and the loader that finds its functions at run time.
//!
//! Why by hand and not a `-sys` crate: the `strobe` binary must build and run on machines
//! without rdma-core, so nothing links against libibverbs; the library is opened with
//! `dlopen` when verbs is asked for. The structs are the stable ABI of libibverbs.so.1
//! (rdma-core keeps it since 2016: new fields go into `verbs_context`, never here).
//! `ibverbs_layout_tests.rs` compiles a C program against the installed header and checks
//! every size and offset declared here against it.
//!
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` are `static
//! inline` in verbs.h (they call through `context->ops`), so they have no symbol to look
//! up: the provider calls them through [`IbvContextOps`] exactly as the header does.
//!
//! Why `libc::dlopen` rather than the `libloading` crate: the library must never be
//! unloaded (its device drivers are `dlopen`ed by libibverbs itself and keep pointers into
//! it; rdma-core does not support `dlclose` while any context is open), so the handle is
//! deliberately leaked for the process's lifetime, and what is left of a loader is a dozen
//! `dlsym` calls; one `unsafe` block with the types declared here is clearer than
//! `libloading`'s `Symbol` lifetimes around a library that is never closed.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

/// The soname of libibverbs (rdma-core's ABI 1).
pub const LIBIBVERBS: &str = "libibverbs.so.1";

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

// enum ibv_port_state
pub const IBV_PORT_ACTIVE: u32 = 4;
// IBV_LINK_LAYER_*
pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

// enum ibv_access_flags
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;

// enum ibv_qp_type
pub const IBV_QPT_RC: u32 = 2;

// enum ibv_qp_state
pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;

// enum ibv_qp_attr_mask
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;

/// The attributes `ibv_modify_qp` must be given for RESET → INIT on an RC QP.
pub const INIT_MASK: c_int = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
/// ... for INIT → RTR.
pub const RTR_MASK: c_int = IBV_QP_STATE
    | IBV_QP_AV
    | IBV_QP_PATH_MTU
    | IBV_QP_DEST_QPN
    | IBV_QP_RQ_PSN
    | IBV_QP_MAX_DEST_RD_ATOMIC
    | IBV_QP_MIN_RNR_TIMER;
/// ... for RTR → RTS.
pub const RTS_MASK: c_int = IBV_QP_STATE
    | IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_SQ_PSN
    | IBV_QP_MAX_QP_RD_ATOMIC;

// enum ibv_wr_opcode
pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;

// enum ibv_send_flags
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;

// enum ibv_wc_status
pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;

// enum ibv_wc_opcode
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_COMP_SWAP: u32 = 3;
pub const IBV_WC_FETCH_ADD: u32 = 4;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;

// enum ibv_wc_flags
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;

/// `struct _ibv_device_ops` (two unused compat slots).
#[repr(C)]
pub struct IbvDeviceOps {
    pub _dummy1: *const c_void,
    pub _dummy2: *const c_void,
}

/// `struct ibv_device`.
#[repr(C)]
pub struct IbvDevice {
    pub _ops: IbvDeviceOps,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

pub type PollCqFn = unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int;
pub type ReqNotifyCqFn = unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int;
pub type PostSendFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int;
pub type PostRecvFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;

/// `struct ibv_context_ops`: 32 function pointers, of which the data path uses four (the
/// ones the header's `static inline` wrappers call). The others are compat slots.
#[repr(C)]
pub struct IbvContextOps {
    pub _before_poll_cq: [*const c_void; 11],
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    pub _before_post_send: [*const c_void; 12],
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _after_post_recv: [*const c_void; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: IbvContextOps,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_device_attr` (what `ibv_query_device` fills).
#[repr(C)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr`.
#[repr(C)]
pub struct IbvPortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `union ibv_gid` (the raw view; the `global` view is the same 16 bytes as two
/// `__be64`, which makes the union, and every struct holding one, 8-byte aligned).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
pub struct IbvQpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvRdmaWr {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAtomicWr {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of `struct ibv_send_wr` (declared for the union's size only).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvUdWr {
    pub ah: *mut c_void,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrUnion {
    pub rdma: IbvRdmaWr,
    pub atomic: IbvAtomicWr,
    pub ud: IbvUdWr,
}

/// `struct ibv_send_wr`. The anonymous unions of the header get names here: `imm` holds
/// `imm_data` (network byte order), `qp_type` the XRC SRQ number, and `_bind_mw_tso` the
/// memory-window/TSO union the transport never uses (48 bytes: a pointer, an rkey and an
/// `ibv_mw_bind_info`).
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub wr: IbvSendWrUnion,
    pub qp_type_remote_srqn: u32,
    pub _bind_mw_tso: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`. `imm_data` is the header's anonymous union (network byte order).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// Declares [`IbvLib`] (one field per function) and its resolver from one list, so the
/// type each symbol is transmuted to is, by construction, the field's declared type.
macro_rules! ibv_functions {
    ($($(#[$doc:meta])* $field:ident = $symbol:literal: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The exported functions of libibverbs.so.1 the provider calls (their default
        /// symbol versions, as a program linked against the current header would get).
        pub struct IbvLib {
            $($(#[$doc])* pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl IbvLib {
            fn resolve(
                sym: impl Fn(&'static str) -> Result<*mut c_void, LoadError>,
            ) -> Result<IbvLib, LoadError> {
                Ok(IbvLib {
                    $($field: {
                        let p = sym($symbol)?;
                        // SAFETY: the symbol is libibverbs' exported function of that name,
                        // whose C prototype in verbs.h is this function type (checked by
                        // hand against the header; the argument structs' layouts are
                        // checked by ibverbs_layout_tests.rs). Function and data pointers
                        // have the same size on every platform rdma-core supports.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p)
                        }
                    },)*
                })
            }
        }
    };
}

ibv_functions! {
    get_device_list = "ibv_get_device_list": fn(*mut c_int) -> *mut *mut IbvDevice;
    free_device_list = "ibv_free_device_list": fn(*mut *mut IbvDevice);
    open_device = "ibv_open_device": fn(*mut IbvDevice) -> *mut IbvContext;
    close_device = "ibv_close_device": fn(*mut IbvContext) -> c_int;
    query_device = "ibv_query_device": fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int;
    /// The exported `ibv_query_port`: the header's inline wrapper falls back to it (with
    /// the struct zeroed first) when the context has no extended `query_port`; it fills the
    /// same `struct ibv_port_attr`.
    query_port = "ibv_query_port": fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int;
    query_gid = "ibv_query_gid": fn(*mut IbvContext, u8, c_int, *mut IbvGid) -> c_int;
    alloc_pd = "ibv_alloc_pd": fn(*mut IbvContext) -> *mut IbvPd;
    dealloc_pd = "ibv_dealloc_pd": fn(*mut IbvPd) -> c_int;
    reg_mr = "ibv_reg_mr": fn(*mut IbvPd, *mut c_void, usize, c_int) -> *mut IbvMr;
    dereg_mr = "ibv_dereg_mr": fn(*mut IbvMr) -> c_int;
    create_comp_channel = "ibv_create_comp_channel": fn(*mut IbvContext) -> *mut IbvCompChannel;
    destroy_comp_channel = "ibv_destroy_comp_channel": fn(*mut IbvCompChannel) -> c_int;
    create_cq = "ibv_create_cq":
        fn(*mut IbvContext, c_int, *mut c_void, *mut IbvCompChannel, c_int) -> *mut IbvCq;
    destroy_cq = "ibv_destroy_cq": fn(*mut IbvCq) -> c_int;
    get_cq_event = "ibv_get_cq_event":
        fn(*mut IbvCompChannel, *mut *mut IbvCq, *mut *mut c_void) -> c_int;
    ack_cq_events = "ibv_ack_cq_events": fn(*mut IbvCq, c_uint);
    create_qp = "ibv_create_qp": fn(*mut IbvPd, *mut IbvQpInitAttr) -> *mut IbvQp;
    modify_qp = "ibv_modify_qp": fn(*mut IbvQp, *mut IbvQpAttr, c_int) -> c_int;
    destroy_qp = "ibv_destroy_qp": fn(*mut IbvQp) -> c_int;
}

/// Why the library could not be loaded: the one line the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` found no such library.
    NotFound { library: String, detail: String },
    /// The library is there but lacks a function (a too-old or foreign libibverbs).
    MissingSymbol {
        library: String,
        symbol: &'static str,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound { library, .. } => {
                write!(f, "{library} not found (install rdma-core / libibverbs1)")
            }
            LoadError::MissingSymbol { library, symbol } => write!(
                f,
                "{library} has no {symbol} (rdma-core too old? strobe needs rdma-core 17 or newer)"
            ),
        }
    }
}

/// The last `dlerror()` text, if any.
fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc, valid until
    // the next dl* call on this thread; it is copied out at once.
    unsafe {
        let msg = libc::dlerror();
        if msg.is_null() {
            String::new()
        } else {
            CStr::from_ptr(msg).to_string_lossy().into_owned()
        }
    }
}

impl IbvLib {
    /// Opens `library` (normally [`LIBIBVERBS`]) and looks up every function. The handle is
    /// never closed (see the module doc).
    pub fn load(library: &str) -> Result<IbvLib, LoadError> {
        let name = CString::new(library).map_err(|_| LoadError::NotFound {
            library: library.to_string(),
            detail: "name contains NUL".to_string(),
        })?;
        // SAFETY: `name` is a valid C string; RTLD_NOW resolves everything up front so a
        // broken install fails here, not in a later call; RTLD_LOCAL keeps its symbols
        // out of the global namespace (the MPI program's own libraries are unaffected).
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(LoadError::NotFound {
                library: library.to_string(),
                detail: dlerror_text(),
            });
        }
        let sym = |symbol: &'static str| -> Result<*mut c_void, LoadError> {
            let c = CString::new(symbol).expect("symbol names have no NUL");
            // SAFETY: `handle` is a live dlopen handle (never closed) and `c` a C string.
            let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
            if p.is_null() {
                Err(LoadError::MissingSymbol {
                    library: library.to_string(),
                    symbol,
                })
            } else {
                Ok(p)
            }
        };
        IbvLib::resolve(sym)
    }
}

/// An `ibv_mtu` value in bytes (0 for values the header does not define).
pub fn mtu_bytes(mtu: u32) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// A `char[N]` name field as a string (up to its NUL).
pub fn c_name(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
