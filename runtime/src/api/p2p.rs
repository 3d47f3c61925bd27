//! Point-to-point calls on a [`Comm`].

use super::check::{check_dest, check_recv_tag, check_send_tag, check_source};
use super::request::{wait_all, Request};
use super::types::finish;
use super::{addr, addr_mut, ctx, nbytes, Comm, Equivalence, Result, Status};
use crate::descriptor::{DescKind, Descriptor, COMPLETION_FOUND};
use crate::mmds::{self, Primitive};

impl Comm {
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
        let _mmds = mmds::enter_bytes(Primitive::Send, nbytes(buf));
        self.blocking_send(DescKind::Send, buf, dest, tag)
    }
    /// `MPI_Ssend`.
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Ssend, nbytes(buf));
        self.blocking_send(DescKind::Ssend, buf, dest, tag)
    }
    /// `MPI_Rsend`.
    pub fn rsend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let _mmds = mmds::enter_bytes(Primitive::Rsend, nbytes(buf));
        self.blocking_send(DescKind::Rsend, buf, dest, tag)
    }

    /// `MPI_Recv`. A message longer than `buf` gives `Error::Truncate`.
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Status> {
        let _mmds = mmds::enter_bytes(Primitive::Recv, nbytes(buf));
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
        let _mmds = mmds::enter_bytes(Primitive::Isend, nbytes(buf));
        self.post_send(DescKind::Send, buf, dest, tag)
    }
    /// `MPI_Issend`.
    pub fn issend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let _mmds = mmds::enter_bytes(Primitive::Issend, nbytes(buf));
        self.post_send(DescKind::Ssend, buf, dest, tag)
    }
    /// `MPI_Irsend`.
    pub fn irsend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let _mmds = mmds::enter_bytes(Primitive::Irsend, nbytes(buf));
        self.post_send(DescKind::Rsend, buf, dest, tag)
    }
    /// `MPI_Irecv`: the request borrows `buf` mutably until it completes.
    pub fn irecv<'a, T: Equivalence>(
        &self,
        buf: &'a mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        let _mmds = mmds::enter_bytes(Primitive::Irecv, nbytes(buf));
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
        let _mmds = mmds::enter_bytes(Primitive::Sendrecv, nbytes(send));
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
        let _mmds = mmds::enter_bytes(Primitive::SendrecvReplace, nbytes(buf));
        let tmp: Vec<T> = buf.to_vec();
        self.sendrecv(&tmp, dest, stag, buf, source, rtag)
    }

    /// `MPI_Probe`: blocks until a matching message is known; it stays to be received.
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        let _mmds = mmds::enter(Primitive::Probe);
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
        let _mmds = mmds::enter(Primitive::Iprobe);
        check_source(source, self.size)?;
        check_recv_tag(tag)?;
        let mut d = self.desc(DescKind::Iprobe);
        d.peer = source;
        d.tag = tag;
        let c = ctx().call(d);
        let st = finish(&c)?;
        Ok((c.flags & COMPLETION_FOUND != 0).then_some(st))
    }
}
