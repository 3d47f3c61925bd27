//! Reductions: Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan, Reduce_local, and
//! user-defined ops.
//!
//! Predefined ops on types the runtime knows run in the node manager (the RM microphase),
//! as for Rust programs. The node manager cannot call user code, so reductions with a
//! user op (`MPI_Op_create`), and those on `long double` types (no Rust type), run on the
//! rank side, deterministically: contributions are gathered to one rank over the runtime's
//! collectives, combined there strictly in rank order (`x0 op x1 op ... op xn-1`, which
//! respects non-commutative ops), and the result is broadcast or scattered.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use strobe_runtime::calls::Call;

use strobe_runtime::api::{self, Comm};
use strobe_runtime::datatype::{ElemType, ReduceOp};

use crate::coll::check_root;
use crate::comm::comm_of;
use crate::consts::*;
use crate::datatype::{comm_type, ElemKind, Prim, TypeInfo};
use crate::error::{entry, fail, MpiResult};
use crate::icoll::{run, then, Mode, Outcome};
use crate::state::{st, UserOp};
use crate::util::{array, count, in_place, Bytes, RawBool, RawByte};

extern "C" {
    fn strobe_ld_reduce(op: c_int, inv: *const c_void, inout: *mut c_void, n: usize) -> c_int;
    fn strobe_ldi_reduce(op: c_int, inv: *const c_void, inout: *mut c_void, n: usize) -> c_int;
    fn strobe_complex_prod(kind: c_int, inv: *const c_void, inout: *mut c_void, n: usize) -> c_int;
}

type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut MpiDatatype);

/// Run `$body` with `$T` the Rust type of runtime element type `$e`.
macro_rules! with_elem {
    ($e:expr, |$T:ident| $body:expr) => {{
        match $e {
            ElemType::Byte => {
                type $T = RawByte;
                $body
            }
            ElemType::I8 => {
                type $T = i8;
                $body
            }
            ElemType::I16 => {
                type $T = i16;
                $body
            }
            ElemType::I32 => {
                type $T = i32;
                $body
            }
            ElemType::I64 => {
                type $T = i64;
                $body
            }
            ElemType::U8 => {
                type $T = u8;
                $body
            }
            ElemType::U16 => {
                type $T = u16;
                $body
            }
            ElemType::U32 => {
                type $T = u32;
                $body
            }
            ElemType::U64 => {
                type $T = u64;
                $body
            }
            ElemType::F32 => {
                type $T = f32;
                $body
            }
            ElemType::F64 => {
                type $T = f64;
                $body
            }
            ElemType::Bool => {
                type $T = RawBool;
                $body
            }
            ElemType::FloatInt => {
                type $T = api::FloatInt;
                $body
            }
            ElemType::DoubleInt => {
                type $T = api::DoubleInt;
                $body
            }
            ElemType::LongInt => {
                type $T = api::LongInt;
                $body
            }
            ElemType::TwoInt => {
                type $T = api::TwoInt;
                $body
            }
            ElemType::ShortInt => {
                type $T = api::ShortInt;
                $body
            }
        }
    }};
}

pub const OP_NAMES: [&str; 15] = [
    "MPI_OP_NULL",
    "MPI_MAX",
    "MPI_MIN",
    "MPI_SUM",
    "MPI_PROD",
    "MPI_LAND",
    "MPI_BAND",
    "MPI_LOR",
    "MPI_BOR",
    "MPI_LXOR",
    "MPI_BXOR",
    "MPI_MINLOC",
    "MPI_MAXLOC",
    "MPI_REPLACE",
    "MPI_NO_OP",
];

pub fn builtin(op: MpiOp) -> Option<ReduceOp> {
    use ReduceOp::*;
    Some(match op {
        1 => Max,
        2 => Min,
        3 => Sum,
        4 => Prod,
        5 => Land,
        6 => Band,
        7 => Lor,
        8 => Bor,
        9 => Lxor,
        10 => Bxor,
        11 => MinLoc,
        12 => MaxLoc,
        13 => Replace,
        14 => NoOp,
        _ => return None,
    })
}

#[derive(Clone, Copy)]
pub enum Local {
    User(UserOp),
    LongDouble(c_int),
    LongDoubleInt(c_int),
    /// `MPI_PROD` on a complex type: 0 float, 1 double, 2 long double parts.
    ComplexProd(c_int),
}

#[derive(Clone, Copy)]
pub enum Plan {
    /// Reduced by the node manager.
    Node(ReduceOp, ElemType),
    /// Reduced on the rank side.
    Local(Local),
}

pub fn plan(op: MpiOp, ty: &TypeInfo) -> MpiResult<Plan> {
    if let Some(b) = builtin(op) {
        let name = OP_NAMES[op as usize];
        let ok = |v: bool| {
            if v {
                Ok(())
            } else {
                Err(crate::error::MpiErr::new(
                    class::OP,
                    format!("{name} is not defined on {}", ty.display_name()),
                ))
            }
        };
        return match ty.elem {
            ElemKind::Uniform(Prim::Rt(e)) => {
                ok(strobe_runtime::ops::op_defined(b, e))?;
                Ok(Plan::Node(b, e))
            }
            ElemKind::Uniform(Prim::LongDouble) => {
                // The logical ops too (5, 7, 9), as on the other floating types.
                ok(matches!(op, 1..=5 | 7 | 9 | 13 | 14))?;
                Ok(Plan::Local(Local::LongDouble(op)))
            }
            ElemKind::Uniform(Prim::LongDoubleInt) => {
                ok(matches!(op, 11..=14))?;
                Ok(Plan::Local(Local::LongDoubleInt(op)))
            }
            // Complex: a sum (or replace, no-op) is the runtime's on the parts, in the
            // order it reduces any array; the product is C's, on the rank side.
            ElemKind::Uniform(Prim::Complex(e)) => match op {
                4 => Ok(Plan::Local(Local::ComplexProd(c_int::from(
                    e == ElemType::F64,
                )))),
                _ => {
                    ok(matches!(op, 3 | 13 | 14))?;
                    Ok(Plan::Node(b, e))
                }
            },
            ElemKind::Uniform(Prim::LongDoubleComplex) => match op {
                4 => Ok(Plan::Local(Local::ComplexProd(2))),
                _ => {
                    ok(matches!(op, 3 | 13 | 14))?;
                    Ok(Plan::Local(Local::LongDouble(op)))
                }
            },
            ElemKind::Empty => Ok(Plan::Node(ReduceOp::NoOp, ElemType::Byte)),
            ElemKind::Mixed => fail!(
                class::OP,
                "{name} is not defined on a datatype mixing different basic types"
            ),
        };
    }
    if op == OP_NULL {
        fail!(class::OP, "MPI_OP_NULL is not an operation");
    }
    match st().ops.get(&op) {
        Some(u) => Ok(Plan::Local(Local::User(*u))),
        None => fail!(class::OP, "invalid op handle {op}"),
    }
}

/// A scratch buffer holding `count` elements of `ty` in their memory layout.
pub struct Layout {
    buf: Bytes,
    shift: usize,
}

impl Layout {
    pub fn new(ty: &TypeInfo, count: usize) -> Layout {
        let last = (count.max(1) as isize - 1) * ty.extent;
        let lo = 0.min(ty.true_lb).min(last + ty.true_lb);
        let hi = ty.true_ub.max(last + ty.true_ub).max(0);
        Layout {
            buf: Bytes::zeroed((hi - lo) as usize),
            shift: (-lo) as usize,
        }
    }
    pub fn base(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().wrapping_add(self.shift)
    }
}

/// `x = acc op x` on packed data of `count` elements of `ty`.
pub fn combine(
    l: Local,
    ty: &Arc<TypeInfo>,
    dt: MpiDatatype,
    count: usize,
    acc: &[u8],
    x: &mut Bytes,
) -> MpiResult {
    match l {
        Local::LongDouble(op) | Local::LongDoubleInt(op) => {
            let (f, sz): (
                unsafe extern "C" fn(c_int, *const c_void, *mut c_void, usize) -> c_int,
                usize,
            ) = match l {
                Local::LongDouble(_) => (strobe_ld_reduce, 16),
                _ => (strobe_ldi_reduce, 32),
            };
            let a = copy_of(acc);
            // SAFETY: both buffers hold x.len() bytes of 16-aligned long double data.
            let ok = unsafe {
                f(
                    op,
                    a.as_ptr() as *const c_void,
                    x.as_mut_ptr() as *mut c_void,
                    x.len() / sz,
                )
            };
            if ok == 0 {
                fail!(class::OP, "op {op} is not defined on long double types");
            }
        }
        Local::ComplexProd(kind) => {
            let a = copy_of(acc);
            let part = [4, 8, 16][kind as usize];
            // SAFETY: both buffers hold x.len() bytes of 16-aligned complex numbers.
            let ok = unsafe {
                strobe_complex_prod(
                    kind,
                    a.as_ptr() as *const c_void,
                    x.as_mut_ptr() as *mut c_void,
                    x.len() / (2 * part),
                )
            };
            if ok == 0 {
                fail!(class::INTERN, "complex product of kind {kind}");
            }
        }
        Local::User(u) => {
            // SAFETY: the program registered this address as an MPI_User_function.
            let f: UserFn = unsafe { std::mem::transmute::<usize, UserFn>(u.func) };
            let mut len = c_int::try_from(count).unwrap_or(c_int::MAX);
            let mut d = dt;
            if ty.dense_for(count) {
                let mut a = copy_of(acc);
                // SAFETY: user callback on two buffers of `count` elements of `dt`.
                unsafe {
                    f(
                        a.as_mut_ptr() as *mut c_void,
                        x.as_mut_ptr() as *mut c_void,
                        &mut len,
                        &mut d,
                    )
                };
            } else {
                let mut la = Layout::new(ty, count);
                let mut lx = Layout::new(ty, count);
                // SAFETY: the layouts hold `count` elements of `ty`.
                unsafe {
                    ty.unpack(acc, acc.len(), la.base(), count);
                    ty.unpack(x.as_slice(), x.len(), lx.base(), count);
                    f(
                        la.base() as *mut c_void,
                        lx.base() as *mut c_void,
                        &mut len,
                        &mut d,
                    );
                    *x = ty.pack(lx.base(), count);
                }
            }
        }
    }
    Ok(())
}

pub fn copy_of(b: &[u8]) -> Bytes {
    let mut c = Bytes::zeroed(b.len());
    c.as_mut_slice().copy_from_slice(b);
    c
}

/// Every rank's contribution at `root`, in rank order (`None` elsewhere).
fn gather_all(c: &Comm, mine: &Bytes, root: c_int) -> MpiResult<Option<Vec<Bytes>>> {
    let n = c.size() as usize;
    let len = mine.len();
    if c.rank() != root {
        c.gather(mine.as_raw(), None, root)?;
        return Ok(None);
    }
    let mut all = Bytes::zeroed(len * n);
    c.gather(mine.as_raw(), Some(all.as_raw_mut()), root)?;
    Ok(Some(
        (0..n)
            .map(|i| copy_of(&all.as_slice()[i * len..(i + 1) * len]))
            .collect(),
    ))
}

/// Rank-side prefix reductions at `root`: element i is `x0 op ... op xi`.
fn local_prefixes(
    c: &Comm,
    l: Local,
    ty: &Arc<TypeInfo>,
    dt: MpiDatatype,
    k: usize,
    mine: &Bytes,
    root: c_int,
) -> MpiResult<Option<Vec<Bytes>>> {
    let Some(mut xs) = gather_all(c, mine, root)? else {
        return Ok(None);
    };
    for i in 1..xs.len() {
        let (lo, hi) = xs.split_at_mut(i);
        combine(l, ty, dt, k, lo[i - 1].as_slice(), &mut hi[0])?;
    }
    Ok(Some(xs))
}

/// The full rank-side reduction, on every rank (reduced at rank 0, then broadcast).
fn local_allreduce(
    c: &Comm,
    l: Local,
    ty: &Arc<TypeInfo>,
    dt: MpiDatatype,
    k: usize,
    mine: &Bytes,
) -> MpiResult<Bytes> {
    let mut res = match local_prefixes(c, l, ty, dt, k, mine, 0)? {
        Some(mut p) => p.pop().expect("at least one rank"),
        None => Bytes::zeroed(mine.len()),
    };
    c.bcast(res.as_raw_mut(), 0)?;
    Ok(res)
}

/// Pack `k` elements of the input (the receive buffer when `MPI_IN_PLACE`).
///
/// # Safety
/// The buffer used (`sbuf`, or `rbuf` for `MPI_IN_PLACE`) must be NULL or hold `k`
/// readable elements of `ty`.
pub unsafe fn input(
    sbuf: *const c_void,
    rbuf: *const c_void,
    k: usize,
    ty: &TypeInfo,
) -> MpiResult<Bytes> {
    let src = if in_place(sbuf) { rbuf } else { sbuf };
    if in_place(src) {
        fail!(class::BUFFER, "MPI_IN_PLACE is not allowed here");
    }
    if src.is_null() && k > 0 && ty.size > 0 {
        fail!(class::BUFFER, "buffer is NULL but count is {k}");
    }
    // SAFETY: MPI's contract: the buffer holds `k` elements of `ty`.
    Ok(unsafe { ty.pack(src as *const u8, k) })
}

/// Unpack the result into the caller's receive buffer.
///
/// # Safety
/// `rbuf` must be NULL or hold `k` writable elements of `ty`.
pub unsafe fn output(res: &Bytes, rbuf: *mut c_void, k: usize, ty: &TypeInfo) -> MpiResult {
    if in_place(rbuf) {
        fail!(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed as the receive buffer"
        );
    }
    if rbuf.is_null() && k > 0 && ty.size > 0 {
        fail!(class::BUFFER, "recvbuf is NULL but count is {k}");
    }
    // SAFETY: MPI's contract: the receive buffer holds `k` elements of `ty`.
    unsafe { ty.unpack(res.as_slice(), res.len(), rbuf as *mut u8, k) };
    Ok(())
}

struct Args {
    c: Comm,
    k: usize,
    ty: Arc<TypeInfo>,
    plan: Plan,
}

fn args(comm: MpiComm, n: c_int, dt: MpiDatatype, op: MpiOp) -> MpiResult<Args> {
    let c = comm_of(comm)?;
    let k = count(n, "count")?;
    let ty = comm_type(dt)?;
    let plan = plan(op, &ty)?;
    Ok(Args { c, k, ty, plan })
}

/// # Safety
/// The buffers follow MPI's rules for `MPI_Reduce`, valid until completion.
pub unsafe fn reduce(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = crate::intercomm::inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { crate::intercoll::reduce(&x, sbuf, rbuf, n, dt, op, root) };
    }
    let a = args(comm, n, dt, op)?;
    check_root(&a.c, root)?;
    let me_root = a.c.rank() == root;
    // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the operation
    // completes (MPI contract).
    let mine = unsafe {
        input(
            sbuf,
            if me_root { rbuf } else { std::ptr::null_mut() },
            a.k,
            &a.ty,
        )
    }?;
    let (k, ty) = (a.k, a.ty.clone());
    match a.plan {
        Plan::Node(o, e) if me_root => {
            let mut res = Bytes::zeroed(mine.len());
            let posted = run(mode, || {
                with_elem!(e, |T| a.c.reduce::<T>(
                    mine.typed(),
                    Some(res.typed_mut()),
                    o,
                    root
                ))
            })?;
            then(posted, move || {
                drop(mine);
                // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched
                // until the operation completes (MPI contract).
                unsafe { output(&res, rbuf, k, &ty) }
            })
        }
        Plan::Node(o, e) => {
            let posted = run(mode, || {
                with_elem!(e, |T| a.c.reduce::<T>(mine.typed(), None, o, root))
            })?;
            then(posted, move || {
                drop(mine);
                Ok(())
            })
        }
        Plan::Local(l) => {
            if let Some(mut p) = local_prefixes(&a.c, l, &a.ty, dt, a.k, &mine, root)? {
                // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched
                // until the operation completes (MPI contract).
                unsafe { output(&p.pop().expect("at least one rank"), rbuf, a.k, &a.ty) }?;
            }
            Ok(Outcome::Done)
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    root: c_int,
    comm: MpiComm,
) -> c_int {
    entry(Call::Reduce, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { reduce(Mode::Blocking, sbuf, rbuf, n, dt, op, root, comm) }.map(drop)
    })
}

/// # Safety
/// The buffers follow MPI's rules for `MPI_Allreduce`, valid until completion.
pub unsafe fn allreduce(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    if let Some(x) = crate::intercomm::inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { crate::intercoll::allreduce(&x, sbuf, rbuf, n, dt, op) };
    }
    let a = args(comm, n, dt, op)?;
    // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the operation
    // completes (MPI contract).
    let mine = unsafe { input(sbuf, rbuf, a.k, &a.ty) }?;
    let (k, ty) = (a.k, a.ty.clone());
    let (posted, res) = match a.plan {
        Plan::Node(o, e) => {
            let mut res = Bytes::zeroed(mine.len());
            let posted = run(mode, || {
                with_elem!(e, |T| a.c.allreduce::<T>(mine.typed(), res.typed_mut(), o))
            })?;
            (posted, res)
        }
        Plan::Local(l) => (None, local_allreduce(&a.c, l, &a.ty, dt, a.k, &mine)?),
    };
    then(posted, move || {
        drop(mine);
        // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until
        // the operation completes (MPI contract).
        unsafe { output(&res, rbuf, k, &ty) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Allreduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    entry(Call::Allreduce, comm, || {
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules.
        unsafe { allreduce(Mode::Blocking, sbuf, rbuf, n, dt, op, comm) }.map(drop)
    })
}

/// # Safety
/// `sbuf` and `rbuf` must be NULL, `MPI_IN_PLACE` (`sbuf`) or hold `n` elements of `dt`, `rbuf` writable (MPI's rules for reduction buffers).
pub unsafe fn scan(
    mode: Mode,
    exclusive: bool,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> MpiResult<Outcome> {
    crate::intercoll::unsupported(comm, if exclusive { "MPI_Exscan" } else { "MPI_Scan" })?;
    let a = args(comm, n, dt, op)?;
    // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the operation
    // completes (MPI contract).
    let mine = unsafe { input(sbuf, rbuf, a.k, &a.ty) }?;
    let me = a.c.rank();
    let mut res = Bytes::zeroed(mine.len());
    let posted = match a.plan {
        Plan::Node(o, e) => run(mode, || {
            if exclusive {
                with_elem!(e, |T| a.c.exscan::<T>(mine.typed(), res.typed_mut(), o))
            } else {
                with_elem!(e, |T| a.c.scan::<T>(mine.typed(), res.typed_mut(), o))
            }
        })?,
        Plan::Local(l) => {
            let pre = local_prefixes(&a.c, l, &a.ty, dt, a.k, &mine, 0)?;
            let send = pre.map(|p| {
                let len = mine.len();
                let mut all = Bytes::zeroed(len * p.len());
                for (i, b) in p.iter().enumerate() {
                    // Exscan: rank i gets the prefix of ranks 0..i-1.
                    let dst = if exclusive { i + 1 } else { i };
                    if dst < p.len() {
                        all.as_mut_slice()[dst * len..(dst + 1) * len]
                            .copy_from_slice(b.as_slice());
                    }
                }
                all
            });
            a.c.scatter(send.as_ref().map(|s| s.as_raw()), res.as_raw_mut(), 0)?;
            None
        }
    };
    let (k, ty) = (a.k, a.ty.clone());
    then(posted, move || {
        drop(mine);
        // Exscan leaves rank 0's receive buffer untouched.
        if !(exclusive && me == 0) {
            // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched
            // until the operation completes (MPI contract).
            unsafe { output(&res, rbuf, k, &ty) }?;
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Scan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    entry(Call::Scan, comm, || {
        unsafe { scan(Mode::Blocking, false, sbuf, rbuf, n, dt, op, comm) }.map(drop)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Exscan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
    entry(Call::Exscan, comm, || {
        unsafe { scan(Mode::Blocking, true, sbuf, rbuf, n, dt, op, comm) }.map(drop)
    })
}

/// Reduce_scatter with per-rank element counts (`counts` in datatype elements).
///
/// # Safety
/// As for `MPI_Reduce_scatter`: `sbuf` holds the sum of `counts` elements of `dt` (or is `MPI_IN_PLACE`), `rbuf` this rank's count, writable.
pub unsafe fn reduce_scatter(
    mode: Mode,
    comm: MpiComm,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    counts: &[usize],
    dt: MpiDatatype,
    op: MpiOp,
    block: bool,
) -> MpiResult<Outcome> {
    if let Some(x) = crate::intercomm::inter_of(comm) {
        // SAFETY: this function's contract.
        return unsafe { crate::intercoll::reduce_scatter(&x, sbuf, rbuf, counts, dt, op) };
    }
    let total: usize = counts.iter().sum();
    let a = args(comm, c_int::try_from(total).unwrap_or(c_int::MAX), dt, op)?;
    let me = a.c.rank() as usize;
    let mine_k = counts[me];
    let off: usize = counts[..me].iter().sum::<usize>() * a.ty.size;
    let mine = if in_place(sbuf) {
        // SAFETY: `rbuf` is a C send buffer of the given count and type, valid until the operation
        // completes (MPI contract).
        unsafe { input(rbuf, rbuf, total, &a.ty) }?
    } else {
        // SAFETY: `sbuf` is a C send buffer of the given count and type, valid until the operation
        // completes (MPI contract).
        unsafe { input(sbuf, rbuf, total, &a.ty) }?
    };
    let (posted, res) = match a.plan {
        Plan::Node(o, e) => {
            let mut res = Bytes::zeroed(mine_k * a.ty.size);
            let per = a.ty.size / e.size().max(1);
            let posted = run(mode, || {
                if block {
                    with_elem!(e, |T| a.c.reduce_scatter_block::<T>(
                        mine.typed(),
                        res.typed_mut(),
                        o
                    ))
                } else {
                    let tc: Vec<usize> = counts.iter().map(|k| k * per).collect();
                    with_elem!(e, |T| a.c.reduce_scatter::<T>(
                        mine.typed(),
                        res.typed_mut(),
                        &tc,
                        o
                    ))
                }
            })?;
            (posted, res)
        }
        Plan::Local(l) => {
            let all = local_allreduce(&a.c, l, &a.ty, dt, total, &mine)?;
            (
                None,
                copy_of(&all.as_slice()[off..off + mine_k * a.ty.size]),
            )
        }
    };
    let ty = a.ty.clone();
    then(posted, move || {
        drop(mine);
        // SAFETY: `rbuf` is a C receive buffer of the given count and type, untouched until
        // the operation completes (MPI contract).
        unsafe { output(&res, rbuf, mine_k, &ty) }
    })
}

/// The size of `comm`'s (local) group: the number of `recvcounts` a reduce-scatter takes.
pub fn local_size(comm: MpiComm) -> MpiResult<usize> {
    Ok(match crate::intercomm::inter_of(comm) {
        Some(x) => x.local_members.len(),
        None => comm_of(comm)?.size() as usize,
    })
}

/// `MPI_Reduce_scatter`'s `recvcounts`, one per rank.
///
/// # Safety
/// `rcounts` is NULL or holds one count per rank of `comm`.
pub unsafe fn scatter_counts(comm: MpiComm, rcounts: *const c_int) -> MpiResult<Vec<usize>> {
    let n = local_size(comm)?;
    // SAFETY: `rcounts` is a C input array of `n` elements, or NULL (MPI contract).
    let rc = unsafe { array(rcounts, n, "recvcounts") }?;
    rc.iter().map(|&k| count(k, "recvcount")).collect()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_scatter(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    entry(Call::ReduceScatter, comm, || {
        // SAFETY: `rcounts` is a C input array of one count per rank, or NULL (MPI contract).
        let counts = unsafe { scatter_counts(comm, rcounts) }?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { reduce_scatter(Mode::Blocking, comm, sbuf, rbuf, &counts, dt, op, false) }
            .map(drop)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rn: c_int,
    dt: MpiDatatype,
    op: MpiOp,
    comm: MpiComm,
) -> c_int {
    entry(Call::ReduceScatterBlock, comm, || {
        let n = local_size(comm)?;
        let k = count(rn, "recvcount")?;
        // SAFETY: the pointer arguments are this C entry point's own, under MPI's rules for them.
        unsafe { reduce_scatter(Mode::Blocking, comm, sbuf, rbuf, &vec![k; n], dt, op, true) }
            .map(drop)
    })
}
