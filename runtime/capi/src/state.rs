//! The C layer's handle tables, behind one mutex. Never hold the guard while user code
//! runs (user ops, attribute callbacks) or while blocking in the runtime.

use std::collections::{BTreeMap, HashMap};
use std::os::raw::c_int;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use strobe_runtime::api;

use crate::consts::*;
use crate::datatype::{complex_types, predefined_types, TypeInfo};
use crate::request::ReqEntry;

pub struct CommEntry {
    pub comm: api::Comm,
    pub errhandler: MpiErrhandler,
    pub name: String,
    /// keyval -> attribute value (a `void *`, kept as an address).
    pub attrs: BTreeMap<c_int, usize>,
}

#[derive(Clone, Copy)]
pub struct Keyval {
    /// `MPI_Comm_copy_attr_function *` as an address; 0 = NULL_COPY_FN, 1 = DUP_FN.
    pub copy: usize,
    /// `MPI_Comm_delete_attr_function *` as an address; 0 = NULL_DELETE_FN.
    pub delete: usize,
    pub extra: usize,
}

#[derive(Clone, Copy)]
pub struct UserOp {
    /// `MPI_User_function *` as an address.
    pub func: usize,
    pub commute: bool,
}

/// Tables keyed by request handle: the handles are this process's own sequential numbers,
/// so a multiplicative hash does (SipHash, with the rank's completion table, was ~8% of the
/// ranks' time at a window of 64 one-byte messages; docs/benchmarks-detail.md).
pub type ReqMap<V> =
    HashMap<MpiRequest, V, std::hash::BuildHasherDefault<strobe_runtime::rank::RequestHasher>>;

#[derive(Default)]
pub struct State {
    pub initialized: bool,
    pub finalized: bool,
    pub thread_level: c_int,
    pub comms: HashMap<MpiComm, CommEntry>,
    next_comm: MpiComm,
    pub groups: HashMap<MpiGroup, Arc<[u32]>>,
    next_group: MpiGroup,
    pub types: HashMap<MpiDatatype, Arc<TypeInfo>>,
    next_type: MpiDatatype,
    pub ops: HashMap<MpiOp, UserOp>,
    next_op: MpiOp,
    pub reqs: ReqMap<ReqEntry>,
    next_req: MpiRequest,
    /// Requests freed with `MPI_Request_free` while active: their buffers stay alive here
    /// until they are reaped at `MPI_Finalize`.
    pub detached: Vec<ReqEntry>,
    pub keyvals: HashMap<c_int, Keyval>,
    next_keyval: c_int,
    /// Buffered sends not yet known to be delivered (their copies live here).
    pub bsends: Vec<ReqEntry>,
    /// `MPI_Buffer_attach`: (address, size).
    pub bsend_buffer: Option<(usize, usize)>,
    /// Bytes of the attached buffer held by Bsends not known to be delivered.
    pub bsend_used: usize,
    // ---- requests, messages and info objects (persist.rs, grequest.rs, message.rs, info.rs)
    /// Persistent requests by handle, active or not (an active one is also in `reqs`, or
    /// in `local_reqs` for a buffered send).
    pub persist: ReqMap<crate::persist::PersistSpec>,
    /// Requests the C layer completes itself: generalized requests, and requests complete
    /// at creation (`MPI_Ibsend`, `MPI_Imrecv` of `MPI_MESSAGE_NO_PROC`).
    pub local_reqs: ReqMap<crate::grequest::LocalReq>,
    /// Matched messages (`MPI_Mprobe`, `MPI_Improbe`) not received yet.
    pub messages: HashMap<c_int, crate::message::Message>,
    pub next_message: c_int,
    /// `MPI_Info` objects.
    pub infos: HashMap<c_int, crate::info::InfoObj>,
    pub next_info: c_int,
    /// Hints attached to communicators (`MPI_Comm_set_info`).
    pub comm_infos: HashMap<MpiComm, crate::info::InfoObj>,
    /// Attributes of datatypes: (type, keyval) -> value (attrs_more.rs).
    pub type_attrs: HashMap<(MpiDatatype, c_int), usize>,
    /// Names given with `MPI_Type_set_name` (typex.rs).
    pub type_names: HashMap<MpiDatatype, String>,
    /// User error handlers: handle -> `MPI_Comm_errhandler_function *` (errhan.rs).
    pub errhandlers: HashMap<MpiErrhandler, usize>,
    /// User error classes and codes (errhan.rs).
    pub user_codes: HashMap<c_int, crate::errhan::UserCode>,
    /// Keyvals freed while attributes still use them: how many times (attrs.rs
    /// `free_keyval`).
    pub freed_keyvals: HashMap<c_int, usize>,
    /// When each communicator attribute was first set: deletion runs in reverse order
    /// (attrs.rs `delete_attrs`).
    pub attr_seq: HashMap<(MpiComm, c_int), u64>,
    pub next_attr_seq: u64,
    /// The call that created each request handle (for the leaked-request check at
    /// `MPI_Finalize`), while a table holds the handle ([`forget_request`]).
    pub req_origin: ReqMap<strobe_runtime::calls::Call>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    let mut s = State {
        next_comm: FIRST_USER_COMM,
        next_group: FIRST_USER_GROUP,
        next_type: FIRST_USER_TYPE,
        next_op: FIRST_USER_OP,
        next_req: 1,
        next_keyval: FIRST_USER_KEYVAL,
        ..Default::default()
    };
    for (h, t) in predefined_types().into_iter().chain(complex_types()) {
        s.types.insert(h, Arc::new(t));
    }
    s.groups.insert(GROUP_EMPTY, Arc::from(Vec::new()));
    Mutex::new(s)
});

/// The tables. A panic while the lock was held (caught by the entry wrapper) does not make
/// them unusable: every update is a single insert or remove.
pub fn st() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Next free handle from `next`, skipping those in use (handles wrap after 2^31).
fn fresh<V, S: std::hash::BuildHasher>(
    next: &mut c_int,
    first: c_int,
    used: &HashMap<c_int, V, S>,
) -> c_int {
    loop {
        let h = *next;
        *next = if *next == c_int::MAX {
            first
        } else {
            *next + 1
        };
        if !used.contains_key(&h) {
            return h;
        }
    }
}

pub fn insert_type(t: TypeInfo) -> MpiDatatype {
    let mut g = st();
    let s = &mut *g;
    let h = fresh(&mut s.next_type, FIRST_USER_TYPE, &s.types);
    s.types.insert(h, Arc::new(t));
    h
}

pub fn insert_comm(comm: api::Comm, errhandler: MpiErrhandler) -> MpiComm {
    let mut g = st();
    let s = &mut *g;
    let h = fresh(&mut s.next_comm, FIRST_USER_COMM, &s.comms);
    s.comms.insert(
        h,
        CommEntry {
            comm,
            errhandler,
            name: String::new(),
            attrs: BTreeMap::new(),
        },
    );
    h
}

pub fn insert_group(members: Arc<[u32]>) -> MpiGroup {
    if members.is_empty() {
        return GROUP_EMPTY;
    }
    let mut g = st();
    let s = &mut *g;
    let h = fresh(&mut s.next_group, FIRST_USER_GROUP, &s.groups);
    s.groups.insert(h, members);
    h
}

pub fn insert_op(op: UserOp) -> MpiOp {
    let mut g = st();
    let s = &mut *g;
    let h = fresh(&mut s.next_op, FIRST_USER_OP, &s.ops);
    s.ops.insert(h, op);
    h
}

pub fn insert_req(r: ReqEntry) -> MpiRequest {
    let mut g = st();
    let s = &mut *g;
    let h = fresh_req(s);
    s.reqs.insert(h, r);
    h
}

/// `h` was removed from a request table: forget its origin unless another table still
/// holds it (a persistent request is in `persist` between its activations). Handles are
/// not reused until they wrap, so an origin kept for every completed request grew by one
/// entry per message: 200,000 entries after a 100,000-round-trip ping-pong, whose inserts
/// into the growing map were 5% of the ranks' CPU samples.
pub fn forget_request(s: &mut State, h: MpiRequest) {
    if !s.reqs.contains_key(&h) && !s.persist.contains_key(&h) && !s.local_reqs.contains_key(&h) {
        s.req_origin.remove(&h);
    }
}

/// A request handle no table uses (inactive persistent and local requests are not in
/// `reqs`, so `fresh` alone is not enough).
pub fn fresh_req(s: &mut State) -> MpiRequest {
    loop {
        let h = fresh(&mut s.next_req, 1, &s.reqs);
        if !s.persist.contains_key(&h) && !s.local_reqs.contains_key(&h) {
            if let Some(call) = crate::error::current_call() {
                s.req_origin.insert(h, call);
            }
            return h;
        }
    }
}

pub fn insert_keyval(k: Keyval) -> c_int {
    let mut g = st();
    let s = &mut *g;
    let h = fresh(&mut s.next_keyval, FIRST_USER_KEYVAL, &s.keyvals);
    s.keyvals.insert(h, k);
    h
}

/// The error handler that applies to calls on `comm` (`MPI_COMM_WORLD`'s for unknown
/// handles, fatal before `MPI_Init`).
pub fn errhandler_of(comm: MpiComm) -> MpiErrhandler {
    let s = st();
    s.comms
        .get(&comm)
        .or_else(|| s.comms.get(&COMM_WORLD))
        .map_or(ERRORS_ARE_FATAL, |c| c.errhandler)
}

/// The calls that created the requests still alive (neither completed nor freed), one
/// entry per request, in handle order: what `MPI_Finalize` reports to the checks.
pub fn live_request_origins() -> Vec<Option<strobe_runtime::calls::Call>> {
    let s = st();
    let handles: std::collections::BTreeSet<MpiRequest> = s
        .reqs
        .keys()
        .chain(s.persist.keys())
        .chain(s.local_reqs.keys())
        .copied()
        .collect();
    handles
        .into_iter()
        .map(|h| s.req_origin.get(&h).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_runtime::calls::Call;

    #[test]
    fn a_request_origin_is_forgotten_with_the_last_table_holding_its_handle() {
        let mut s = State::default();
        let status = crate::request::empty_status();
        for h in 1..=3 {
            s.req_origin.insert(h, Call::Isend);
            s.local_reqs.insert(
                h,
                crate::grequest::LocalReq::Done {
                    status,
                    bsend: None,
                },
            );
        }
        // Handle 1 leaves its table; 2 is asked about while a table still holds it (as
        // `persist` holds a persistent request between activations), then leaves; 3 stays.
        s.local_reqs.remove(&1);
        forget_request(&mut s, 1);
        forget_request(&mut s, 2);
        let mut kept: Vec<_> = s.req_origin.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, [2, 3]);
        s.local_reqs.remove(&2);
        forget_request(&mut s, 2);
        assert_eq!(s.req_origin.keys().copied().collect::<Vec<_>>(), [3]);
    }
}
