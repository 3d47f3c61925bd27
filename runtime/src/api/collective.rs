//! Collective calls on a [`Comm`].
//!
//! Every collective builds one descriptor and hands it to [`Comm::run`], which either
//! posts it and waits (the blocking calls) or, inside [`post_unscoped`], posts it and
//! returns (the C ABI's nonblocking collectives, `MPI_Ibcast` and friends). So the
//! nonblocking calls share every check and every descriptor field with the blocking ones,
//! and their results (reductions included) are bit-identical.

use super::check::{build_table, check_fits, check_op, check_root, prefix_displs};
use super::{addr, addr_mut, ctx, nbytes, Comm, Equivalence, Error, ReduceOp, Result};
use crate::descriptor::{DescKind, Descriptor, FLAG_IN_PLACE};
use crate::mmds::{self, CallGuard, Primitive};
use std::cell::RefCell;

thread_local! {
    /// `Some` while [`post_unscoped`] runs: collectives post and return instead of waiting.
    static DEFERRED: RefCell<Option<Vec<PostedCollective>>> = const { RefCell::new(None) };
}

fn deferring() -> bool {
    DEFERRED.with(|p| p.borrow().is_some())
}

/// Measure a blocking collective; a nonblocking post is not measured as one (its time is
/// the `MPI_Wait`'s that completes it).
fn measure(p: Primitive) -> Option<CallGuard> {
    (!deferring()).then(|| mmds::enter(p))
}

fn measure_bytes(p: Primitive, bytes: u64) -> Option<CallGuard> {
    (!deferring()).then(|| mmds::enter_bytes(p, bytes))
}

/// A collective posted by [`post_unscoped`]: its runtime request id, and the
/// (bytes, displacement) tables its descriptor points at, kept alive until it completes.
#[derive(Debug)]
pub struct PostedCollective {
    id: u64,
    kind: DescKind,
    _tables: Vec<Vec<u64>>,
}

impl PostedCollective {
    /// The runtime's request id (complete it with `RankCtx::wait`/`poll_completed`).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// The collective posted.
    pub fn kind(&self) -> DescKind {
        self.kind
    }
}

/// Run `post`, which must make exactly one collective call on a [`Comm`], as a
/// *nonblocking* collective: the descriptor is posted and the call returns at once. The
/// collective completes like any request (Wait/Test through the rank context); like every
/// collective it is matched with the other members' in posting order.
///
/// # Safety
/// The buffers given to the collective are used by the runtime until the request
/// completes: the caller must keep them valid (and not touch receive buffers) until then,
/// and keep the returned value alive as long (it owns the descriptor's tables).
pub unsafe fn post_unscoped(post: impl FnOnce() -> Result<()>) -> Result<PostedCollective> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DEFERRED.with(|p| p.borrow_mut().take());
        }
    }
    DEFERRED.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let reset = Reset;
    let r = post();
    let mut posted = DEFERRED.with(|p| p.borrow_mut().take()).unwrap_or_default();
    drop(reset);
    r?;
    assert!(
        posted.len() == 1,
        "a nonblocking collective posted {} descriptors",
        posted.len()
    );
    Ok(posted.pop().expect("checked"))
}

impl Comm {
    /// Post a collective's descriptor: wait for it (blocking calls), or hand it to
    /// [`post_unscoped`] (nonblocking). `tables` are what `d.aux`/`d.aux2` point at.
    fn run(&self, d: Descriptor, tables: Vec<Vec<u64>>) -> Result<()> {
        if deferring() {
            let kind = d.kind().unwrap_or(DescKind::Barrier);
            let id = ctx().post(d);
            DEFERRED.with(|p| {
                if let Some(v) = p.borrow_mut().as_mut() {
                    v.push(PostedCollective {
                        id,
                        kind,
                        _tables: tables,
                    });
                }
            });
            return Ok(());
        }
        let r = self.call(d).map(|_| ());
        drop(tables);
        r
    }

    /// `MPI_Barrier`.
    #[track_caller]
    pub fn barrier(&self) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure(Primitive::Barrier);
        self.run(self.desc(DescKind::Barrier), Vec::new())
    }

    /// `MPI_Bcast` of `buf` from `root`.
    #[track_caller]
    pub fn bcast<T: Equivalence>(&self, buf: &mut [T], root: i32) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Bcast, nbytes(buf));
        check_root(root, self.size)?;
        let mut d = self.desc(DescKind::Bcast);
        d.elem = T::ELEM as u8;
        d.peer = root;
        d.buf = addr_mut(buf);
        d.bytes = nbytes(buf);
        self.run(d, Vec::new())
    }

    fn reduction<T: Equivalence>(&self, kind: DescKind, op: ReduceOp) -> Result<Descriptor> {
        check_op::<T>(op)?;
        let mut d = self.desc(kind);
        d.elem = T::ELEM as u8;
        d.op = op as u8;
        Ok(d)
    }

    /// `MPI_Reduce`: `recv` is used at the root only (and required there).
    #[track_caller]
    pub fn reduce<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: i32,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Reduce, nbytes(send));
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
        self.run(d, Vec::new())
    }

    /// `MPI_Reduce` with `MPI_IN_PLACE` at the root: the caller is the root, `buf` is its
    /// input and receives the result. The other members call [`Comm::reduce`].
    #[track_caller]
    pub fn reduce_root_in_place<T: Equivalence>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Reduce, nbytes(buf));
        let mut d = self.reduction::<T>(DescKind::Reduce, op)?;
        d.peer = self.rank();
        d.flags = FLAG_IN_PLACE;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.run(d, Vec::new())
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
        self.run(d, Vec::new())
    }

    /// `MPI_Allreduce`; the result fills the first `send.len()` elements of `recv`.
    #[track_caller]
    pub fn allreduce<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Allreduce, nbytes(send));
        self.reduce_to_all(DescKind::Allreduce, send, recv, op)
    }

    /// `MPI_Allreduce` with `MPI_IN_PLACE`.
    #[track_caller]
    pub fn allreduce_in_place<T: Equivalence>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Allreduce, nbytes(buf));
        let mut d = self.reduction::<T>(DescKind::Allreduce, op)?;
        d.flags = FLAG_IN_PLACE;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.run(d, Vec::new())
    }

    /// `MPI_Scan` (inclusive prefix reduction in rank order).
    #[track_caller]
    pub fn scan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Scan, nbytes(send));
        self.reduce_to_all(DescKind::Scan, send, recv, op)
    }

    /// `MPI_Exscan` (exclusive; rank 0's `recv` is left untouched).
    #[track_caller]
    pub fn exscan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Exscan, nbytes(send));
        self.reduce_to_all(DescKind::Exscan, send, recv, op)
    }

    /// `MPI_Reduce_scatter`: rank i receives `counts[i]` elements of the reduction.
    #[track_caller]
    pub fn reduce_scatter<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::ReduceScatter, nbytes(send));
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
        self.run(d, vec![table])
    }

    /// `MPI_Reduce_scatter_block`: `send` holds `size` blocks; I receive block `rank`.
    #[track_caller]
    pub fn reduce_scatter_block<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::ReduceScatterBlock, nbytes(send));
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
        self.run(d, Vec::new())
    }

    /// `MPI_Scatter`: the root's `send` holds `size` blocks of `recv.len()` elements.
    #[track_caller]
    pub fn scatter<T: Equivalence>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: i32,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure(Primitive::Scatter);
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
        self.run(d, Vec::new())
    }

    /// `MPI_Scatterv`: the root passes its buffer with per-rank counts and displacements
    /// (in elements).
    #[track_caller]
    pub fn scatterv<T: Equivalence>(
        &self,
        send: Option<(&[T], &[usize], &[usize])>,
        recv: &mut [T],
        root: i32,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure(Primitive::Scatterv);
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
        self.run(d, vec![table])
    }

    /// `MPI_Gather`: the root's `recv` receives `size` blocks of `send.len()` elements.
    #[track_caller]
    pub fn gather<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: i32,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Gather, nbytes(send));
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
        self.run(d, Vec::new())
    }

    /// `MPI_Gatherv`: the root passes its buffer with per-rank counts and displacements.
    #[track_caller]
    pub fn gatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: Option<(&mut [T], &[usize], &[usize])>,
        root: i32,
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Gatherv, nbytes(send));
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
        self.run(d, vec![table])
    }

    /// `MPI_Allgather`: `recv` receives `size` blocks of `send.len()` elements.
    #[track_caller]
    pub fn allgather<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Allgather, nbytes(send));
        let n = self.size as usize;
        let total = send.len().checked_mul(n).ok_or(Error::Count)?;
        check_fits(total, recv.len())?;
        let mut d = self.desc(DescKind::Allgather);
        d.elem = T::ELEM as u8;
        d.buf = addr(send);
        d.bytes = nbytes(send);
        d.rbuf = addr_mut(recv);
        d.rbytes = nbytes(&recv[..total]);
        self.run(d, Vec::new())
    }

    /// `MPI_Allgather` with `MPI_IN_PLACE`: `buf` holds `size` blocks, mine already at
    /// index `rank`.
    #[track_caller]
    pub fn allgather_in_place<T: Equivalence>(&self, buf: &mut [T]) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure(Primitive::Allgather);
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
        self.run(d, Vec::new())
    }

    /// `MPI_Allgatherv`: rank i's block (`counts[i]` elements) lands at `displs[i]`.
    /// `send.len()` must equal `counts[rank]`.
    #[track_caller]
    pub fn allgatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Allgatherv, nbytes(send));
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
        self.run(d, vec![table])
    }

    /// `MPI_Alltoall`: `send` holds `size` blocks; block j goes to rank j; `recv` receives
    /// `size` blocks of the same size.
    #[track_caller]
    pub fn alltoall<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Alltoall, nbytes(send));
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
        self.run(d, Vec::new())
    }

    /// `MPI_Alltoallv` with per-rank counts and displacements in elements.
    #[track_caller]
    pub fn alltoallv<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = measure_bytes(Primitive::Alltoallv, nbytes(send));
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
        self.run(d, vec![stable, rtable])
    }
}
