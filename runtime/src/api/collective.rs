//! Collective calls on a [`Comm`].

use super::check::{build_table, check_fits, check_op, check_root, prefix_displs};
use super::{addr, addr_mut, nbytes, Comm, Equivalence, Error, ReduceOp, Result};
use crate::descriptor::{DescKind, Descriptor, FLAG_IN_PLACE};
use crate::mmds::{self, Primitive};

impl Comm {
    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        let _mmds = mmds::enter(Primitive::Barrier);
        self.call(self.desc(DescKind::Barrier)).map(|_| ())
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub fn bcast<T: Equivalence>(&self, buf: &mut [T], root: i32) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Bcast, nbytes(buf));
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
        let _mmds = mmds::enter_bytes(Primitive::Reduce, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::Reduce, nbytes(buf));
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
        let _mmds = mmds::enter_bytes(Primitive::Allreduce, nbytes(send));
        self.reduce_to_all(DescKind::Allreduce, send, recv, op)
    }

    /// `MPI_Allreduce` with `MPI_IN_PLACE`.
    pub fn allreduce_in_place<T: Equivalence>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Allreduce, nbytes(buf));
        let mut d = self.reduction::<T>(DescKind::Allreduce, op)?;
        d.flags = FLAG_IN_PLACE;
        d.rbuf = addr_mut(buf);
        d.rbytes = nbytes(buf);
        self.call(d).map(|_| ())
    }

    /// `MPI_Scan` (inclusive prefix reduction in rank order).
    pub fn scan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Scan, nbytes(send));
        self.reduce_to_all(DescKind::Scan, send, recv, op)
    }

    /// `MPI_Exscan` (exclusive; rank 0's `recv` is left untouched).
    pub fn exscan<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Exscan, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::ReduceScatter, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::ReduceScatterBlock, nbytes(send));
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
        let _mmds = mmds::enter(Primitive::Scatter);
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
        let _mmds = mmds::enter(Primitive::Scatterv);
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
        let _mmds = mmds::enter_bytes(Primitive::Gather, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::Gatherv, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::Allgather, nbytes(send));
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
        let _mmds = mmds::enter(Primitive::Allgather);
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
        let _mmds = mmds::enter_bytes(Primitive::Allgatherv, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::Alltoall, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::Alltoallv, nbytes(send));
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
}
