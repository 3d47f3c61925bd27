//! Point-to-point calls on a [`Comm`].

use super::check::{check_dest, check_recv_tag, check_send_tag, check_source};
use super::request::{scope, wait_all, Request, Scope};
use super::types::finish;
use super::{addr, addr_mut, ctx, nbytes, Comm, Equivalence, Result, Status};
use crate::datatype::TypeSig;
use crate::descriptor::{DescKind, Descriptor, COMPLETION_FOUND};
use crate::mmds::{self, Primitive};

/// The mode of a send, for the raw post path ([`Comm::post_send_unscoped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// `MPI_Send`/`MPI_Isend`.
    Standard,
    /// `MPI_Ssend`/`MPI_Issend`.
    Synchronous,
    /// `MPI_Rsend`/`MPI_Irsend`.
    Ready,
}

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
        // The element type's signature, for the checks (the C binding replaces it with
        // its datatype's: crate::checks::stamp).
        d.set_type_sig(TypeSig::basic(T::ELEM.sig_code()), buf.len() as u64);
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
        // The element type's signature, for the checks (the C binding replaces it with
        // its datatype's: crate::checks::stamp).
        d.set_type_sig(TypeSig::basic(T::ELEM.sig_code()), buf.len() as u64);
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
        let c = ctx().call_send(d, self.world_of(dest));
        finish(&c).map(|_| ())
    }

    /// `MPI_Send` (returns once the data has moved to the receiver).
    #[track_caller]
    pub fn send<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Send, nbytes(buf));
        self.blocking_send(DescKind::Send, buf, dest, tag)
    }
    /// `MPI_Ssend`.
    #[track_caller]
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Ssend, nbytes(buf));
        self.blocking_send(DescKind::Ssend, buf, dest, tag)
    }
    /// `MPI_Rsend`.
    #[track_caller]
    pub fn rsend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Rsend, nbytes(buf));
        self.blocking_send(DescKind::Rsend, buf, dest, tag)
    }

    /// `MPI_Recv`. A message longer than `buf` gives `Error::Truncate`.
    #[track_caller]
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], source: i32, tag: i32) -> Result<Status> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Recv, nbytes(buf));
        let d = self.recv_desc(DescKind::Recv, buf, source, tag)?;
        finish(&ctx().call(d))
    }

    /// `MPI_Isend`: the request borrows `buf` for the whole scope `s` ([`super::scope`]).
    #[track_caller]
    pub fn isend<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        buf: &'scope [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Isend, nbytes(buf));
        let d = self.send_desc(DescKind::Send, buf, dest, tag)?;
        Ok(s.adopt(ctx().post_send(d, self.world_of(dest)), DescKind::Send))
    }
    /// `MPI_Issend`.
    #[track_caller]
    pub fn issend<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        buf: &'scope [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Issend, nbytes(buf));
        let d = self.send_desc(DescKind::Ssend, buf, dest, tag)?;
        Ok(s.adopt(ctx().post_send(d, self.world_of(dest)), DescKind::Ssend))
    }
    /// `MPI_Irsend`.
    #[track_caller]
    pub fn irsend<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        buf: &'scope [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Irsend, nbytes(buf));
        let d = self.send_desc(DescKind::Rsend, buf, dest, tag)?;
        Ok(s.adopt(ctx().post_send(d, self.world_of(dest)), DescKind::Rsend))
    }
    /// `MPI_Irecv`: the request borrows `buf` mutably for the whole scope `s`.
    #[track_caller]
    pub fn irecv<'scope, T: Equivalence>(
        &self,
        s: &'scope Scope<'scope, '_>,
        buf: &'scope mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Irecv, nbytes(buf));
        let d = self.recv_desc(DescKind::Recv, buf, source, tag)?;
        Ok(s.adopt(ctx().post(d), DescKind::Recv))
    }

    /// The raw path of `MPI_Isend`/`Issend`/`Irsend`, for the C ABI: posts the send and
    /// returns the runtime's request id, which the caller completes through
    /// [`crate::rank::RankCtx::wait_completed`] / `poll_completed` and `take`. Nothing
    /// waits for it on the caller's behalf.
    ///
    /// # Safety
    /// The memory of `buf` must stay valid and unmodified until the request has completed
    /// (its completion was delivered), however long the borrow given here lasts.
    pub unsafe fn post_send_unscoped<T: Equivalence>(
        &self,
        mode: SendMode,
        buf: &[T],
        dest: i32,
        tag: i32,
    ) -> Result<u64> {
        let (primitive, kind) = match mode {
            SendMode::Standard => (Primitive::Isend, DescKind::Send),
            SendMode::Synchronous => (Primitive::Issend, DescKind::Ssend),
            SendMode::Ready => (Primitive::Irsend, DescKind::Rsend),
        };
        let _mmds = mmds::enter_bytes(primitive, nbytes(buf));
        let d = self.send_desc(kind, buf, dest, tag)?;
        Ok(ctx().post_send(d, self.world_of(dest)))
    }

    /// The raw path of `MPI_Irecv`, for the C ABI (see [`Comm::post_send_unscoped`]).
    ///
    /// # Safety
    /// The memory of `buf` must stay valid, and must not be read or written by anyone
    /// else, until the request has completed, however long the borrow given here lasts.
    pub unsafe fn post_recv_unscoped<T: Equivalence>(
        &self,
        buf: &mut [T],
        source: i32,
        tag: i32,
    ) -> Result<u64> {
        let _mmds = mmds::enter_bytes(Primitive::Irecv, nbytes(buf));
        let d = self.recv_desc(DescKind::Recv, buf, source, tag)?;
        Ok(ctx().post(d))
    }

    /// `MPI_Sendrecv`: both are posted, then both awaited. Returns the receive's status.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn sendrecv<T: Equivalence, U: Equivalence>(
        &self,
        send: &[T],
        dest: i32,
        stag: i32,
        recv: &mut [U],
        source: i32,
        rtag: i32,
    ) -> Result<Status> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::Sendrecv, nbytes(send));
        let sd = self.send_desc(DescKind::Send, send, dest, stag)?;
        let rd = self.recv_desc(DescKind::Recv, recv, source, rtag)?;
        let c = ctx();
        scope(|s| {
            let sr = s.adopt(c.post_send(sd, self.world_of(dest)), DescKind::Send);
            let rr = s.adopt(c.post(rd), DescKind::Recv);
            let mut st = wait_all(vec![sr, rr])?;
            Ok(st.pop().expect("two statuses"))
        })
    }

    /// `MPI_Sendrecv_replace` (through a temporary copy of the outgoing data).
    #[track_caller]
    pub fn sendrecv_replace<T: Equivalence>(
        &self,
        buf: &mut [T],
        dest: i32,
        stag: i32,
        source: i32,
        rtag: i32,
    ) -> Result<Status> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
        let _mmds = mmds::enter_bytes(Primitive::SendrecvReplace, nbytes(buf));
        let tmp: Vec<T> = buf.to_vec();
        self.sendrecv(&tmp, dest, stag, buf, source, rtag)
    }

    /// `MPI_Probe`: blocks until a matching message is known; it stays to be received.
    #[track_caller]
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
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
    #[track_caller]
    pub fn iprobe(&self, source: i32, tag: i32) -> Result<Option<Status>> {
        let _site = crate::callsite::enter_rust(std::panic::Location::caller());
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
