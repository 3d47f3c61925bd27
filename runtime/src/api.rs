//! The Rust API for MPI programs.
//!
//! Every call builds a [`Descriptor`] and posts it through the rank context
//! ([`crate::rank::RankCtx`]): non-blocking calls return a [`Request`] at once, blocking
//! calls sleep until the completion arrives at a slice boundary. Ranks are always
//! communicator-relative. Buffers are passed as slices of [`Equivalence`] types and reach
//! the runtime as (address, bytes); the DMA Helper reads and writes them directly.
//!
//! Arguments are checked on the rank side *before* anything is posted (bad ranks, tags,
//! counts tables, buffers too small, ops undefined on the element type), so an invalid call
//! returns an error without a trace in the schedule. Errors the runtime finds (truncation,
//! collective mismatches, ...) come back in the completion and are mapped to [`Error`].
//!
//! ```no_run
//! use strobe_runtime::api;
//! let world = api::init().expect("init");
//! let mut x = [world.rank() as i32];
//! world.allreduce_in_place(&mut x, api::ReduceOp::Sum).expect("allreduce");
//! api::finalize();
//! ```

use std::marker::PhantomData;
use std::sync::Arc;

pub use crate::datatype::{ElemType, ReduceOp};
pub use crate::descriptor::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
pub use crate::rank::InitError;

use crate::descriptor::{
    self, Completion, DescKind, Descriptor, RtError, COMM_WORLD, COMPLETION_CANCELLED,
    COMPLETION_FOUND, FLAG_IN_PLACE, SPLIT_UNDEFINED,
};
use crate::rank::RankCtx;
use crate::segment::{CALL_WAIT, CALL_WAITALL, CALL_WAITANY, CALL_WAITSOME};

/// MPI error classes the runtime can produce.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("MPI_ERR_TRUNCATE: message longer than the receive buffer")]
    Truncate,
    #[error("MPI_ERR_RANK: rank outside the communicator")]
    Rank,
    #[error("MPI_ERR_TAG: tag outside 0..=MPI_TAG_UB")]
    Tag,
    #[error("MPI_ERR_COMM: unknown or freed communicator")]
    Comm,
    #[error("MPI_ERR_COUNT: counts or buffer sizes inconsistent with the call")]
    Count,
    #[error("MPI_ERR_OP: reduction op not defined on the element type")]
    Op,
    #[error("MPI_ERR_ARG: invalid argument")]
    Arg,
    #[error("MPI_ERR_BUFFER: invalid or missing buffer")]
    Buffer,
    #[error("collective mismatch: members called different collectives, roots, ops or sizes")]
    CollectiveMismatch,
    #[error("the job is being aborted")]
    Aborted,
    #[error("MPI_Init failed: {0}")]
    Init(#[from] InitError),
}

impl Error {
    /// The error a completion reports, `None` for success.
    pub fn from_rt(e: RtError) -> Option<Error> {
        Some(match e {
            RtError::Ok => return None,
            RtError::Truncate => Error::Truncate,
            RtError::Rank => Error::Rank,
            RtError::Comm => Error::Comm,
            RtError::CollectiveMismatch => Error::CollectiveMismatch,
            RtError::Op => Error::Op,
            RtError::Arg => Error::Arg,
            RtError::Aborted => Error::Aborted,
            RtError::Count => Error::Count,
            RtError::Buffer => Error::Buffer,
        })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A type whose values can be sent as they are in memory: plain data with a C layout the
/// runtime knows ([`ElemType`]).
///
/// # Safety
/// `size_of::<Self>()` must equal `Self::ELEM.size()`, every bit pattern the runtime may
/// write must be a valid `Self`, and the layout must be the one `ELEM` describes.
pub unsafe trait Equivalence: Copy + 'static {
    const ELEM: ElemType;
}

macro_rules! equivalence {
    ($($t:ty => $e:ident),* $(,)?) => {
        $(unsafe impl Equivalence for $t { const ELEM: ElemType = ElemType::$e; })*
    };
}

equivalence! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64,
}

/// `MPI_FLOAT_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FloatInt {
    pub v: f32,
    pub i: i32,
}

/// `MPI_DOUBLE_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DoubleInt {
    pub v: f64,
    pub i: i32,
}

/// `MPI_LONG_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LongInt {
    pub v: i64,
    pub i: i32,
}

/// `MPI_2INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoInt {
    pub v: i32,
    pub i: i32,
}

/// `MPI_SHORT_INT`, for MINLOC/MAXLOC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShortInt {
    pub v: i16,
    pub i: i32,
}

// The padding bytes of DoubleInt/LongInt/ShortInt may be written with anything: padding has
// no validity requirement.
equivalence! {
    FloatInt => FloatInt, DoubleInt => DoubleInt, LongInt => LongInt,
    TwoInt => TwoInt, ShortInt => ShortInt,
}

fn addr<T>(b: &[T]) -> u64 {
    b.as_ptr() as u64
}

fn addr_mut<T>(b: &mut [T]) -> u64 {
    b.as_mut_ptr() as u64
}

fn nbytes<T>(b: &[T]) -> u64 {
    std::mem::size_of_val(b) as u64
}

fn ctx() -> &'static RankCtx {
    RankCtx::get().expect("strobe: MPI call before api::init() (or after it failed)")
}

/// `MPI_Init`: attach to the job and return `MPI_COMM_WORLD`.
pub fn init() -> Result<Comm> {
    let c = RankCtx::init()?;
    Ok(Comm {
        id: COMM_WORLD,
        rank: c.rank(),
        size: c.size(),
        members: (0..c.size()).collect(),
    })
}

/// `MPI_Finalize`. Does nothing if `init` was never called.
pub fn finalize() {
    if let Some(c) = RankCtx::get() {
        c.finalize();
    }
}

/// `MPI_Abort`: the whole job goes down; this process exits with `code` (1 if `code` is 0).
pub fn abort(code: i32) -> ! {
    match RankCtx::get() {
        Some(c) => c.abort(code),
        None => std::process::exit(if code == 0 { 1 } else { code }),
    }
}

/// `MPI_Wtime`: seconds on `CLOCK_MONOTONIC`.
pub fn wtime() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `MPI_COMM_SELF`. Panics if `init` has not succeeded.
pub fn comm_self() -> Comm {
    let me = ctx().rank();
    Comm {
        id: descriptor::comm_self(me),
        rank: 0,
        size: 1,
        members: Arc::from([me]),
    }
}

/// The status of a completed receive or probe (`MPI_Status`). `source` is comm-relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub bytes: u64,
    pub cancelled: bool,
}

impl Status {
    /// The empty status of a completed-before or inactive request.
    pub const EMPTY: Status = Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        bytes: 0,
        cancelled: false,
    };

    fn of(c: &Completion) -> Status {
        Status {
            source: c.source,
            tag: c.tag,
            bytes: c.bytes,
            cancelled: c.flags & COMPLETION_CANCELLED != 0,
        }
    }

    /// `MPI_Get_count`: whole elements of `T` received.
    pub fn count<T: Equivalence>(&self) -> usize {
        self.bytes as usize / std::mem::size_of::<T>().max(1)
    }
}

/// The completion's status, or its error.
fn finish(c: &Completion) -> Result<Status> {
    match Error::from_rt(RtError::from_u32(c.error)) {
        None => Ok(Status::of(c)),
        Some(e) => Err(e),
    }
}

// ---- Rank-side validation (pure, unit-tested) ----

fn check_dest(dest: i32, size: u32) -> Result<()> {
    if dest == PROC_NULL || (dest >= 0 && (dest as u32) < size) {
        Ok(())
    } else {
        Err(Error::Rank)
    }
}

fn check_source(source: i32, size: u32) -> Result<()> {
    if source == ANY_SOURCE {
        Ok(())
    } else {
        check_dest(source, size)
    }
}

fn check_root(root: i32, size: u32) -> Result<()> {
    if root >= 0 && (root as u32) < size {
        Ok(())
    } else {
        Err(Error::Rank)
    }
}

fn check_send_tag(tag: i32) -> Result<()> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(())
    } else {
        Err(Error::Tag)
    }
}

fn check_recv_tag(tag: i32) -> Result<()> {
    if tag == ANY_TAG {
        Ok(())
    } else {
        check_send_tag(tag)
    }
}

fn check_op<T: Equivalence>(op: ReduceOp) -> Result<()> {
    if crate::ops::op_defined(op, T::ELEM) {
        Ok(())
    } else {
        Err(Error::Op)
    }
}

/// Build the runtime's (bytes, displacement) table from per-rank element counts and
/// displacements, checking it has `n` entries and every block lies within a buffer of
/// `buf_len` elements of `elem` bytes. Values are stored little-endian.
fn build_table(
    counts: &[usize],
    displs: &[usize],
    n: usize,
    elem: usize,
    buf_len: usize,
) -> Result<Vec<u64>> {
    if counts.len() != n || displs.len() != n {
        return Err(Error::Count);
    }
    let mut t = Vec::with_capacity(2 * n);
    for (&c, &d) in counts.iter().zip(displs) {
        let end = c.checked_add(d).ok_or(Error::Count)?;
        if end > buf_len {
            return Err(Error::Count);
        }
        t.push(((c * elem) as u64).to_le());
        t.push(((d * elem) as u64).to_le());
    }
    Ok(t)
}

/// Displacements of consecutive blocks of `counts` elements.
fn prefix_displs(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0usize, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// `need` elements must fit in a buffer of `have`.
fn check_fits(need: usize, have: usize) -> Result<()> {
    if need <= have {
        Ok(())
    } else {
        Err(Error::Count)
    }
}

/// A communicator: context id, my rank, its size and its members' world ranks.
#[derive(Clone, Debug)]
pub struct Comm {
    id: u32,
    rank: u32,
    size: u32,
    members: Arc<[u32]>,
}

impl Comm {
    /// My rank in this communicator.
    pub fn rank(&self) -> i32 {
        self.rank as i32
    }
    /// Number of members.
    pub fn size(&self) -> i32 {
        self.size as i32
    }
    /// Context id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// World rank of communicator rank `r`.
    pub fn world_rank_of(&self, r: i32) -> Option<u32> {
        usize::try_from(r)
            .ok()
            .and_then(|r| self.members.get(r).copied())
    }

    fn desc(&self, kind: DescKind) -> Descriptor {
        Descriptor {
            kind: kind as u8,
            comm: self.id,
            ..Default::default()
        }
    }

    /// Post a blocking collective (or other blocking call) and map the completion.
    fn call(&self, d: Descriptor) -> Result<Completion> {
        let c = ctx().call(d);
        finish(&c)?;
        Ok(c)
    }

    // ---- Point to point ----

    fn send_desc<T: Equivalence>(
        &self,
        kind: DescKind,
        buf: &[T],
        dest: i32,
        tag: i32,
    ) -> Result<Descriptor> {
        check_dest(dest, self.size)?;
        check_send_tag(tag)?;
        let mut d = self.desc(kind);
        d.elem = T::ELEM as u8;
        d.peer = dest;
        d.tag = tag;
        d.buf = addr(buf);
        d.bytes = nbytes(buf);
        Ok(d)
    }

    fn recv_desc<T: Equivalence>(
        &self,
        kind: DescKind,
        buf: &mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Descriptor> {
        check_source(source, self.size)?;
        check_recv_tag(tag)?;
        let mut d = self.desc(kind);
        d.elem = T::ELEM as u8;
        d.peer = source;
        d.tag = tag;
        d.buf = addr_mut(buf);
        d.bytes = nbytes(buf);
        Ok(d)
    }

    fn blocking_send<T: Equivalence>(
        &self,
        kind: DescKind,
        buf: &[T],
        dest: i32,
        tag: i32,
    ) -> Result<()> {
        let d = self.send_desc(kind, buf, dest, tag)?;
        self.call(d).map(|_| ())
    }

    /// `MPI_Send` (returns once the data has moved to the receiver).
    pub fn send<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send(DescKind::Send, buf, dest, tag)
    }
    /// `MPI_Ssend`.
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send(DescKind::Ssend, buf, dest, tag)
    }
    /// `MPI_Rsend`.
    pub fn rsend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send(DescKind::Rsend, buf, dest, tag)
    }

    /// `MPI_Recv`. A message longer than `buf` gives `Error::Truncate`.
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Status> {
        let d = self.recv_desc(DescKind::Recv, buf, source, tag)?;
        finish(&ctx().call(d))
    }

    fn post_send<'a, T: Equivalence>(
        &self,
        kind: DescKind,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let d = self.send_desc(kind, buf, dest, tag)?;
        Ok(Request::new(ctx().post(d), kind))
    }

    /// `MPI_Isend`: the request borrows `buf` until it completes.
    pub fn isend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        self.post_send(DescKind::Send, buf, dest, tag)
    }
    /// `MPI_Issend`.
    pub fn issend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        self.post_send(DescKind::Ssend, buf, dest, tag)
    }
    /// `MPI_Irsend`.
    pub fn irsend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        self.post_send(DescKind::Rsend, buf, dest, tag)
    }
    /// `MPI_Irecv`: the request borrows `buf` mutably until it completes.
    pub fn irecv<'a, T: Equivalence>(
        &self,
        buf: &'a mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let d = self.recv_desc(DescKind::Recv, buf, source, tag)?;
        Ok(Request::new(ctx().post(d), DescKind::Recv))
    }

    /// `MPI_Sendrecv`: both are posted, then both awaited. Returns the receive's status.
    #[allow(clippy::too_many_arguments)]
    pub fn sendrecv<T: Equivalence, U: Equivalence>(
        &self,
        send: &[T],
        dest: i32,
        stag: i32,
        recv: &mut [U],
        source: i32,
        rtag: i32,
    ) -> Result<Status> {
        let sd = self.send_desc(DescKind::Send, send, dest, stag)?;
        let rd = self.recv_desc(DescKind::Recv, recv, source, rtag)?;
        let c = ctx();
        let s = Request::new(c.post(sd), DescKind::Send);
        let r = Request::new(c.post(rd), DescKind::Recv);
        let mut st = wait_all(vec![s, r]);
        match st {
            Ok(ref mut v) => Ok(v.pop().expect("two statuses")),
            Err(e) => Err(e),
        }
    }

    /// `MPI_Sendrecv_replace` (through a temporary copy of the outgoing data).
    pub fn sendrecv_replace<T: Equivalence>(
        &self,
        buf: &mut [T],
        dest: i32,
        stag: i32,
        source: i32,
        rtag: i32,
    ) -> Result<Status> {
        let tmp: Vec<T> = buf.to_vec();
        self.sendrecv(&tmp, dest, stag, buf, source, rtag)
    }

    /// `MPI_Probe`: blocks until a matching message is known; it stays to be received.
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        check_source(source, self.size)?;
        check_recv_tag(tag)?;
        let mut d = self.desc(DescKind::Probe);
        d.peer = source;
        d.tag = tag;
        finish(&ctx().call(d))
    }

    /// `MPI_Iprobe`. The answer is given at the next slice boundary (the caller sleeps
    /// until then), from the scheduler's view after that slice's matching.
    pub fn iprobe(&self, source: i32, tag: i32) -> Result<Option<Status>> {
        check_source(source, self.size)?;
        check_recv_tag(tag)?;
        let mut d = self.desc(DescKind::Iprobe);
        d.peer = source;
        d.tag = tag;
        let c = ctx().call(d);
        let st = finish(&c)?;
        Ok((c.flags & COMPLETION_FOUND != 0).then_some(st))
    }

    // ---- Collectives ----

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        self.call(self.desc(DescKind::Barrier)).map(|_| ())
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub fn bcast<T: Equivalence>(&self, buf: &mut [T], root: i32) -> Result<()> {
        check_root(root, self.size)?;
        let mut d = self.desc(DescKind::Bcast);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.buf = addr_mut(buf);
        d.bytes = nbytes(buf);
        self.call(d).map(|_| ())
    }

    fn reduction<T: Equivalence>(&self, kind: DescKind, op: ReduceOp) -> Result<Descriptor> {
        check_op::<T>(op)?;
        let mut d = self.desc(kind);
        d.elem = T::ELEM as u8;
        d.op = op as u8;
        Ok(d)
    }

    /// `MPI_Reduce`: `recv` is used at the root only (and required there).
    pub fn reduce<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: i32,
    ) -> Result<()> {
        check_root(root, self.size)?;
        let mut d = self.reduction::<T>(DescKind::Reduce, op)?;
        d.peer = root;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        if root == self.rank() {
            let recv = recv.ok_or(Error::Buffer)?;
            check_fits(send.len(), recv.len())?;
            d.rbuf = addr_mut(recv);
            d.rbytes = nbytes(send);
        }
        self.call(d).map(|_| ())
    }

    /// `MPI_Reduce` with `MPI_IN_PLACE` at the root: the caller is the root, `buf` is its
    /// input and receives the result. The other members call [`Comm::reduce`].
    pub fn reduce_root_in_place<T: Equivalence>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let mut d = self.reduction::<T>(DescKind::Reduce, op)?;
        d.peer = self.rank();
        d.flags = FLAG_IN_PLACE;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.call(d).map(|_| ())
    }

    fn reduce_to_all<T: Equivalence>(
        &self,
        kind: DescKind,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        let mut d = self.reduction::<T>(kind, op)?;
        check_fits(send.len(), recv.len())?;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(send);
        self.call(d).map(|_| ())
    }

    /// `MPI_Allreduce`; the result fills the first `send.len()` elements of `recv`.
    pub fn allreduce<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.reduce_to_all(DescKind::Allreduce, send, recv, op)
    }

    /// `MPI_Allreduce` with `MPI_IN_PLACE`.
    pub fn allreduce_in_place<T: Equivalence>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let mut d = self.reduction::<T>(DescKind::Allreduce, op)?;
        d.flags = FLAG_IN_PLACE;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.call(d).map(|_| ())
    }

    /// `MPI_Scan` (inclusive prefix reduction in rank order).
    pub fn scan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.reduce_to_all(DescKind::Scan, send, recv, op)
    }

    /// `MPI_Exscan` (exclusive; rank 0's `recv` is left untouched).
    pub fn exscan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.reduce_to_all(DescKind::Exscan, send, recv, op)
    }

    /// `MPI_Reduce_scatter`: rank i receives `counts[i]` elements of the reduction.
    pub fn reduce_scatter<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<()> {
        let n = self.size as usize;
        let displs = prefix_displs(counts);
        let table = build_table(counts, &displs, n, std::mem::size_of::<T>(), send.len())?;
        if counts.iter().sum::<usize>() != send.len() {
            return Err(Error::Count);
        }
        let mine = counts[self.rank as usize];
        check_fits(mine, recv.len())?;
        let mut d = self.reduction::<T>(DescKind::ReduceScatter, op)?;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(&recv[..mine]);
        d.aux = table.as_ptr() as u64;
        let r = self.call(d).map(|_| ());
        drop(table);
        r
    }

    /// `MPI_Reduce_scatter_block`: `send` holds `size` blocks; I receive block `rank`.
    pub fn reduce_scatter_block<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        let n = self.size as usize;
        if send.len() % n != 0 {
            return Err(Error::Count);
        }
        let blk = send.len() / n;
        check_fits(blk, recv.len())?;
        let mut d = self.reduction::<T>(DescKind::ReduceScatterBlock, op)?;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(&recv[..blk]);
        self.call(d).map(|_| ())
    }

    /// `MPI_Scatter`: the root's `send` holds `size` blocks of `recv.len()` elements.
    pub fn scatter<T: Equivalence>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: i32,
    ) -> Result<()> {
        check_root(root, self.size)?;
        let n = self.size as usize;
        let mut d = self.desc(DescKind::Scatter);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(recv);
        if root == self.rank() {
            let send = send.ok_or(Error::Buffer)?;
            let total = recv.len().checked_mul(n).ok_or(Error::Count)?;
            check_fits(total, send.len())?;
            d.buf = addr(send);
            d.bytes = nbytes(&send[..total]);
        }
        self.call(d).map(|_| ())
    }

    /// `MPI_Scatterv`: the root passes its buffer with per-rank counts and displacements
    /// (in elements).
    pub fn scatterv<T: Equivalence>(
        &self,
        send: Option<(&[T], &[usize], &[usize])>,
        recv: &mut [T],
        root: i32,
    ) -> Result<()> {
        check_root(root, self.size)?;
        let n = self.size as usize;
        let mut d = self.desc(DescKind::Scatterv);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(recv);
        let mut table = Vec::new();
        if root == self.rank() {
            let (buf, counts, displs) = send.ok_or(Error::Buffer)?;
            table = build_table(counts, displs, n, std::mem::size_of::<T>(), buf.len())?;
            check_fits(counts[self.rank as usize], recv.len())?;
            d.buf = addr(buf);
            d.bytes = nbytes(buf);
            d.aux = table.as_ptr() as u64;
        }
        let r = self.call(d).map(|_| ());
        drop(table);
        r
    }

    /// `MPI_Gather`: the root's `recv` receives `size` blocks of `send.len()` elements.
    pub fn gather<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: i32,
    ) -> Result<()> {
        check_root(root, self.size)?;
        let n = self.size as usize;
        let mut d = self.desc(DescKind::Gather);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        if root == self.rank() {
            let recv = recv.ok_or(Error::Buffer)?;
            let total = send.len().checked_mul(n).ok_or(Error::Count)?;
            check_fits(total, recv.len())?;
            d.rbuf = addr_mut(recv);
            d.rbytes = nbytes(&recv[..total]);
        }
        self.call(d).map(|_| ())
    }

    /// `MPI_Gatherv`: the root passes its buffer with per-rank counts and displacements.
    pub fn gatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<(&mut [T], &[usize], &[usize])>,
        root: i32,
    ) -> Result<()> {
        check_root(root, self.size)?;
        let n = self.size as usize;
        let mut d = self.desc(DescKind::Gatherv);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        let mut table = Vec::new();
        if root == self.rank() {
            let (buf, counts, displs) = recv.ok_or(Error::Buffer)?;
            table = build_table(counts, displs, n, std::mem::size_of::<T>(), buf.len())?;
            check_fits(send.len(), counts[self.rank as usize])?;
            d.rbuf = addr_mut(buf);
            d.rbytes = nbytes(buf);
            d.aux = table.as_ptr() as u64;
        }
        let r = self.call(d).map(|_| ());
        drop(table);
        r
    }

    /// `MPI_Allgather`: `recv` receives `size` blocks of `send.len()` elements.
    pub fn allgather<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.size as usize;
        let total = send.len().checked_mul(n).ok_or(Error::Count)?;
        check_fits(total, recv.len())?;
        let mut d = self.desc(DescKind::Allgather);
        d.elem = T::ELEM as u8;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(&recv[..total]);
        self.call(d).map(|_| ())
    }

    /// `MPI_Allgather` with `MPI_IN_PLACE`: `buf` holds `size` blocks, mine already at
    /// index `rank`.
    pub fn allgather_in_place<T: Equivalence>(&self, buf: &mut [T]) -> Result<()> {
        let n = self.size as usize;
        if buf.len() % n != 0 {
            return Err(Error::Count);
        }
        let mut d = self.desc(DescKind::Allgather);
        d.elem = T::ELEM as u8;
        d.flags = FLAG_IN_PLACE;
        d.bytes = nbytes(buf) / n as u64;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.call(d).map(|_| ())
    }

    /// `MPI_Allgatherv`: rank i's block (`counts[i]` elements) lands at `displs[i]`.
    /// `send.len()` must equal `counts[rank]`.
    pub fn allgatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let n = self.size as usize;
        let table = build_table(counts, displs, n, std::mem::size_of::<T>(), recv.len())?;
        if send.len() != counts[self.rank as usize] {
            return Err(Error::Count);
        }
        let mut d = self.desc(DescKind::Allgatherv);
        d.elem = T::ELEM as u8;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(recv);
        d.aux = table.as_ptr() as u64;
        let r = self.call(d).map(|_| ());
        drop(table);
        r
    }

    /// `MPI_Alltoall`: `send` holds `size` blocks; block j goes to rank j; `recv` receives
    /// `size` blocks of the same size.
    pub fn alltoall<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.size as usize;
        if send.len() % n != 0 {
            return Err(Error::Count);
        }
        check_fits(send.len(), recv.len())?;
        let mut d = self.desc(DescKind::Alltoall);
        d.elem = T::ELEM as u8;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(&recv[..send.len()]);
        self.call(d).map(|_| ())
    }

    /// `MPI_Alltoallv` with per-rank counts and displacements in elements.
    pub fn alltoallv<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        let n = self.size as usize;
        let es = std::mem::size_of::<T>();
        let stable = build_table(scounts, sdispls, n, es, send.len())?;
        let rtable = build_table(rcounts, rdispls, n, es, recv.len())?;
        let mut d = self.desc(DescKind::Alltoallv);
        d.elem = T::ELEM as u8;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(recv);
        d.aux = stable.as_ptr() as u64;
        d.aux2 = rtable.as_ptr() as u64;
        let r = self.call(d).map(|_| ());
        drop((stable, rtable));
        r
    }

    // ---- Communicators ----

    /// The communicator a dup/split completion describes; `None` for `MPI_UNDEFINED`.
    fn derived(c: &Completion, members: &[u32]) -> Option<Comm> {
        if c.value == u64::MAX {
            return None;
        }
        let rank = (c.value2 >> 32) as u32;
        let size = c.value2 as u32;
        Some(Comm {
            id: c.value as u32,
            rank,
            size,
            members: Arc::from(&members[..(size as usize).min(members.len())]),
        })
    }

    fn new_comm(&self, mut d: Descriptor) -> Result<Option<Comm>> {
        let mut members = vec![0u32; self.size as usize];
        d.rbuf = addr_mut(&mut members);
        d.rbytes = nbytes(&members);
        let c = self.call(d)?;
        let members: Vec<u32> = members.into_iter().map(u32::from_le).collect();
        Ok(Comm::derived(&c, &members))
    }

    /// `MPI_Comm_dup`.
    pub fn dup(&self) -> Result<Comm> {
        self.new_comm(self.desc(DescKind::CommDup))?
            .ok_or(Error::Comm)
    }

    /// `MPI_Comm_split`: `None` colour is `MPI_UNDEFINED` (the result is `None`). Members
    /// of one colour are ordered by `key`, then by rank here.
    pub fn split(&self, colour: Option<i32>, key: i32) -> Result<Option<Comm>> {
        let mut d = self.desc(DescKind::CommSplit);
        d.aux = match colour {
            None => SPLIT_UNDEFINED as u64,
            Some(c) if c < 0 => return Err(Error::Arg),
            Some(c) => c as i64 as u64,
        };
        d.aux2 = key as i64 as u64;
        self.new_comm(d)
    }

    /// `MPI_Comm_free`. `MPI_COMM_WORLD` and `MPI_COMM_SELF` cannot be freed.
    pub fn free(self) -> Result<()> {
        if self.id == COMM_WORLD || self.id >= descriptor::COMM_SELF_BASE {
            return Err(Error::Comm);
        }
        self.call(self.desc(DescKind::CommFree)).map(|_| ())
    }
}

/// A non-blocking operation in flight. It borrows its buffer for `'a`, so the buffer
/// cannot be touched or freed while the runtime may still read or write it. Dropping an
/// unfinished request blocks until it completes (the DMA Helper may still be writing).
#[must_use = "dropping a request blocks until it completes"]
#[derive(Debug)]
pub struct Request<'a> {
    id: u64,
    kind: DescKind,
    completed: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl Request<'_> {
    fn new(id: u64, kind: DescKind) -> Self {
        Request {
            id,
            kind,
            completed: false,
            _borrow: PhantomData,
        }
    }

    /// The runtime's request id.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// What was posted.
    pub fn kind(&self) -> DescKind {
        self.kind
    }
    /// Whether `test`/`test_*` already reported this request complete (it is inactive).
    pub fn is_completed(&self) -> bool {
        self.completed
    }

    /// `MPI_Wait`.
    pub fn wait(mut self) -> Result<Status> {
        if self.completed {
            return Ok(Status::EMPTY);
        }
        let c = ctx().wait(CALL_WAIT, self.id);
        self.completed = true;
        finish(&c)
    }

    /// `MPI_Test`: `Some` once complete (later calls give the empty status).
    pub fn test(&mut self) -> Result<Option<Status>> {
        if self.completed {
            return Ok(Some(Status::EMPTY));
        }
        match ctx().test(self.id) {
            None => Ok(None),
            Some(c) => {
                self.completed = true;
                finish(&c).map(Some)
            }
        }
    }

    /// `MPI_Cancel`: only receives can be cancelled; it succeeds if the receive is not
    /// matched yet, and the request then completes with `Status::cancelled`. Blocks until
    /// the next slice boundary (when the runtime processes the cancel). The request must
    /// still be waited on or tested.
    pub fn cancel(&mut self) -> Result<()> {
        if self.completed || self.kind != DescKind::Recv {
            return Ok(());
        }
        let d = Descriptor {
            kind: DescKind::Cancel as u8,
            aux: self.id,
            ..Default::default()
        };
        finish(&ctx().call(d)).map(|_| ())
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if !self.completed {
            if let Some(c) = RankCtx::get() {
                let _ = c.wait(CALL_WAIT, self.id);
            }
            self.completed = true;
        }
    }
}

/// Ids of the active requests.
fn active(reqs: &[Request<'_>]) -> Vec<u64> {
    reqs.iter().filter(|r| !r.completed).map(|r| r.id).collect()
}

/// Consume the completions of `reqs[i]` for each `i` in `idx` (all complete).
fn take_some(reqs: &mut [Request<'_>], idx: &[usize]) -> Result<Vec<(usize, Status)>> {
    let c = ctx();
    let mut out = Vec::with_capacity(idx.len());
    let mut first_err = None;
    for &i in idx {
        let comp = c.take(reqs[i].id).expect("completion present");
        reqs[i].completed = true;
        match finish(&comp) {
            Ok(s) => out.push((i, s)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        None => Ok(out),
        Some(e) => Err(e),
    }
}

/// Indices of the active requests that completed, ascending.
fn completed_indices(reqs: &[Request<'_>]) -> Vec<usize> {
    let c = ctx();
    reqs.iter()
        .enumerate()
        .filter(|(_, r)| !r.completed && c.is_complete(r.id))
        .map(|(i, _)| i)
        .collect()
}

/// `MPI_Waitall`. Statuses are in request order; on any error every request has still
/// completed and the first error is returned.
pub fn wait_all(mut reqs: Vec<Request<'_>>) -> Result<Vec<Status>> {
    let ids = active(&reqs);
    ctx().block_until(CALL_WAITALL, |done| {
        ids.iter().all(|i| done.contains_key(i))
    });
    let idx: Vec<usize> = (0..reqs.len()).filter(|&i| !reqs[i].completed).collect();
    let got = take_some(&mut reqs, &idx)?;
    let mut st = vec![Status::EMPTY; reqs.len()];
    for (i, s) in got {
        st[i] = s;
    }
    Ok(st)
}

/// `MPI_Waitany`: waits for one active request, removes it from `reqs` and returns its
/// index (the lowest among those completed) and status. `Error::Arg` if none is active.
pub fn wait_any(reqs: &mut Vec<Request<'_>>) -> Result<(usize, Status)> {
    let ids = active(reqs);
    if ids.is_empty() {
        return Err(Error::Arg);
    }
    ctx().block_until(CALL_WAITANY, |done| {
        ids.iter().any(|i| done.contains_key(i))
    });
    let i = completed_indices(reqs)[0];
    let r = take_some(reqs, &[i]);
    drop(reqs.remove(i));
    r.map(|v| v[0])
}

/// `MPI_Waitsome`: waits for at least one active request, removes every completed one
/// from `reqs` and returns their original indices (ascending) and statuses. On an error
/// the completed requests are still removed and the first error is returned.
pub fn wait_some(reqs: &mut Vec<Request<'_>>) -> Result<Vec<(usize, Status)>> {
    let ids = active(reqs);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    ctx().block_until(CALL_WAITSOME, |done| {
        ids.iter().any(|i| done.contains_key(i))
    });
    let idx = completed_indices(reqs);
    let r = take_some(reqs, &idx);
    for &i in idx.iter().rev() {
        drop(reqs.remove(i));
    }
    r
}

/// `MPI_Testall`: all or nothing. `Some` (statuses in order; inactive requests give the
/// empty status) when every request has completed, and then they are all inactive.
pub fn test_all(reqs: &mut [Request<'_>]) -> Result<Option<Vec<Status>>> {
    let c = ctx();
    if !reqs.iter().all(|r| r.completed || c.is_complete(r.id)) {
        return Ok(None);
    }
    let idx: Vec<usize> = (0..reqs.len()).filter(|&i| !reqs[i].completed).collect();
    let got = take_some(reqs, &idx)?;
    let mut st = vec![Status::EMPTY; reqs.len()];
    for (i, s) in got {
        st[i] = s;
    }
    Ok(Some(st))
}

/// `MPI_Testany`: the lowest-indexed active request that completed, now inactive.
/// `None` if none has (or none is active).
pub fn test_any(reqs: &mut [Request<'_>]) -> Result<Option<(usize, Status)>> {
    match completed_indices(reqs).first() {
        None => Ok(None),
        Some(&i) => take_some(reqs, &[i]).map(|v| Some(v[0])),
    }
}

/// `MPI_Testsome`: every active request that completed (now inactive), ascending.
pub fn test_some(reqs: &mut [Request<'_>]) -> Result<Vec<(usize, Status)>> {
    let idx = completed_indices(reqs);
    take_some(reqs, &idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_matches<T: Equivalence>() {
        assert_eq!(
            std::mem::size_of::<T>(),
            T::ELEM.size(),
            "{}",
            T::ELEM.name()
        );
    }

    #[test]
    fn equivalence_sizes() {
        size_matches::<u8>();
        size_matches::<i8>();
        size_matches::<u16>();
        size_matches::<i16>();
        size_matches::<u32>();
        size_matches::<i32>();
        size_matches::<u64>();
        size_matches::<i64>();
        size_matches::<f32>();
        size_matches::<f64>();
        size_matches::<FloatInt>();
        size_matches::<DoubleInt>();
        size_matches::<LongInt>();
        size_matches::<TwoInt>();
        size_matches::<ShortInt>();
    }

    #[test]
    fn pair_layouts() {
        assert_eq!(std::mem::offset_of!(DoubleInt, i), 8);
        assert_eq!(std::mem::offset_of!(LongInt, i), 8);
        assert_eq!(std::mem::offset_of!(ShortInt, i), 4);
        assert_eq!(std::mem::offset_of!(FloatInt, i), 4);
        assert_eq!(std::mem::offset_of!(TwoInt, i), 4);
    }

    #[test]
    fn tables() {
        let t = build_table(&[1, 2, 3], &[0, 1, 3], 3, 8, 6).unwrap();
        assert_eq!(t, vec![8, 0, 16, 8, 24, 24]);
        assert!(matches!(
            build_table(&[1, 2], &[0, 1], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 2, 3], &[0, 1], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 2, 4], &[0, 1, 3], 3, 8, 6),
            Err(Error::Count)
        ));
        assert!(matches!(
            build_table(&[1, 0], &[0, usize::MAX], 2, 8, 6),
            Err(Error::Count)
        ));
        // Zero counts may sit anywhere within (or at the end of) the buffer.
        assert!(build_table(&[0, 0], &[6, 0], 2, 4, 6).is_ok());
        assert_eq!(prefix_displs(&[2, 0, 3, 1]), vec![0, 2, 2, 5]);
        assert!(prefix_displs(&[]).is_empty());
    }

    #[test]
    fn rank_and_tag_validation() {
        assert!(check_dest(0, 4).is_ok());
        assert!(check_dest(3, 4).is_ok());
        assert!(check_dest(PROC_NULL, 4).is_ok());
        assert!(matches!(check_dest(4, 4), Err(Error::Rank)));
        assert!(matches!(check_dest(ANY_SOURCE, 4), Err(Error::Rank)));
        assert!(matches!(check_dest(-7, 4), Err(Error::Rank)));
        assert!(check_source(ANY_SOURCE, 4).is_ok());
        assert!(check_source(PROC_NULL, 1).is_ok());
        assert!(matches!(check_source(1, 1), Err(Error::Rank)));
        assert!(check_root(0, 1).is_ok());
        assert!(matches!(check_root(PROC_NULL, 4), Err(Error::Rank)));
        assert!(matches!(check_root(4, 4), Err(Error::Rank)));
        assert!(check_send_tag(0).is_ok());
        assert!(check_send_tag(TAG_UB).is_ok());
        assert!(matches!(check_send_tag(ANY_TAG), Err(Error::Tag)));
        assert!(matches!(check_send_tag(-5), Err(Error::Tag)));
        assert!(check_recv_tag(ANY_TAG).is_ok());
        assert!(matches!(check_recv_tag(-5), Err(Error::Tag)));
        assert!(check_fits(3, 3).is_ok());
        assert!(matches!(check_fits(4, 3), Err(Error::Count)));
    }

    #[test]
    fn op_validation() {
        assert!(check_op::<i32>(ReduceOp::Sum).is_ok());
        assert!(check_op::<u64>(ReduceOp::Bxor).is_ok());
        assert!(check_op::<DoubleInt>(ReduceOp::MinLoc).is_ok());
        assert!(matches!(check_op::<f64>(ReduceOp::Band), Err(Error::Op)));
        assert!(matches!(check_op::<i32>(ReduceOp::MaxLoc), Err(Error::Op)));
        assert!(matches!(check_op::<TwoInt>(ReduceOp::Sum), Err(Error::Op)));
    }

    #[test]
    fn errors_from_runtime() {
        assert!(Error::from_rt(RtError::Ok).is_none());
        for (rt, want) in [
            (RtError::Truncate, "TRUNCATE"),
            (RtError::Rank, "RANK"),
            (RtError::Comm, "COMM"),
            (RtError::Count, "COUNT"),
            (RtError::Op, "ERR_OP"),
            (RtError::Arg, "ARG"),
            (RtError::Buffer, "BUFFER"),
        ] {
            let e = Error::from_rt(rt).unwrap();
            assert!(e.to_string().contains(want), "{e}");
        }
        assert!(matches!(
            Error::from_rt(RtError::CollectiveMismatch),
            Some(Error::CollectiveMismatch)
        ));
        assert!(matches!(
            Error::from_rt(RtError::Aborted),
            Some(Error::Aborted)
        ));
    }

    #[test]
    fn status_count_and_completion() {
        let c = Completion {
            request: 1,
            source: 2,
            tag: 7,
            bytes: 24,
            error: 0,
            flags: COMPLETION_CANCELLED,
            ..Default::default()
        };
        let s = finish(&c).unwrap();
        assert_eq!(s.source, 2);
        assert_eq!(s.tag, 7);
        assert!(s.cancelled);
        assert_eq!(s.count::<f64>(), 3);
        assert_eq!(s.count::<u8>(), 24);
        assert_eq!(s.count::<DoubleInt>(), 1);
        let bad = Completion {
            error: RtError::Truncate as u32,
            ..c
        };
        assert!(matches!(finish(&bad), Err(Error::Truncate)));
    }

    #[test]
    fn derived_comm_decoding() {
        let c = Completion {
            value: 5,
            value2: (1u64 << 32) | 2,
            ..Default::default()
        };
        let m = Comm::derived(&c, &[3, 1, 0, 0]).unwrap();
        assert_eq!((m.id(), m.rank(), m.size()), (5, 1, 2));
        assert_eq!(m.world_rank_of(0), Some(3));
        assert_eq!(m.world_rank_of(1), Some(1));
        assert_eq!(m.world_rank_of(2), None);
        assert_eq!(m.world_rank_of(-1), None);
        let none = Completion {
            value: u64::MAX,
            ..Default::default()
        };
        assert!(Comm::derived(&none, &[0]).is_none());
    }
}
